"""Counting rules as switches (causal share, backward multiplier, N_kv and alignment) and `attn-cost claims`.

Expected values come from the FlashAttention benchmark's formula, from enumerating the (query, key)
pairs a mask keeps, or from the papers, never from the code under test.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import sympy as sp
from attn_cost.costmodel.conventions import CONVENTIONS
from attn_cost.costmodel.counting import Counting, N_kv
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.symbols import N, b, d, h
from attn_cost.costmodel.variants import derive

SIZES = {b: 2, h: 3, d: 16}
MATMUL = CONVENTIONS["matmul"]
FLASH = CONVENTIONS["flash-bench"]
FLASH_RULES = Counting(causal="half", backward="recompute")


def flops(variant: str, conv, counting: Counting, n: int, mode: str = "inference", n_kv: int | None = None) -> int:
    derived = derive(variant, "core", mode, counting.n_kv is not None)
    values = {**SIZES, N: n, **({N_kv: n_kv} if n_kv is not None else {})}
    return int(derived.flops(conv, counting).xreplace(values))


def flash_benchmark(batch: int, seqlen: int, headdim: int, nheads: int, causal: bool, mode: str) -> float:
    """FlashAttention's benchmarks/benchmark_flash_attention.py `flops`, restated."""
    f = 4 * batch * seqlen**2 * nheads * headdim // (2 if causal else 1)
    return f if mode == "fwd" else (2.5 * f if mode == "bwd" else 3.5 * f)


def kept_pairs(nq: int, nk: int, align: str) -> list[tuple[int, int]]:
    """(query, key) pairs a causal mask keeps: key j <= i (top-left) or j <= i + nk − nq (bottom-right)."""
    shift = nk - nq if align == "bottom-right" else 0
    return [(i, j) for i in range(nq) for j in range(nk) if j <= i + shift]


@pytest.mark.parametrize("variant", ["softmax-fused", "softmax", "softmax-fused-causal", "softmax-causal"])
@pytest.mark.parametrize("n", [64, 256])
def test_flash_bench_reproduces_the_flashattention_benchmark(variant: str, n: int) -> None:
    causal = "causal" in variant
    args = (SIZES[b], n, SIZES[d], SIZES[h], causal)
    assert flops(variant, FLASH, FLASH_RULES, n) == flash_benchmark(*args, "fwd")
    assert flops(variant, FLASH, FLASH_RULES, n, "training") == flash_benchmark(*args, "fwd_bwd")


def test_flash_bench_counts_only_the_score_products() -> None:
    """A layer adds projections; the benchmark's accounting leaves them out, `matmul` does not."""
    layer = derive("softmax", "layer").flops(FLASH, FLASH_RULES).xreplace({**SIZES, N: 100})
    assert layer == 4 * 2 * 3 * 100**2 * 16
    assert derive("linear").flops(FLASH, FLASH_RULES) == 0


def test_backward_multiplier_of_the_score_products() -> None:
    n = 32
    forward = 4 * SIZES[b] * SIZES[h] * n * n * SIZES[d]  # QKᵀ and PV, 2·N·N·d each
    assert flops("softmax", MATMUL, Counting(), n, "training") == forward * 3  # 2x backward
    assert flops("softmax", MATMUL, Counting(backward="recompute"), n, "training") == forward * 7 // 2  # 2.5x


@pytest.mark.parametrize("n", [1, 7, 64])
def test_causal_triangle_counts_the_scores_the_mask_keeps(n: int) -> None:
    scores = len(kept_pairs(n, n, "top-left"))
    assert scores == n * (n + 1) // 2
    per_score = 4 * SIZES[d] * SIZES[b] * SIZES[h]  # two products, 2d each
    for variant in ("softmax-causal", "softmax-fused-causal"):
        assert flops(variant, MATMUL, Counting(causal="triangle"), n) == scores * per_score
        assert flops(variant, MATMUL, Counting(), n) == n * n * per_score  # dense: FlopCounterMode's count


def test_full_convention_charges_every_score_op_the_causal_share() -> None:
    """Scale and softmax (6 ops per score) and the two products, on the triangle only."""
    n, scores = 10, 55
    assert flops("softmax-causal", CONVENTIONS["full"], Counting(causal="triangle"), n) == scores * (
        4 * SIZES[d] + 6
    ) * (SIZES[b] * SIZES[h])


@pytest.mark.parametrize(("nq", "nk"), [(5, 9), (1, 9), (9, 9), (3, 40)])
@pytest.mark.parametrize("align", ["bottom-right", "top-left"])
def test_n_kv_alignment_counts(nq: int, nk: int, align: str) -> None:
    scores = len(kept_pairs(nq, nk, align))
    rules = Counting(causal="triangle", n_kv=nk, align=align)
    per_score = 4 * SIZES[d] * SIZES[b] * SIZES[h]
    for variant in ("softmax-causal", "softmax-fused-causal"):
        assert flops(variant, MATMUL, rules, nq, n_kv=nk) == scores * per_score
    dense = Counting(n_kv=nk, align=align)
    assert flops("softmax-causal", MATMUL, dense, nq, n_kv=nk) == nq * nk * per_score


def test_decode_alignment_is_the_xformers_question() -> None:
    """One query over 4,096 keys: bottom-right sees them all, top-left only the first."""
    bottom_right = Counting("triangle", n_kv=4096, align="bottom-right")
    assert len(kept_pairs(1, 4096, "bottom-right")) == bottom_right.scores(1, 4096) == 4096
    assert len(kept_pairs(1, 4096, "top-left")) == Counting("triangle", n_kv=4096, align="top-left").scores(1, 4096)


def test_the_default_alignment_is_pytorchs_is_causal() -> None:
    """softmax-fused-causal is SDPA with is_causal=True: with N < N_kv PyTorch keeps key j <= i (top-left)."""
    import torch
    import torch.nn.functional as F  # noqa: N812

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, n, 8, generator=gen, dtype=torch.float64) for n in (5, 12, 12))
    got = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    for align in ("top-left", "bottom-right"):
        allowed = torch.zeros(5, 12, dtype=torch.bool)
        for i, j in kept_pairs(5, 12, align):
            allowed[i, j] = True
        same = torch.allclose(got, F.scaled_dot_product_attention(q, k, v, attn_mask=allowed))
        assert same == (align == "top-left")
    assert Counting("triangle", n_kv=12).scores(5, 12) == len(kept_pairs(5, 12, "top-left")) == 15


def test_tiles_refuse_a_key_length_the_tile_does_not_divide(cli) -> None:
    with pytest.raises(UserError, match="divide"):
        Counting("tiles", tile=128, n_kv=4000)
    r = cli("formula", "softmax-fused-causal", "--causal-count", "tiles", "--n-kv", "100")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err


def test_the_flash_bench_row_says_which_counting_it_uses(cli) -> None:
    """The benchmark: 4·b·s²·h·d forward, halved when causal, fwd+bwd 3.5× forward: 7bhN²d in training."""
    r = cli("formula", "softmax-fused-causal", "--mode", "training", "--json")
    assert r.code == 0, r.err
    data = r.json()
    env = {"b": b, "h": h, "N": N, "d": d}
    assert sp.sympify(data["flops"]["flash-bench"], locals=env) == 14 * b * h * N**2 * d  # under dense, 2x
    assert data["flops_counting"] == "Counting: causal dense, backward 2x."
    own = data["flops_own_counting"]["flash-bench"]
    assert sp.sympify(own["flops"], locals=env) == sp.Rational(7, 2) * 4 * b * h * N**2 * d / 2
    assert own["counting"]["causal_count"] == "half" and own["counting"]["backward"] == "recompute"
    r = cli("formula", "softmax-fused-causal", "--mode", "training")
    (line,) = [x for x in r.out.splitlines() if "its own" in x]
    assert "7bhN²d" in line and "causal half" in line


def test_linear_causal_fused_training_runs_the_kernels_backward() -> None:
    """causal_product: 2 passes of 2·d·d_v per token forward, 5 backward (state recomputed, then reversed);
    the normaliser φ(Qᵢ)·Zᵢ: 2d forward, 2× that backward."""
    got = derive("linear-causal-fused", "core", "training").flops(MATMUL)
    kernel = 2 * (2 * d * d) + 5 * (2 * d * d)
    assert sp.expand(got - b * h * N * (kernel + 3 * 2 * d)) == 0


@pytest.mark.parametrize(("nq", "nk", "tile"), [(16, 16, 4), (16, 24, 4), (12, 36, 6)])
@pytest.mark.parametrize("align", ["bottom-right", "top-left"])
def test_tiles_count_every_block_with_a_kept_score(nq: int, nk: int, tile: int, align: str) -> None:
    kept = set(kept_pairs(nq, nk, align))
    blocks = {(i // tile, j // tile) for i, j in kept}
    rules = Counting(causal="tiles", tile=tile, n_kv=nk if nk != nq else None, align=align)
    per_score = 4 * SIZES[d] * SIZES[b] * SIZES[h]
    got = flops("softmax-causal", MATMUL, rules, nq, n_kv=nk if nk != nq else None)
    assert got == len(blocks) * tile * tile * per_score


def test_named_factors_stay_symbols_until_substituted() -> None:
    expr = derive("softmax-causal", "core", "training").flops(MATMUL, None)
    assert {s.name for s in expr.free_symbols} >= {"F_causal", "F_bwd"}
    assert sp.expand(Counting().apply(expr) - derive("softmax-causal", "core", "training").flops(MATMUL)) == 0


@pytest.mark.parametrize(
    "kwargs", [{"causal": "trinagle"}, {"backward": "3x"}, {"align": "middle"}, {"tile": 0}, {"n_kv": -1}]
)
def test_bad_switches_are_user_errors(kwargs: dict) -> None:
    with pytest.raises(UserError):
        Counting(**kwargs)


def test_n_kv_refuses_variants_written_for_equal_lengths() -> None:
    for variant in ("linear-causal", "linear-recurrent"):
        with pytest.raises(UserError, match="--n-kv"):
            derive(variant, "core", "inference", True)
    with pytest.raises(UserError, match="core"):
        derive("softmax", "layer", "inference", True)


def test_commands_take_the_switches_and_record_them(cli) -> None:
    r = cli(
        "crossover", "--d", "64", "--pair", "softmax-causal:linear-recurrent", "--causal-count", "triangle", "--json"
    )
    assert r.code == 0, r.err
    row = r.json()["results"][0]
    assert row["counting"]["causal_count"] == "triangle" and row["counting"]["causal_scores"] == "N**2/2 + N/2"
    r = cli("formula", "softmax-fused-causal", "--convention", "flash-bench", "--mode", "training", "--json")
    assert r.code == 0, r.err
    data = r.json()
    assert data["counting"]["causal_count"] == "half" and data["counting"]["backward"] == "recompute"
    assert sp.sympify(data["flops"]["flash-bench"], locals={"b": b, "h": h, "N": N, "d": d}) == 7 * b * h * N**2 * d
    r = cli("cheapest", "--variant", "softmax-causal", "--variant", "softmax-fused-causal", "--n-kv", "4096")
    assert r.code == 0, r.err
    assert "N_kv=4,096 top-left" in r.out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["crossover", "--causal-count", "nope"], "unknown --causal-count"),
        (["crossover", "--scope", "layer", "--n-kv", "64"], "--n-kv applies to the attention core"),
        (["crossover", "--pair", "linear-causal:softmax-causal", "--n-kv", "64"], "--n-kv does not apply"),
        (["formula", "softmax", "--tile", "0", "--causal-count", "tiles"], "--tile must be a positive integer"),
    ],
)
def test_bad_counting_options_end_in_one_line(cli, args: list[str], needle: str) -> None:
    r = cli(*args)
    assert r.code == 2 and needle in r.err and len(r.err.strip().splitlines()) == 1, r.err


# -- claims --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def records() -> list[dict]:
    from attn_cost.costmodel.claims import claims

    return claims()


def test_every_claim_has_a_verdict_and_a_reason(records: list[dict]) -> None:
    from attn_cost.costmodel.claims import VERDICTS

    assert len(records) >= 40
    for rec in records:
        assert set(rec) == {"paper", "claim", "quote", "published", "derived", "verdict", "reason"}
        assert rec["verdict"] in VERDICTS and rec["reason"] and rec["derived"], rec
    papers = {rec["paper"].split(" (")[0] for rec in records}
    assert papers >= {"TaylorShift", "Cost-Effective Attention", "Transformers are RNNs", "Latte"}
    assert {rec["verdict"] for rec in records} == set(VERDICTS)


def test_the_claims_the_issue_names_are_listed(records: list[dict]) -> None:
    text = [f"{r['claim']} {r['published']}" for r in records]
    for needle in (
        "Table 2: N0",
        "Table 2: N1",
        "Eq. 6",
        "Eq. 7",
        "FLOP-optimal heads",
        "900 tokens",
        "1800 tokens",
        "Heads ablation",
        "saves parameters",
        "linear attention time",
        "Latte",
    ):
        assert any(needle in t for t in text), needle


def test_claims_derive_the_papers_table_2(records: list[dict]) -> None:
    """TaylorShift Table 2: the derived rows equal the paper's."""
    rows = {r["claim"]: r for r in records}
    assert rows["Table 2: N0 for d = 8..128"]["derived"] == "73, 273, 1,057, 4,161, 16,513"
    assert rows["Table 2: N1 for d = 8..128"]["derived"] == "47, 159, 574, 2,174, 8,446"
    assert rows["Table 2: N0 for d = 8..128"]["verdict"] == "holds"
    hos = rows["Sec. 4: Optimized attention saves parameters"]
    assert hos["verdict"] == "holds" and "25% (d_m = 32)" in hos["derived"]
    assert rows["Table 1: standard attention memory"]["verdict"] == "does not hold"  # O(T²D) overstates O(T² + TD)


def test_claims_json_and_terminal(cli) -> None:
    r = cli("claims", "--json")
    assert r.code == 0, r.err
    data = r.json()
    assert list(data) == ["claims"] and len(data["claims"]) >= 40
    r = cli("claims", env={"COLUMNS": "80"})
    assert r.code == 0, r.err
    assert max(len(line) for line in r.out.splitlines()) <= 80
    assert "Table 2: N0 for d = 8..128" in r.out and "claims:" in r.out.split("\n\n")[-1]


@pytest.mark.integration  # a fresh interpreter
def test_claims_import_neither_torch_nor_plotly() -> None:
    code = (
        "import sys; from attn_cost.cli.claims import blocks; from attn_cost.costmodel.claims import claims; "
        "blocks(claims()); assert 'torch' not in sys.modules and 'plotly' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


def test_docs_claims_md_is_the_commands_output(cli) -> None:
    r = cli("claims", "--markdown")
    assert r.code == 0, r.err
    doc = (Path(__file__).parents[1] / "docs" / "claims.md").read_text(encoding="utf-8")
    assert doc == r.out, "regenerate it: attn-cost claims --markdown > docs/claims.md"


SEEDS = Path(__file__).parents[2] / "shared" / "seeds"
MARKUP = (
    (r"$d = \frac{d_\text{emb}}{h}$", "d = d_emb/h"),
    (r"$d \approx 0.52$", "d ≈ 0.52"),
    (r"$\max(D, M)$", "max(D, M)"),
    ("$h$", "h"),
    (r"$\mathcal{O}(N^2 \max(D, M))$", "O(N² max(D, M))"),
    (r"$\mathcal{O}(N^2)$", "O(N²)"),
    (r"$\mathcal{O}(NDM)$", "O(NDM)"),
    (r"$\mathcal{O}(ND^2M)$", "O(ND²M)"),
    (r"$N > D^2$", "N > D²"),
    (r"$\mathcal{O}(N)$", "O(N)"),
    ("*linear transformer*", "linear transformer"),
    ("L𝐿Litalic_L", "L"),
    ("<em>", ""),
    ("</em>", ""),
)
"""The seeds' math and HTML markup, as the quotes render it (numbers untouched)."""


NOT_SEEDED = {
    "RetNet (Sun et al.)": "the abstract of arXiv 2307.08621",
    "GLA (Yang et al.)": "the abstract of arXiv 2312.06635v3 (arxiv.org/html/2312.06635v3)",
    "DeltaNet (Yang et al., 2024)": "the abstract of arXiv 2406.06484v5 (arxiv.org/html/2406.06484v5)",
}
"""Papers whose claims quote a text that is not among the seeds: where each quote was read (their bodies were not
reachable; their abstracts were). The seed checks below skip them."""


def test_a_quote_from_outside_the_seeds_names_where_it_was_read(records: list[dict]) -> None:
    """Every quoted paper is either a seed or listed in NOT_SEEDED with its source, and its printed value is part of
    its quote: a new paper cannot slip past the seed checks unnamed."""
    seeds = {"TaylorShift (Nauen et al., arXiv v1)", "TaylorShift (ICPR)", "Cost-Effective Attention (Hosseini et al.)",
             "Transformers are RNNs (Katharopoulos et al.)", "Latte (Dolga et al.)",
             "Which Transformer to Favor (Nauen et al.)"}  # fmt: skip
    assert {r["paper"] for r in records} <= seeds | set(NOT_SEEDED)
    for r in records:
        if r["paper"] in NOT_SEEDED:
            assert r["quote"] and r["published"] in r["quote"], r["claim"]


@pytest.mark.skipif(not SEEDS.is_dir(), reason="the paper texts are not next to this checkout")
def test_every_quote_is_the_papers_text_verbatim(records: list[dict]) -> None:
    import html

    text = " ".join(html.unescape(f.read_text(encoding="utf-8")) for f in SEEDS.glob("*.txt"))
    for old, new in MARKUP:
        text = text.replace(old, new)
    text = " ".join(text.split())
    quoted = [r for r in records if r["quote"] and r["paper"] not in NOT_SEEDED]
    assert len(quoted) >= 20
    for r in quoted:
        assert " ".join(r["quote"].split()) in text, r["quote"]
        assert r["published"] in r["quote"] or "Table" in r["claim"] or r["published"].startswith("h = "), r


def test_the_reviewed_rows_quote_and_judge_the_paper(records: list[dict]) -> None:
    from attn_cost.costmodel.claims import INCONSISTENT, MEASURED

    rows = {r["claim"]: r for r in records}
    icpr = rows["FLOP-optimal heads, ICPR counting"]
    assert icpr["published"] == "d ≈ 0.52" and icpr["verdict"] == "does not hold" and "0.530" in icpr["derived"]
    kat = rows["Sec. 3.3.2: the cost per timestep of a transformer"]
    assert "square" in kat["published"] and "×4.000" in kat["derived"] and "×2.000" in kat["derived"]
    amazon = rows["App. B.4.1 and Table 9: Super parameters, Amazon"]
    assert amazon["verdict"] == INCONSISTENT and "37,184" in amazon["derived"]  # 2(128² + 128) + 64² + 64
    assert 2 * (128**2 + 128) + 64**2 + 64 == 37184
    measured = [r for r in records if "Figure 2" in r["claim"] or "ablation" in r["claim"].lower()]
    assert len(measured) >= 8 and all(r["verdict"] == MEASURED for r in measured if "text" not in r["claim"])
    for r in records:  # a measured claim is never judged against a FLOP count
        if r["verdict"] in ("holds", "does not hold"):
            assert "measured on" not in r["reason"], r
    s_i = rows["Sec. 3.3.1: storing every Sᵢ (a plain cumulative sum) multiplies memory by max(D, M)"]
    assert s_i["published"] == "max(D, M) times"


def test_parameter_rows_compare_with_the_table(monkeypatch) -> None:
    """The derived counts are compared with the published ones: a wrong table value does not hold."""
    from attn_cost.costmodel import claims as cl

    assert cl._param_table(32, [4224, 3168, 2112])().verdict == "holds"
    assert cl._param_table(32, [4224, 3168, 2113])().verdict == "does not hold"
    assert 4 * (32**2 + 32) == 4224 and 3 * (32**2 + 32) == 3168


def test_the_missing_claims_are_listed(records: list[dict]) -> None:
    text = " ".join(f"{r['claim']} {r['published']}" for r in records)
    for needle in (
        "800 tokens",
        "1700 tokens",
        "18d",
        "0.6%",
        "½d² + 2d + ½",
        "h = 1 (23847 ims/s)",
        "approximately 50%",
        "2.5–7.5%",
        "5–15%",
        "2.5–10%",
        "whenever d_m ≥ ℓ",
        "2.36M / 1.77M / 1.18M",
        "up to 4000x",
        "constant memory",
        "Table 1: Performer",
        "slightly slower",
        "4Nd²(d + 1) + 2Nd²",
        "linear time and space",
        "α/12 + 25/(12α) − 5/12",
        "417 ims/s",
        "longer than 1025 tokens",
        "N(4d_emb³/h² + 10d_emb²/h + 9d_emb + 4h)",
        "O(N log N)",
        "Remarks 3.2 and 3.4",
        "124M / 117M / 110M",
        "14.72%",
        "3/5 as fast",
        "up to 66%",
        "three orders of magnitude",
        "O(N√N)",
        "Perceiver",
        "O(LD) time, O(L) memory",
    ):
        assert needle in text, needle
    assert len(records) >= 105


def test_unsupported_claims_are_named_not_hidden(records: list[dict]) -> None:
    """Paper-internal contradictions: the verdict says so, with the numbers."""
    rows = {r["claim"]: r for r in records}
    fig6 = rows["App. B.2 and Figure 6: standard's FLOPs over Efficient's"]
    assert fig6["verdict"] == "the paper contradicts itself" and "1.667" in fig6["derived"]
    assert 15 / 9 - 1 > 0.66  # Eq. 24 at d_m ≫ hℓ: 15ℓd_m / 9ℓd_m
    caption = rows["Tables 2 and 10, captions: Optimized and Efficient parameter fractions"]
    assert caption["verdict"] == "the paper contradicts itself" and "0.75" in caption["derived"]
    assert rows["Calculator text: the transition points at d = 32"]["derived"].startswith("N1 = 574")


def test_html_report_has_the_claims_section(records: list[dict]) -> None:
    from attn_cost.profilers.report.page import _claims

    page = _claims({"claims": records})
    assert page.count("<tr>") == len(records) + 1 and "does not hold" in page


@pytest.mark.skipif(not SEEDS.is_dir(), reason="the paper texts are not next to this checkout")
def test_every_number_of_a_papers_value_is_printed_in_the_paper(records: list[dict]) -> None:
    """Character for character: 0.52 stays 0.52, 1057 is not re-typed as 1,057."""
    import html
    import re

    text = " ".join(html.unescape(f.read_text(encoding="utf-8")) for f in SEEDS.glob("*.txt"))
    for r in (r for r in records if r["paper"] not in NOT_SEEDED):
        for number in re.findall(r"\d[\d,]*(?:\.\d+)?", r["published"]):
            assert number.rstrip(",") in text, (number, r["claim"])


@pytest.mark.parametrize("align", ["top-left", "bottom-right"])
def test_tiles_never_count_more_than_dense(align: str) -> None:
    """Below one tile (N < T) a blocked kernel computes the whole matrix once: the tile formula N(N+T)/2 would
    exceed the N·M scores there are, so the curve is capped by the dense count (and equals the formula for N ≥ T)."""
    from attn_cost.costmodel.crossover import Setting, curve, evaluate

    dims = {d: 64, h: 1, b: 1}
    kv = 4096 if align == "bottom-right" else None
    tiles = curve(
        "softmax-fused-causal", "flops", Setting("matmul", counting=Counting("tiles", 128, n_kv=kv, align=align)), dims
    )
    dense = curve("softmax-fused-causal", "flops", Setting("matmul", counting=Counting(n_kv=kv, align=align)), dims)
    for n in (1, 2, 64, 127, 128, 200, 256, 1000, 4096):
        assert evaluate(tiles, n) <= evaluate(dense, n), n
    m = kv or 256
    formula = 256 * m - 256 * (256 - 128) // 2 if kv else 256 * (256 + 128) // 2  # T | N: exact tile count
    assert evaluate(tiles, 256) == 4 * 64 * formula
    assert evaluate(tiles, 1) == 4 * 64 * (kv or 1)  # one query: its row, not half a tile more


def test_a_claim_naming_no_check_is_refused_when_the_claims_are_loaded(tmp_path) -> None:
    """claims.json names each claim's check; a name that is no check (or a field too many) fails at load, before
    any claim is printed."""
    import json

    from attn_cost.costmodel.claims import CLAIMS_FILE, load_claims

    rows = json.loads(CLAIMS_FILE.read_text(encoding="utf-8"))
    assert len(load_claims()) == len(rows)
    bad = tmp_path / "claims.json"
    bad.write_text(json.dumps([{**rows[0], "check": {"check": "no_such_check"}}]), encoding="utf-8")
    with pytest.raises(ValueError, match="not a check"):
        load_claims(bad)
    bad.write_text(json.dumps([{**rows[0], "page": 3}]), encoding="utf-8")
    with pytest.raises(ValueError, match="has fields"):
        load_claims(bad)
