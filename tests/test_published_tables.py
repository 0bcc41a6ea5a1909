"""The published long-format tables read into times (`datasheet.published`): hand-made CSVs and two shipped files
by hand arithmetic; rows that make no time counted by reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from attn_cost.profilers.devicemodel.datasheet.published import (
    FOLDER,
    flop_rule,
    is_long,
    pytorch_release,
    read_table,
)

HEADER = "gpu,kernel,variant,dtype,direction,causal,b,h,h_kv,n,n_kv,d,d_v,d_state,chunk,quantity,value,note"
FLOPS = "# flops: f = 4 * batch * seqlen^2 * nheads * headdim // (2 if causal); bwd = 2.5 f; fwd+bwd = 3.5 f"


def _csv(tmp_path: Path, *lines: str, flops: str = FLOPS) -> Path:
    path = tmp_path / "t_gpu_what.csv"
    path.write_text("\n".join(["# source: a test", flops, HEADER, *lines]) + "\n", encoding="utf-8")
    return path


# -- the reader ------------------------------------------------------------------------------------------------


def test_a_time_is_kept_and_a_rate_turned_into_one_by_the_header_formula(tmp_path) -> None:
    """0.5 ms is 5·10⁻⁴ s. 100 TFLOP/s causal at b = 2, h = 4, N = 1,024, d = 64: f = 4·2·4·1024²·64 / 2 =
    1,073,741,824 FLOPs, forward 10.73741824 µs; forward + backward 3.5 f: 37.58096384 µs."""
    causal = "a100-sxm4-80gb,flash-attn-2,softmax-fused-causal,bf16"
    path = _csv(
        tmp_path,
        "a100-sxm4-80gb,flash-attn-2,softmax-fused,bf16,fwd,false,1,8,,2048,,64,,,,ms,0.5,",
        f"{causal},fwd,true,2,4,,1024,,64,,,,tflops,100,",
        f"{causal},fwdbwd,true,2,4,,1024,,64,,,,tflops,100,",
    )
    table = read_table(path, {"a100-sxm4-80gb"})
    assert [p.seconds for p in table.points] == pytest.approx([5e-4, 10.73741824e-6, 37.58096384e-6])
    assert table.points[0].sizes == {"b": 1, "h": 8, "d": 64}
    assert not table.skipped


def test_rows_that_make_no_time_are_counted_by_reason(tmp_path) -> None:
    """Each row that cannot be a time is counted under its reason, none dropped silently: a GPU not in the list,
    none stated, OOM, a speedup, no direction, a backward rate whose header states only the forward formula."""
    path = _csv(tmp_path,
                "z9000,flash-attn-2,softmax-fused,bf16,fwd,false,1,8,,2048,,64,,,,ms,0.5,",
                ",flash-attn-2,softmax-fused,bf16,fwd,false,1,8,,2048,,64,,,,ms,0.5,",
                "a100-sxm4-80gb,flash-attn-2,softmax-fused,bf16,fwd,false,1,8,,2048,,64,,,,ms,OOM,",
                "a100-sxm4-80gb,flash-attn-2,softmax-fused,bf16,fwd,false,1,8,,2048,,64,,,,speedup,2.1,",
                "a100-sxm4-80gb,flash-attn-2,softmax-fused,bf16,,false,1,8,,2048,,64,,,,ms,0.5,",
                "a100-sxm4-80gb,flash-attn-2,softmax-fused,bf16,bwd,false,1,8,,2048,,64,,,,tflops,100,",
                flops="# flops: 4 * head * batch * headdim * seq_len * seq_len // (2 if is_causal else 1)")  # fmt: skip
    table = read_table(path, {"a100-sxm4-80gb"})
    assert not table.points
    assert table.skipped == {"GPU z9000 has no row in gpus.json": 1, "no GPU stated": 1,
                             "no value (OOM or empty)": 1, "a ratio of two times (speedup), not a time": 1,
                             "direction not stated": 1,
                             "a rate whose # flops: header states no formula for bwd": 1}  # fmt: skip


def test_a_rate_without_a_formula_is_not_converted(tmp_path) -> None:
    path = _csv(
        tmp_path,
        "a100-sxm4-80gb,x,softmax-fused,bf16,fwd,false,1,8,,2048,,64,,,,tflops,100,",
        flops="# flops: none (a ratio of times)",
    )
    assert read_table(path, {"a100-sxm4-80gb"}).skipped == {"a rate without a FLOP formula in the # flops: header": 1}
    assert flop_rule("none (a ratio of times)") is None


@pytest.mark.parametrize(
    ("header", "release"),
    [
        ({"software": "NGC nvcr.io/nvidia/pytorch:25.06-py3, CUDA 12.9.0, PyTorch 2.8.0 (2.8.0a0+5228986c39)"}, (2, 8)),
        ({"software": "torch: 2.12.1+cu130 | fla: 0.5.1"}, (2, 12)),
        ({"software": "PyTorch version not stated (May 2024)"}, None),
        ({"software": "not stated"}, None),
        ({"pytorch": "2.4, inferred (not stated): as before PyTorch 2.5", "software": "PyTorch 2.9"}, (2, 4)),
    ],
)
def test_the_pytorch_release_is_the_one_the_header_states(header: dict, release) -> None:
    """A container's tag (pytorch:25.06) is not a release; an inferred `# pytorch:` line wins over the software
    line, and a release it names in its reasons is not read."""
    assert pytorch_release(header) == release


def test_the_wide_tables_are_not_long(tmp_path) -> None:
    assert not is_long(FOLDER / "fa2_a100_fig4_fwdbwd_tflops.csv")
    assert is_long(FOLDER / "fa2_h100_fwdbwd_tflops.csv")


def test_two_shipped_tables_by_hand() -> None:
    """FlashAttention-2's H100 figure, panel (a), first FlashAttention-2 bar: 215 TFLOP/s forward + backward at
    b = 32, h = 32, N = 512, d = 64: 3.5 · 4·32·32·512²·64 = 240,518,168,576 FLOPs, 1.118689156 ms. cuDNN's H200
    SDPA backward at b = 4, h = 16, N = 4,096, d = 128, 287.3563 TFLOP/s: 2.5 · 4·4·16·4096²·128 =
    1,374,389,534,720 FLOPs, 4.782876633 ms."""
    gpus = {"h100-sxm5-80gb", "h200-sxm-141gb"}
    fa2 = read_table(FOLDER / "fa2_h100_fwdbwd_tflops.csv", gpus)
    first = next(p for p in fa2.points if p.kernel == "flash-attn-2" and p.n == 512 and not p.causal)
    assert (first.sizes["b"], first.sizes["h"], first.sizes["d"], first.direction) == (32, 32, 64, "fwdbwd")
    assert first.seconds == pytest.approx(1.118689156e-3)
    cudnn = read_table(FOLDER / "cudnnfe_h200_2024_sdpa_vs_cudnn_tflops.csv", gpus)
    bwd = next(p for p in cudnn.points if p.kernel == "sdpa" and p.direction == "bwd" and p.n == 4096
               and not p.causal)  # fmt: skip
    assert bwd.seconds == pytest.approx(4.782876633e-3)


def test_the_kernels_record_in_the_docs_is_the_current_one() -> None:
    """docs/gpumodel.md's per-kernel record is what `benchmarks/gpu_kernels.py` computes now: a change to a kernel's
    pricing or to the published tables without regenerating it fails here."""
    gpu_kernels = _kernels_script()
    text = (Path(__file__).resolve().parents[1] / "docs" / "gpumodel.md").read_text(encoding="utf-8")
    shipped = text.split(gpu_kernels.BEGIN)[1].split(gpu_kernels.END)[0].strip()
    assert shipped == gpu_kernels.record().strip()


def _kernels_script():
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import gpu_kernels

    return gpu_kernels


def test_the_shipped_intervals_are_the_held_out_errors_q95() -> None:
    """profilers/data/gpumodel_intervals.json is what `gpu_kernels.py --intervals` computes from the published tables
    now, and those intervals hold: at least 90 % of each held-out table's times inside the interval the other
    tables give their kernel family (leave one table out)."""
    import json

    import numpy as np
    from attn_cost.profilers.devicemodel.datasheet.model import INTERVALS_FILE

    script = _kernels_script()
    points, _ = script.scored()
    shipped = json.loads(INTERVALS_FILE.read_text(encoding="utf-8"))["q95"]
    assert shipped == pytest.approx(script.q95s(points))
    rows = [(p.table, script.family(p.kernel), e) for p, e in points]
    inside = [abs(e) <= np.quantile([abs(x) for t, f, x in rows if f == fam and t != table], 0.95)
              for table, fam, e in rows]  # fmt: skip
    assert sum(inside) / len(inside) >= 0.90


def test_a_published_crossover_is_read_where_the_ratio_crosses_one_in_log_n() -> None:
    """A chunk kernel twice FlashAttention-2's time at N = 1,000 and half of it at 2,000 crosses at √(1,000 · 2,000)
    = 1,414.2 (halfway in log N); the model, 4 × slower at 1,000 and 2 × at 2,000 and 1/2 × at 4,000, crosses
    halfway between 2,000 and 4,000: 2,828.4. A series that never crosses gives None."""
    import math

    from attn_cost.profilers.devicemodel.datasheet.fit import table_crossing
    from attn_cost.profilers.devicemodel.datasheet.published import Point

    script = _kernels_script()
    assert table_crossing([(1000, 1.0, 2.0), (2000, 1.0, 0.5)]) == pytest.approx(1414.2136)
    assert table_crossing([(1000, 1.0, 1.35), (2000, 1.0, 1.1)]) is None
    published = {("fla-chunk", 1000): 2.0, ("fla-chunk", 2000): 2.0, ("fla-chunk", 4000): 2.0,
                 ("flash-attn-2", 1000): 1.0, ("flash-attn-2", 2000): 4.0, ("flash-attn-2", 4000): 16.0}
    model = {("fla-chunk", 1000): 4.0, ("fla-chunk", 2000): 8.0, ("fla-chunk", 4000): 8.0,
             ("flash-attn-2", 1000): 1.0, ("flash-attn-2", 2000): 4.0, ("flash-attn-2", 4000): 16.0}  # fmt: skip
    points = [(Point("t", "a100-sxm4-80gb", kernel, "retention" if kernel == "fla-chunk" else "softmax-fused-causal",
                     "bf16", "fwd", True, n, {"b": 8, "h": 4, "d": 64}, s), math.log(model[kernel, n] / s))
              for (kernel, n), s in published.items()]  # fmt: skip
    ((table, name, pub, mod),) = script.crossings(points)
    assert (table, pub, mod) == ("t", pytest.approx(1414.2136), pytest.approx(2828.4271))
    assert "fla-chunk vs flash-attn-2" in name
