"""Issue 47, classes 5 and 6: every size a measuring command accepts runs or is refused in one line before anything
is allocated; a command offers only the options that can change its answer; every refusal names the user's own
input; a file attn-cost reads and leaves out says why where it is used; an import says what it did."""

from __future__ import annotations

import json
from pathlib import Path

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
    from attn_cost.cli.main import command_line

    click_command = command_line().commands[command]
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
                for option in ("feature_map", "normalize"):  # a linear attention's φ and normaliser
                    if option in derive(v.name, scope, mode, feature_map="relu", normalize=False).graph.applied:
                        add(option, scope, mode)
                biased = (derive(v.name, scope, mode, bias=x).params for x in ("all", "none"))
                if sp.expand(next(biased) - next(biased)) != 0:
                    add("bias", scope, mode)
    for name, reach in COUNTING_REACH.items():
        assert found.get(name, set()) == {(s, m) for s in reach.scopes for m in reach.modes}, name
    for name, scopes in SIZE_REACH.items():
        assert found[name] == {(s,) for s in scopes}, name


def test_an_option_that_needs_another_is_refused_without_it(cli) -> None:
    r = cli("crossover", "--baseline", "linear", "--d", "64")  # --baseline is the A side of --all
    assert r.code == 2 and r.err.count("\n") == 1 and "--all" in r.err, r.err


# -- class 6b, 6c: a refusal names what the user typed; one value is one value however it is written -----------------

PAIR = ["--pair", "softmax:linear", "--d", "64"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["crossover", *PAIR, "--mode", "training", "--dropout", "0.99999999999999999"], "0.99999999999999999 is"),
        (["crossover", *PAIR, "--mode", "training", "--dropout", "1e-400"], "--dropout 1e-400"),
        (["crossover", *PAIR, "--device", "h100-sxm5-80gb", "--launch-us", "1e7"], "got 1e7"),
        (["crossover", "--pair", "softmax:linear", "--d", "1_000_000"], "--d 1_000_000 "),
        (["crossover", "--pair", "softmax:linear", "--d", "00"], "got 00"),
        (["predict", "--device", "h100-sxm5-80gb", "--variant", "softmax", "--n", "0x10"], "0x10"),
        (["predict", "--device", "h100-sxm5-80gb", "--variant", "softmax", "--n", "+0"], "got +0"),
        (["results", "ls", "--limit", "-01"], "got -01"),
        (["campaign", "--cpu", "--out", "run", "--minutes", "1e400"], "got 1e400"),
    ],
)
def test_a_refusal_names_the_users_own_text(cli, args, said) -> None:
    """Not the value it was read as (1.0, 0.0, 10000000.0, 1,000,000, 0): the text typed."""
    r = cli(*args)
    assert r.code == 2 and r.err.count("\n") == 1 and said in r.err, r.err


@pytest.mark.parametrize(
    "args",
    [
        ["measure", "--cpu", "--variant", "softmax", "--n", "64", "--store", ""],
        ["results", "ls", "--store", ""],
        ["results", "export", "--output", ""],
        ["results", "import", ""],
        ["formula", "softmax", "--variants", ""],
        ["report", "--html", ""],
        ["validate", "--records", ""],
    ],
)
def test_an_empty_path_is_refused_as_empty_not_read_as_the_current_folder(cli, tmp_path, args) -> None:
    r = cli(*args)
    assert r.code == 2 and r.err.count("\n") == 1 and "empty path" in r.err, r.err
    assert not any(p.name.startswith("results") for p in tmp_path.iterdir())  # no store made in the working folder


def test_one_value_written_two_ways_is_one_value(cli) -> None:
    """--launch-us 5 --launch-us 5.0 is one launch cost (used once, with a note); 5 and 6 are two."""
    same = cli("crossover", *PAIR, "--device", "h100-sxm5-80gb", "--launch-us", "5", "--launch-us", "5.0", "--json")
    assert same.code == 0 and "used once" in same.err, same.err
    again = cli("predict", "--device", "h100-sxm5-80gb", "--variant", "softmax", "--n", "64", "--d", "64", "--d", "064")
    assert again.code == 0, again.err
    other = cli("crossover", *PAIR, "--device", "h100-sxm5-80gb", "--launch-us", "5", "--launch-us", "6")
    assert other.code == 2 and "5, 6" in other.err, other.err


# -- class 6d: a file read and left out says why, where it is used; a UTF-8 byte-order mark is UTF-8 -----------------

DATA = Path(__file__).resolve().parents[1] / "profilers" / "data"
BOM = b"\xef\xbb\xbf"
ROW = {
    "name": "my-gpu", "device_names": [], "title": "My GPU", "vendor": "nvidia", "arch": "sm80",
    "peak_tflops": {"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312}, "bandwidth_gbs": 1555, "memory_gb": 40,
    "l2_mb": 40, "sms": 108, "smem_per_sm_kb": 164, "smem_per_block_kb": 163, "clock_mhz": 1410, "source": "mine",
}  # fmt: skip


def _table(name: str) -> str:
    return json.dumps({"kind": "attn-cost datasheet GPUs", "schema": 1, "gpus": [{**ROW, "name": name}]})


def test_a_file_with_a_byte_order_mark_reads_as_utf8(cli, tmp_path) -> None:
    """A GPU table, a device profile and a results file as a Windows editor saves "UTF-8 with BOM": each is read."""
    home = tmp_path / "home"
    (home / "gpus").mkdir(parents=True)
    (home / "gpus" / "bom.json").write_bytes(BOM + _table("bom-gpu").encode())
    (home / "devices").mkdir()
    (home / "devices" / "mine.json").write_bytes(BOM + (DATA / "devices" / "cpu-amd-epyc-5155e7.json").read_bytes())
    for device, kind in (("bom-gpu", "datasheet"), ("mine", "measured")):
        r = cli("predict", "--device", device, "--variant", "softmax", "--n", "1024", "--json")
        assert r.code == 0 and r.json()["kind"] == kind, r.err
    lines = (DATA / "results" / "cpu-amd-epyc-5155e7.jsonl").read_bytes().splitlines(keepends=True)[:3]
    (tmp_path / "bom.jsonl").write_bytes(BOM + b"".join(lines))
    r = cli("results", "import", "bom.jsonl", "--store", "s", "--json")
    assert r.code == 0 and r.json()["imported"] == {"bom.jsonl": 3}, r.err


def test_a_gpu_table_left_out_whole_is_named_where_its_gpu_is_asked_for(cli, tmp_path) -> None:
    """A table in UTF-16 (Notepad's "Unicode") cannot be read: asking for its GPU says which file was left out and
    why, not only that the device is unknown."""
    (tmp_path / "home" / "gpus").mkdir(parents=True)
    (tmp_path / "home" / "gpus" / "u16.json").write_bytes(_table("u16-gpu").encode("utf-16"))
    for args in (["predict", "--device", "u16-gpu", "--variant", "softmax", "--n", "1024"],
                 ["io", "--gpu", "u16-gpu"]):  # fmt: skip
        r = cli(*args)
        assert r.code == 2 and r.err.count("\n") == 1, r.err
        assert "u16.json" in r.err and "UTF-16" in r.err and "left out whole" in r.err, r.err


# -- class 6e: an import says what it imported, and why it imported nothing -------------------------------------------


def test_an_import_counts_only_what_the_store_gained(cli, tmp_path) -> None:
    lines = (DATA / "results" / "cpu-amd-epyc-5155e7.jsonl").read_bytes().splitlines(keepends=True)[:2]
    (tmp_path / "two.jsonl").write_bytes(b"".join(lines))
    first = cli("results", "import", "two.jsonl", "--store", "s")
    assert first.code == 0 and "Imported 2 of 2 records" in first.out, first.out
    again = cli("results", "import", "two.jsonl", "--store", "s")
    assert again.code == 0 and "Imported 0 of 2 records" in again.out and "2 already stored" in again.out, again.out
    assert cli("results", "import", "two.jsonl", "--store", "s", "--json").json()["imported"] == {"two.jsonl": 0}


def test_an_import_of_no_record_says_why_line_by_line(cli, tmp_path) -> None:
    (tmp_path / "bad.jsonl").write_text('x\n{"schema": 2}\n{"schema": 2}\n[1]\n')
    r = cli("results", "import", "bad.jsonl", "--store", "s")
    assert r.code == 2 and r.err.count("\n") == 1, r.err
    assert "none of its 4 lines" in r.err and "line 1 (not valid JSON" in r.err and "lines 2-3 (" in r.err, r.err
    assert "line 4 (" in r.err
