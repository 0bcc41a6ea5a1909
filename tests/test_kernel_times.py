"""`attn-cost kernels`: the kernels `--kernel` names, timed where they run, into a table in the published tables'
long format that the datasheet model is judged on (`benchmarks/gpu_kernels.py --measured`); on this CPU, SDPA's
CPU backends at tiny shapes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from attn_cost.profilers.devicemodel.datasheet.published import MADE_BY, read_table
from attn_cost.profilers.measure import kernel_times as kt

TINY = ("--cpu", "--d", "8", "--n", "16", "--n", "32", "--b", "1", "--h", "2")


def test_each_kernel_asked_for_is_timed_at_every_shape_and_the_table_reads_back(cli, tmp_path) -> None:
    """Two kernels × two lengths × one head dim × causal and not × forward and forward + backward: 16 rows, each a
    positive time in ms that the published tables' reader turns into the same seconds."""
    out = tmp_path / "k.csv"
    r = cli("kernels", "--out", str(out), "--kernel", "sdpa-math", "--kernel", "sdpa", *TINY, "--json")
    assert r.code == 0, r.err
    data = r.json()
    assert data["kernels"] == ["sdpa-math", "sdpa"] and data["dtype"] == "fp32" and data["missed"] == []
    assert len(data["rows"]) == 16
    shapes = {(x["kernel"], x["direction"], x["causal"], x["n"]) for x in data["rows"]}
    assert len(shapes) == 16 and {x["b"] for x in data["rows"]} == {1} and {x["h"] for x in data["rows"]} == {2}
    table = read_table(out, {"cpu"})
    assert len(table.points) == 16 and not table.skipped
    by_shape = {(p.kernel, p.direction, p.causal, p.n): p.seconds for p in table.points}
    for row in data["rows"]:
        seconds = by_shape[row["kernel"], row["direction"], row["causal"] == "true", row["n"]]
        assert seconds == pytest.approx(float(row["value"]) / 1e3) and seconds > 0
    assert table.header["made by"] == MADE_BY and table.header["harness"] == kt.HARNESS
    variants = {p.variant for p in table.points}
    assert variants == {"softmax-fused", "softmax-fused-causal"}


def test_the_default_shapes_are_flashattention_2s_benchmark() -> None:
    """b·N = 16,384 and h·d = 2,048 (FlashAttention-2's harness), shortest lengths first; fla's chunk kernels causal,
    on each linear layer that runs them, its fused_chunk kernel on retention alone."""
    points = kt.shapes(["sdpa-flash", "fla-chunk", "fla-fused-chunk"], head_dims=(64, 128), lengths=(4096, 1024),
                       layers=("gla", "gated-deltanet"))  # fmt: skip
    assert {p.n for p in points[: len(points) // 2]} == {1024} and points[-1].n == 4096
    assert {(p.b, p.h) for p in points if p.n == 1024 and p.d == 128} == {(16, 16)}
    assert {(p.b, p.h) for p in points if p.n == 4096 and p.d == 64} == {(4, 32)}
    chunk = [p for p in points if p.kernel == "fla-chunk"]
    assert {p.causal for p in chunk} == {True} and {p.variant for p in chunk} == {"gla", "gated-deltanet"}
    assert {p.variant for p in points if p.kernel == "fla-fused-chunk"} == {"retention"}
    fused = [p for p in points if p.kernel == "sdpa-flash"]
    assert {(p.variant, p.causal) for p in fused} == {("softmax-fused", False), ("softmax-fused-causal", True)}
    assert len(chunk) == 2 * 2 * 2 * 2 and len(fused) == 2 * 2 * 2 * 2  # lengths × d × layers or masks × directions


def test_the_linear_layers_run_by_their_library_kernels_are_none_on_a_cpu() -> None:
    """`fla-chunk` is timed on the layers whose chunked form runs fla-core's (or mamba-ssm's) kernels: on a CPU none
    does, so none is timed (the kernel is not here either: `kernels_here`)."""
    assert kt.chunk_variants("cpu") == []


def test_a_linear_layers_forward_is_its_chunked_case() -> None:
    """What `fla-chunk` times on a layer other than retention is the profiler's chunked case (on a CUDA machine with
    fla-core, the library's kernels; here the CPU's PyTorch form), forward under no_grad: its output is the case's."""
    from attn_cost.profilers.measure.cases import build_case
    from attn_cost.profilers.measure.sizes import Sizes

    call = kt.call_of(kt.Shape("fla-chunk", "gated-deltanet", "fwd", True, 1, 2, 64, 8), "fp32", "cpu")
    case = build_case("gated-deltanet", "core", Sizes(N=64, d=8, h=2, b=1, C=64), "fp32", "cpu")
    expect = case.run(case.make_inputs())
    out = call()
    assert out.shape == expect.shape and not out.requires_grad
    assert float((out - expect).abs().max()) <= 1e-5 * float(expect.abs().max())


def test_a_rerun_replaces_its_own_table_and_refuses_any_other_file(cli, tmp_path) -> None:
    out = tmp_path / "k.csv"
    assert cli("kernels", "--out", str(out), "--kernel", "sdpa-math", *TINY).code == 0
    assert cli("kernels", "--out", str(out), "--kernel", "sdpa-math", *TINY).code == 0
    mine = tmp_path / "mine.csv"
    mine.write_bytes(b"gpu,kernel\r\nmy,notes\r\n")
    r = cli("kernels", "--out", str(mine), "--kernel", "sdpa-math", *TINY)
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1 and "did not create" in r.err
    assert mine.read_bytes() == b"gpu,kernel\r\nmy,notes\r\n"


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--kernel", "flash-attn-9"], "unknown --kernel 'flash-attn-9'"),
        (["--kernel", "flash-attn-2"], "--kernel flash-attn-2 does not run here: needs a CUDA device"),
        (["--kernel", "sdpa-cudnn"], "does not run its cudnn backend on the CPU"),
        (["--n", "0"], "--n must be a positive integer"),
        (["--dtype", "fp8"], "unknown --dtype 'fp8'"),
        (["--minutes", "0"], "--minutes must be a positive number"),
        (["--gpu"], "--gpu needs CUDA"),
        (["--out", "-"], "--out takes a file path, not '-'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_and_writes_nothing(cli, tmp_path, args, says) -> None:
    if "--gpu" in args and "torch" in sys.modules and sys.modules["torch"].cuda.is_available():
        pytest.skip("this machine has CUDA")
    out = tmp_path / "k.csv"
    where = [] if "--out" in args else ["--out", str(out)]
    r = cli("kernels", *where, *(a for a in TINY if a != "--cpu" or "--gpu" not in args), *args)
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1 and says in r.err, r.err
    assert not out.exists()


def test_an_interrupted_run_keeps_every_point_it_timed(cli, tmp_path, monkeypatch) -> None:
    """The table is written whole after each point: Ctrl-C during the third point leaves the first two."""
    real = kt.time_point
    seen = []

    def time_point(*args):
        seen.append(args[0])
        if len(seen) == 3:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(kt, "time_point", time_point)
    out = tmp_path / "k.csv"
    r = cli("kernels", "--out", str(out), "--kernel", "sdpa-math", *TINY)
    assert r.code == 130
    assert len(read_table(out, {"cpu"}).points) == 2


def test_gpu_kernels_judges_the_model_on_a_measured_table(tmp_path) -> None:
    """A table `attn-cost kernels` wrote on an A100 (here made by its own writer, FlashAttention-2 at two lengths) is
    judged like a published one: its group in the record, its points counted; a file it did not write is refused."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import gpu_kernels

    rows = []
    for n, ms in ((2048, 1.0), (4096, 3.5)):
        row = dict.fromkeys(kt.COLUMNS, "")
        row.update(gpu="a100-sxm4-80gb", kernel="flash-attn-2", variant="softmax-fused", dtype="bf16", direction="fwd",
                   causal="false", b=16384 // n, h=16, n=n, d=128, quantity="ms", value=ms)  # fmt: skip
        rows.append(row)
    path = tmp_path / "a100.csv"
    path.write_text(kt.table_text(rows, {"source": "a test"}), encoding="utf-8")
    text = gpu_kernels.measured_record([path])
    assert "| a100 | a100-sxm4-80gb | flash-attn-2 | fwd | 2 |" in text
    other = tmp_path / "other.csv"
    other.write_text("gpu,kernel\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="not a table of `attn-cost kernels`"):
        gpu_kernels.measured_record([other])
