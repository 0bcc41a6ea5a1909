"""Issue 47, classes 5 and 6: every size a measuring command accepts runs or is refused in one line before anything
is allocated; a command offers only the options that can change its answer; every refusal names the user's own
input; a file attn-cost reads and leaves out says why where it is used; an import says what it did."""

from __future__ import annotations

import pytest
from attn_cost.costmodel.errors import UserError

BIG_CHUNK = str(2**32)  # inside --chunk's documented range (at most 2^32)
HUGE = ["--h", "65536", "--b", "1048576"]  # with d = 2^16: 2^52 elements a token in Q (every allocator refuses it)


# -- class 5: sizes no tensor can have are refused before anything is allocated ------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["measure", "--cpu", "--variant", "linear-chunked-fused", "--n", "64", "--chunk", BIG_CHUNK],
        ["measure", "--cpu", "--variant", "linear-chunked", "--n", "64", "--chunk", BIG_CHUNK],
        ["profile", "--cpu", "--pair", "linear-chunked-fused:linear", "--chunk", BIG_CHUNK],
        ["measure", "--cpu", "--variant", "softmax", "--n", str(2**32)],
        ["validate", "--cpu", "--pair", "softmax:linear", *HUGE, "--d", "65536", "--fit-d", "65536", "--fit-d", "8"],
        ["campaign", "--cpu", "--out", "run", "--pair", "softmax:linear", *HUGE, "--d", "65536"],
    ],
)
def test_a_tensor_beyond_what_pytorch_can_hold_is_refused_before_anything_runs(cli, tmp_path, args) -> None:
    """A C×C block of scores at C = 2^32 is 2^64 elements, as is softmax's N×N score matrix at N = 2^32: PyTorch
    cannot even compute such a storage's size (a RuntimeError, not an out-of-memory). The refusal names the user's
    option, and comes before the store (or a campaign's folder) is made."""
    r = cli(*args)
    assert r.code == 2, r.err
    assert r.err.count("\n") == 1 and r.err.startswith("attn-cost: error: "), r.err
    given = next((f"{flag} {args[args.index(flag) + 1]}" for flag in ("--chunk", "--b") if flag in args), "--n")
    assert given in r.err and "2^63 bytes" in r.err, r.err
    assert not (tmp_path / "home").exists() and not (tmp_path / "run").exists()  # nothing made, nothing allocated


def test_a_case_is_never_built_at_sizes_no_tensor_can_have() -> None:
    """The one place every measurement builds its case refuses too (a search that would reach such a length)."""
    from attn_cost.profilers.measure.cases import build_case
    from attn_cost.profilers.measure.sizes import Sizes

    with pytest.raises(UserError, match="--chunk 4294967296"):
        build_case("linear-chunked", "core", Sizes(N=64, d=16, C=2**32))
    build_case("linear-chunked", "core", Sizes(N=64, d=16, C=2**16))  # one chunk of 2^16 tokens: 2^32 scores


def test_a_chunk_longer_than_the_sequence_is_one_whole_chunk(cli) -> None:
    """--chunk C > N: one chunk, padded to C tokens, as the op list writes it and the reference runs it."""
    rows = [
        cli("measure", "--cpu", "--variant", "linear-chunked", "--n", n, "--chunk", "32", "--d", "4", "--json")
        for n in ("24", "32")
    ]
    assert all(r.code == 0 for r in rows), [r.err for r in rows]
    shorter, whole = (r.json()["results"][0] for r in rows)
    assert shorter["seconds"] is not None and shorter["peak_bytes"] == shorter["predicted_peak_bytes"]
    assert shorter["flops_matmul"] == whole["flops_matmul"]  # 24 tokens cost one chunk of 32


# -- class 6a: a command offers only the options that can change its answer ----------------------------------------


def _flags(command: str) -> set[str]:
    import typer
    from attn_cost.cli.main import app

    click_command = typer.main.get_command(app).commands[command]
    return {opt for p in click_command.params for opt in p.opts}


COUNTING_FLAGS = {
    "--causal-count", "--tile", "--backward", "--n-kv", "--align", "--bias", "--dropout", "--padding-mask",
}  # fmt: skip


def test_commands_offer_only_the_counting_options_that_reach_what_they_price() -> None:
    """Pricing inference only (no --mode), a command has no --dropout and no --backward; a decoding step has no
    padding mask, causal mask, key length of its own, projection bias or chunk; `measure` counts nothing under a
    counting rule; `profile` and `validate` measure the references, which run neither N_kv, biases of the user's
    choosing, dropout nor a padding mask."""
    every = {"measure", "profile", "validate", "decode", "heads", "cheapest", "crossover", "formula", "io",
             "predict", "report", "trace", "calibrate", "campaign", "check-flops"}  # fmt: skip
    flags = {name: _flags(name) for name in every}
    for name, have in flags.items():
        if "--mode" not in have:
            assert not have & {"--dropout", "--backward"}, name
    assert not flags["decode"] & (COUNTING_FLAGS | {"--chunk", "--proj-len", "--features", "--landmarks"})
    assert {"--kv-heads", "--window"} <= flags["decode"]  # gqa and sliding-window decode with them
    assert not flags["measure"] & COUNTING_FLAGS
    for name in ("profile", "validate"):
        assert flags[name] & COUNTING_FLAGS == {"--causal-count", "--tile"}, name
    assert flags["heads"] & COUNTING_FLAGS == {"--causal-count", "--tile", "--n-kv", "--align", "--padding-mask"}
    assert flags["crossover"] >= COUNTING_FLAGS and flags["formula"] >= COUNTING_FLAGS


def test_where_each_option_reaches_is_what_the_engine_derives() -> None:
    """`options.COUNTING_REACH` and `SIZE_REACH` (which commands get which option) against the catalogue's op lists:
    an option reaches a scope and mode where some variant's graph takes it (its factor in the FLOPs, its symbol in a
    shape, its op among the graph's, a parameter it adds), and nowhere else."""
    import sympy as sp
    from attn_cost.cli.options import COUNTING_REACH, SIZE_REACH
    from attn_cost.costmodel.conventions import FULL
    from attn_cost.costmodel.counting import F_bwd, F_causal, F_chunk
    from attn_cost.costmodel.errors import ModelError
    from attn_cost.costmodel.scopes import MODES
    from attn_cost.costmodel.symbols import BY_NAME
    from attn_cost.costmodel.variants import all_variants, derive

    found: dict[str, set] = {}

    def add(key: str, *where: str) -> None:
        found.setdefault(key, set()).add(where)

    def symbols(graph) -> set:
        sizes = [*(s for op in graph.ops for s in (*op.output.shape, op.workspace, op.repeat))]
        sizes += [s for t in (*graph.inputs, *(p for p, _ in graph.params)) for s in t.shape]
        return set().union(*(sp.sympify(s).free_symbols for s in sizes))

    for v in all_variants():
        for scope in v.scopes:
            for mode in MODES:
                plain = derive(v.name, scope, mode)
                factors = plain.flops(FULL, None).free_symbols
                if factors & {F_causal, F_chunk}:
                    add("causal_count", scope, mode)
                    add("tile", scope, mode)
                if F_bwd in factors:
                    add("backward", scope, mode)
                for name in SIZE_REACH:
                    if BY_NAME[name] in symbols(plain.graph) | factors:
                        add(name, scope)
                try:
                    keyed = derive(v.name, scope, mode, True)
                except (UserError, ModelError):
                    keyed = None
                if keyed is not None:
                    add("n_kv", scope, mode)
                    if F_causal in keyed.flops(FULL, None).free_symbols:
                        add("align", scope, mode)
                dropped = mode == "training" and derive(v.name, scope, mode, dropout=sp.Rational(1, 10)).graph.applied
                if dropped and "dropout" in dropped:
                    add("dropout", scope, mode)
                if "padding" in derive(v.name, scope, mode, padding=True).graph.applied:
                    add("padding_mask", scope, mode)
                biased = (derive(v.name, scope, mode, bias=x).params for x in ("all", "none"))
                if sp.expand(next(biased) - next(biased)) != 0:
                    add("bias", scope, mode)
    for name, reach in COUNTING_REACH.items():
        assert found.get(name, set()) == {(s, m) for s in reach.scopes for m in reach.modes}, name
    for name, scopes in SIZE_REACH.items():
        assert found[name] == {(s,) for s in scopes}, name
