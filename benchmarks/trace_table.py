"""Which public attention classes `attn-cost trace` traces: the table of docs/tracing.md, generated.

Every target is named as a user names it (a package module and a class with its constructor arguments or a
Hugging Face config, or a two-line file around a per-head function) and traced in this process. Each one
that traces is then run for real at two sizes other than the example sizes of the trace: FlopCounterMode
(the CPU SDPA kernel mapped to PyTorch's sdpa_flop_count) against the formula's FLOPs (`matmul`
convention), the live-tensor tracer (profilers/measure/memory.py) against the formula's peak. A target whose
package is not installed is listed as such.

    pip install torch==2.13.0 -e '.[test,trace-bench]'
    python benchmarks/trace_table.py            # rewrites the table in docs/tracing.md
    python benchmarks/trace_table.py --print    # prints it instead
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # docblock.py, beside this script

from docblock import check, check_output, fill, write_output

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "tracing.md"
START, END = "<!-- trace-table:start -->", "<!-- trace-table:end -->"

HIDDEN = {"hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128}
DECODER = {**HIDDEN, "num_key_value_heads": 2, "num_hidden_layers": 1}
CONFIGS = {
    "bert": {"model_type": "bert", **HIDDEN},
    "vit": {"model_type": "vit", **HIDDEN},
    "gpt2": {"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 1},
    "llama": {"model_type": "llama", **DECODER},
    "mistral": {"model_type": "mistral", **DECODER, "sliding_window": 4},
    "qwen2": {"model_type": "qwen2", **DECODER},
    "t5": {"model_type": "t5", "d_model": 64, "d_kv": 16, "num_heads": 4, "d_ff": 128, "num_layers": 1},
}
"""Tiny Hugging Face configs: width 64, 4 heads of 16 (decoders: 2 key/value heads, Mistral a window of 4)."""

FILES = {
    "native.py": '''
        import torch.nn.functional as F
        from torch import nn


        def sdpa(q, k, v):
            return F.scaled_dot_product_attention(q, k, v)


        def sdpa_causal(q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)


        class MHACausal(nn.Module):
            def __init__(self, dim=64, heads=4):
                super().__init__()
                self.mha = nn.MultiheadAttention(dim, heads, batch_first=True)

            def forward(self, x):
                mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1], dtype=x.dtype)
                return self.mha(x, x, x, attn_mask=mask, is_causal=True, need_weights=False)[0]


        class MHA(nn.Module):
            def __init__(self, dim=64, heads=4, need_weights=True):
                super().__init__()
                self.need_weights = need_weights
                self.mha = nn.MultiheadAttention(dim, heads, batch_first=True)

            def forward(self, x):
                return self.mha(x, x, x, need_weights=self.need_weights)[0]
    ''',
    "performer_fast.py": '''
        from performer_pytorch import FastAttention

        FAST_D8 = FastAttention(dim_heads=8, nb_features=16)
        FAST_D16 = FastAttention(dim_heads=16, nb_features=32)


        def fast_d8(q, k, v):
            return FAST_D8(q, k, v)


        def fast_d16(q, k, v):
            return FAST_D16(q, k, v)
    ''',
    "local.py": '''
        from local_attention import LocalAttention

        AUTOPAD = LocalAttention(window_size=4, causal=True, look_backward=1, autopad=True)
        CAUSAL = LocalAttention(window_size=4, causal=True, look_backward=1)
        BIDIR = LocalAttention(window_size=4, causal=False, look_backward=1, look_forward=1)


        def causal_autopad(q, k, v):
            return AUTOPAD(q, k, v)


        def causal(q, k, v):
            return CAUSAL(q, k, v)


        def bidirectional(q, k, v):
            return BIDIR(q, k, v)
    ''',
}
"""The files a user writes around per-head functions and around nn.MultiheadAttention calls."""

HF = "transformers.models"
LUCID_DIMS = ["dim=64", "heads=4", "dim_head=16"]
TARGETS: list[tuple[str, str, list[str], str | None]] = [
    ("torch SDPA", "native.py:sdpa", [], None),
    ("torch SDPA, causal", "native.py:sdpa_causal", [], None),
    ("torch nn.MultiheadAttention", "native.py:MHA", [], None),
    ("torch nn.MultiheadAttention, need_weights=False", "native.py:MHA", ["need_weights=False"], None),
    ("torch nn.MultiheadAttention, causal mask", "native.py:MHACausal", [], None),
    *[(f"transformers {cls}, {impl}", f"{HF}.{model}.modeling_{model}:{cls}", [f"attn_implementation={impl}", *extra],
       model)
      for model, cls, extra, impls in (
          ("bert", "BertSelfAttention", [], ("eager", "sdpa")),
          ("bert", "BertAttention", [], ("eager",)),
          ("gpt2", "GPT2Attention", ["layer_idx=0"], ("eager", "sdpa")),
          ("llama", "LlamaAttention", [], ("eager", "sdpa")),
          ("mistral", "MistralAttention", [], ("eager", "sdpa")),
          ("qwen2", "Qwen2Attention", [], ("eager", "sdpa")),
          ("t5", "T5Attention", ["has_relative_attention_bias=True"], ("eager", "sdpa")),
          ("vit", "ViTAttention", [], ("eager", "sdpa")),
      ) for impl in impls],
    ("timm Attention, fused", "timm.models.vision_transformer:Attention", ["dim=64", "num_heads=4", "qkv_bias=True"],
     None),
    ("timm Attention, unfused", "timm.models.vision_transformer:Attention",
     ["dim=64", "num_heads=4", "qkv_bias=True", "fused_attn=False"], None),
    ("performer-pytorch SelfAttention", "performer_pytorch:SelfAttention", [*LUCID_DIMS, "nb_features=32"], None),
    ("performer-pytorch SelfAttention, causal", "performer_pytorch:SelfAttention",
     [*LUCID_DIMS, "nb_features=32", "causal=True"], None),
    ("performer-pytorch FastAttention, d = 8", "performer_fast.py:fast_d8", [], None),
    ("performer-pytorch FastAttention, d = 16", "performer_fast.py:fast_d16", [], None),
    ("nystrom-attention NystromAttention", "nystrom_attention:NystromAttention",
     [*LUCID_DIMS, "num_landmarks=8", "pinv_iterations=6", "residual=True"], None),
    ("nystrom-attention NystromAttention, no residual", "nystrom_attention:NystromAttention",
     [*LUCID_DIMS, "num_landmarks=8", "pinv_iterations=6", "residual=False"], None),
    ("linformer LinformerSelfAttention", "linformer:LinformerSelfAttention",
     ["dim=64", "seq_len=256", "k=16", "heads=4"], None),
    ("linear-attention-transformer SelfAttention", "linear_attention_transformer.linear_attention_transformer:"
     "SelfAttention", ["dim=64", "heads=4"], None),
    ("linear-attention-transformer SelfAttention, causal", "linear_attention_transformer.linear_attention_transformer:"
     "SelfAttention", ["dim=64", "heads=4", "causal=True"], None),
    ("local-attention LocalAttention, causal, autopad", "local.py:causal_autopad", [], None),
    ("local-attention LocalAttention, causal", "local.py:causal", [], None),
    ("local-attention LocalAttention, bidirectional", "local.py:bidirectional", [], None),
    ("x-transformers Attention", "x_transformers:Attention", LUCID_DIMS, None),
    ("x-transformers Attention, flash", "x_transformers:Attention", [*LUCID_DIMS, "flash=True"], None),
    ("x-transformers Attention, causal", "x_transformers:Attention", [*LUCID_DIMS, "causal=True"], None),
    ("x-transformers Attention, causal, flash", "x_transformers:Attention", [*LUCID_DIMS, "causal=True", "flash=True"],
     None),
]
"""(what, PATH:NAME as the user writes it, --init arguments, Hugging Face config)."""

LAYER_SIZES = ({"b": 2, "N": 16}, {"b": 3, "N": 40})
CORE_SIZES = ({"b": 2, "h": 2, "N": 16, "d": 8}, {"b": 3, "h": 3, "N": 40, "d": 16})
"""Sizes of the real runs: other than the trace's example (b = 2, h = 3, N = 13, d = 8); N a multiple of 8
(Nyström's landmarks, local attention's window)."""


def run_one(what: str, spec: str, init: list[str], config: str | None, folder: Path) -> dict:
    """Trace one target and compare it with its real run; a refusal is recorded with its one line."""
    import sympy as sp
    from attn_cost.costmodel.conventions import MATMUL
    from attn_cost.costmodel.errors import UserError
    from attn_cost.costmodel.symbols import BY_NAME
    from attn_cost.costmodel.variants import REGISTRY, derive
    from attn_cost.profilers.trace.check import measure
    from attn_cost.profilers.trace.register import _TRACED, exported_peak, register, traced

    row: dict = {"what": what, "spec": spec, "init": init, "config": CONFIGS.get(config) if config else None}
    package = spec.split(":")[0].split(".")[0]
    if package not in ("native", "performer_fast", "local") and not _installed(package):
        return {**row, "status": "not installed"}
    path = str(folder / spec) if spec.split(":")[0].endswith(".py") else spec
    config_file = None
    if config:
        config_file = folder / f"{config}.json"
        config_file.write_text(json.dumps(CONFIGS[config]))
    name = spec.split(":")[1]
    REGISTRY.pop(name, None)
    _TRACED.pop(name, None)
    derive.cache_clear()
    try:
        name = register(path, init, config_file)
    except UserError as e:
        return {**row, "status": "refused", "message": str(e).replace(str(folder) + "/", "")}
    t = traced(name)
    dv = derive(name, t.kind)
    flops, peak = dv.flops(MATMUL), dv.peak("fp32").expr
    checks = []
    for sizes in CORE_SIZES if t.kind == "core" else LAYER_SIZES:
        sizes = {**sizes, **t.recording.fixed}
        at = {BY_NAME[k]: v for k, v in sizes.items()}
        real = measure(t, sizes)
        checks.append({"sizes": sizes, "flops": int(flops.xreplace(at)), "flops_measured": real["flops"],
                       "peak": int(peak.xreplace(at)), "peak_measured": real["peak_bytes"]})  # fmt: skip
    ideal, why = exported_peak(t)
    return {
        **row,
        "status": "traced",
        "kind": t.kind,
        "fixed": t.recording.fixed,
        "holds_for": t.conditions,
        "flops": str(flops),
        "peak_bytes": str(peak),
        "peak_bytes_exported": str(ideal) if ideal is not None else None,
        "exported_note": why or None,
        "same_peak": ideal is not None and sp.expand(ideal - peak) == 0,
        "checks": checks,
    }


def _installed(package: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(package) is not None


def table(rows: list[dict]) -> str:
    """The markdown table of docs/tracing.md."""
    traced = [r for r in rows if r["status"] == "traced"]
    flops_ok = sum(all(c["flops"] == c["flops_measured"] for c in r["checks"]) for r in traced)
    peak_ok = sum(all(c["peak"] == c["peak_measured"] for c in r["checks"]) for r in traced)
    lines = [
        f"{len(traced)} of {len(rows)} trace. FLOPs (`matmul`) equal FlopCounterMode at both sizes for {flops_ok} of "
        f"{len(traced)}; the peak equals the live-tensor peak at both sizes for {peak_ok} of {len(traced)}. "
        "Sizes of the real runs: layers (b, N) = (2, 16), (3, 40); cores (b, h, N, d) = (2, 2, 16, 8), (3, 3, 40, 16) "
        "(d as the code fixes it). Generated by `python benchmarks/trace_table.py`.",
        "",
        "| attention class | traces | FLOPs (matmul) | vs FlopCounterMode | peak bytes (as written) "
        "| vs live-tensor peak | exported graph's peak | holds for |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["status"] != "traced":
            why = r.get("message", r["status"])
            lines.append(f"| {r['what']} | no | | | | | | {_cell(why)} |")
            continue
        flops = ", ".join(_pair(c["flops"], c["flops_measured"]) for c in r["checks"])
        peak = ", ".join(_pair(c["peak"], c["peak_measured"]) for c in r["checks"])
        ideal = ("same" if r["same_peak"] else f"`{r['peak_bytes_exported']}`") if r["peak_bytes_exported"] else (
            _cell(r["exported_note"] or ""))  # fmt: skip
        holds = "; ".join([*(f"{k} = {v}" for k, v in r["fixed"].items()), *r["holds_for"]]) or "all sizes"
        lines.append(f"| {r['what']} | yes | `{r['flops']}` | {flops} | `{r['peak_bytes']}` | {peak} | {ideal} | "
                     f"{_cell(holds)} |")  # fmt: skip
    return "\n".join(lines)


def _pair(formula: int, measured: int) -> str:
    return f"{formula:,} =" if formula == measured else f"**{formula:,} vs {measured:,}**"


def _cell(text: str) -> str:
    text = re.sub(r"\S*/site-packages/", "", " ".join(str(text).split())).replace("|", "\\|")
    return text if len(text) <= 220 else text[:217] + "..."


def _is_rows(path: Path) -> bool:
    """Whether a file holds the rows this script writes with --json (a list of objects with `what` and `status`)."""
    from attn_cost.profilers.store.files import json_data

    rows = json_data(path)
    return isinstance(rows, list) and all(isinstance(r, dict) and {"what", "status"} <= r.keys() for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--print", action="store_true", help="print the table instead of rewriting docs/tracing.md")
    parser.add_argument("--json", type=Path, help="also write every row as JSON to this file")
    args = parser.parse_args()
    check_output(args.json, _is_rows, "a trace table's rows")
    if not args.print:
        check([DOC], START, END)
    sys.path.insert(0, str(ROOT / "tests"))
    from real_packages import _torchvision_shim

    _torchvision_shim()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for name, text in FILES.items():
            (folder / name).write_text(textwrap.dedent(text).lstrip())
        for target in TARGETS:
            row = run_one(*target, folder)
            print(f"{row['what']}: {row['status']}", file=sys.stderr)
            rows.append(row)
    text = table(rows)
    if args.json:
        write_output(args.json, json.dumps(rows, indent=1), _is_rows, "a trace table's rows")
    if args.print:
        print(text)
        return
    fill({DOC: text + "\n"}, START, END)


if __name__ == "__main__":
    main()
