"""`attn-cost io`: the IO-aware traffic of tiled fused attention against linear-time variants.

No torch, no plotly on this path.
"""

from __future__ import annotations

from typing import Any, Optional

import typer
from attn_cost.cli import options as o
from attn_cost.cli import render
from attn_cost.cli.app import app, fail
from attn_cost.cli.render import Col, emit, right
from attn_cost.cli.settings import datasheet
from attn_cost.costmodel import display
from attn_cost.costmodel.conventions import MATMUL
from attn_cost.costmodel.crossover import at_sizes, compare, cost_branches, evaluate
from attn_cost.costmodel.dtypes import HALF, spelled
from attn_cost.costmodel.iotraffic import ORDERS, Tiles, fused_causal, has_fused, io_branches
from attn_cost.costmodel.polyterms import n_degree
from attn_cost.costmodel.variants import derive

FUSED_DEFAULT = ["softmax-fused", "softmax-fused-causal"]
AGAINST_DEFAULT = ["linear", "linear-causal-fused", "performer"]
LENGTHS = [1024, 4096, 16384, 65536]
DEFAULT_GPU = "a100-sxm4-80gb"
"""FlashAttention-2's own GPU (its paper's measurements)."""


@app.command("io")
@o.with_counting(scopes=("core",), only=("feature_map", "normalize"))
@o.with_sizes(scopes=("core",))
def io(
    variant: Optional[list[str]] = typer.Option(
        None, "--variant", help="A variant with a fused kernel; repeatable. Default: softmax-fused(-causal)."
    ),
    against: Optional[list[str]] = typer.Option(
        None, "--against", help="A linear-time variant; repeatable. Default: linear, linear-causal-fused, performer."
    ),
    d_values: Optional[list[int]] = o.head_dim_option("io"),
    heads: int = o.HEADS,
    batch: int = o.BATCH,
    dtype: str = typer.Option("bf16", "--dtype", help=f"{spelled()} (FlashAttention kernels run {'/'.join(HALF)})."),
    gpu: str = typer.Option(
        DEFAULT_GPU,
        "--gpu",
        help="A datasheet GPU (`attn-cost devices`) whose kernel tiles and usable shared memory per block are used.",
    ),
    sram: Optional[int] = typer.Option(
        None, "--sram", help="On-chip memory M in bytes per thread block (default: the --gpu's usable shared memory)."
    ),
    block_q: Optional[int] = typer.Option(
        None, "--block-q", help="Query rows per tile B_r (default: fa2 the kernel's own, fa1 min(⌈M/4d⌉, d))."
    ),
    block_kv: Optional[int] = typer.Option(
        None, "--block-kv", help="Key/value rows per tile B_c (default: fa2 the kernel's own, fa1 ⌈M/4d⌉)."
    ),
    order: str = typer.Option("fa2", "--order", help="; ".join(f"{k}: {v}" for k, v in ORDERS.items())),
    as_json: bool = o.JSON,
) -> None:
    """Traffic of tiled fused attention (fa2: K, V re-read per query block, Θ(N²d/B_r); fa1: Q, O re-read per
    K/V block, Θ(N²d²/M)) and the N from which it moves more bytes than a linear-time variant."""
    fused = variant or FUSED_DEFAULT
    others = against or AGAINST_DEFAULT
    for name in fused:
        if not has_fused(derive(name)):
            fail(f"{name} has no fused attention kernel to tile (fused variants: softmax-fused, gqa, ...)")
    for name in others:
        growth = n_degree(derive(name).flops(MATMUL))  # ⌈N/C⌉ (whole chunks) grows as N
        if growth > 1:
            fail(f"--against {name}: its FLOPs grow as N^{growth}, and io compares fused attention with linear-time "
                 "variants (linear, performer, linformer, ...): give one of those")  # fmt: skip
    ds = o.head_dims(d_values, None, heads, default=o.D_DEFAULT["io"])
    st = o.setting("matmul", dtype, "core", "inference", [*fused, *others])
    tiles = Tiles(sram, block_q, block_kv, order, datasheet(gpu, "--gpu").gpu)
    results = []
    for dv in ds:
        dims = o.sizes(dv, heads, batch, None, 4, 1)
        for name in fused:
            resolved = tiles.resolve(dv, dtype, fused_causal(derive(name)))
            tiled, floor = io_branches(derive(name), resolved)
            p_tiled = at_sizes((tiled, floor), dims, name)
            p_unfused = at_sizes(cost_branches(name, "traffic", st), dims, name)
            row: dict[str, Any] = {
                "variant": name,
                "d": dv,
                "tiles": resolved.as_json(),
                "tiled": display.plain(tiled),
                "tiled_text": display.text(tiled),
                "floor": display.plain(floor),
                "floor_text": display.text(floor),
                "per_length": {
                    str(n): {"tiled": int(evaluate(p_tiled, n)), "unfused": int(evaluate(p_unfused, n))}
                    for n in LENGTHS
                },
                "against": [],
            }
            for other in others:
                p_other = at_sizes(cost_branches(other, "traffic", st), dims, other)
                tiled_cmp = compare(p_tiled, p_other)
                unfused_cmp = compare(p_unfused, p_other)
                row["against"].append(
                    {
                        "variant": other,
                        "from_n": tiled_cmp["n"],
                        "verdict": tiled_cmp["verdict"],
                        "from_n_unfused_model": unfused_cmp["n"],
                        "verdict_unfused_model": unfused_cmp["verdict"],
                        "traffic": {str(n): int(evaluate(p_other, n)) for n in LENGTHS},
                    }
                )
            results.append(row)
    if as_json:
        emit({**st.as_json(), "heads": heads, "batch": batch, "results": results})
        return
    _tables(results, dtype)


def _from(n: int | None, verdict: str) -> str:
    return {"never": "never", "equal": "equal"}.get(verdict, f"{n:,}" if n is not None else "—")


def _tables(results: list[dict], dtype: str) -> None:
    for row in results:
        t = row["tiles"]
        render.sentence(
            f"{row['variant']}, d = {row['d']}: {t['order']} tiles {render.glue('B_r = ' + str(t['block_q']))}, "
            f"{render.glue('B_c = ' + str(t['block_kv']))} ({t['blocks_from']}; {t['gpu']}: M = "
            f"{t['sram_bytes']:,} bytes = {t['sram_elements']:,} {dtype} elements per block)",
            indent=0,
        )
        render.formula("tiled traffic (bytes)", row["tiled_text"])
        render.formula("never below (bytes)", row["floor_text"])
        cells = [
            [f"{int(n):,}", f"{v['unfused']:,}", f"{v['tiled']:,}", f"{v['tiled'] / v['unfused']:.1f}"]
            for n, v in row["per_length"].items()
        ]
        render.table(None, [right("N"), right("unfused"), right("tiled"), right("×")], cells)
        cells = [
            [
                a["variant"],
                _from(a["from_n"], a["verdict"]),
                _from(a["from_n_unfused_model"], a["verdict_unfused_model"]),
            ]
            for a in row["against"]
        ]
        render.table(
            f"From which N {row['variant']} moves more bytes than a linear-time variant",
            [Col("linear-time variant"), right("tiled model"), right("unfused model")],
            cells,
        )
    render.prose(
        "Unfused: every op its own kernel, fused attention reads Q, K, V once. Tiled: FlashAttention IO, at least "
        "the compulsory bytes (Q, K, V read once, O written once)."
    )
