"""The kernels the device models calibrate and price, by family: one declaration each.

A family (`registry.Family`, one module here each: `streaming`, `products`, `attention`, `chunk`) declares once
how its ops are featured, timed on a device (its PyTorch runner), fitted (the op model's form), priced from a
datasheet and gridded for the calibration; a kernel (`registry.Kernel`) says which engine op it is, its family, how
to build its engine op at a shape (so the op model sees exactly the features a variant's op has), and what its
PyTorch code is. The calibration grid, the PyTorch code timed, the fit's model form, the datasheet's price,
`kernel_of` (engine op -> kernel) and the chain's op kinds are all read from here; adding a kernel is one
declaration, adding a family one module. At import every op kind the engine can emit (`opkinds.KINDS`) is checked
to have a kernel, as `conventions.py` checks its rules.

No torch at import: the op model prices variants on the analytic path (`crossover --device`). The runners import
torch when the calibration calls them.
"""

# ruff: noqa: I001 (the families register in the order they are imported: the calibration grid's order)
from __future__ import annotations

from collections.abc import Callable

from attn_cost.costmodel.opkinds import KINDS

# the families, in the calibration grid's order (each registers itself and its kernels at import)
from attn_cost.profilers.devicemodel.kernels import streaming, products, attention, chunk  # noqa: F401
from attn_cost.profilers.devicemodel.kernels.attention import ATTENTION
from attn_cost.profilers.devicemodel.kernels.chunk import (
    CHUNK,
    CHUNKED,
    GATED_CHUNK,
    LINEAR_RNN,
    CHUNK_PRODUCTS,
    PRODUCT_KINDS,
    gated_kernel,
    plain_chunk,
)
from attn_cost.profilers.devicemodel.kernels.products import MATMUL_LAYOUTS, PRODUCT, window_rows
from attn_cost.profilers.devicemodel.kernels.registry import (
    FAMILIES,
    GEMM,
    KERNELS,
    RANK,
    STREAMING,
    Family,
    Kernel,
    Runner,
    Shape,
    declare,
    declared,
    family_of,
    fresh_inputs,
    members,
    priced_families,
    refuse_unpriced,
    register_family,
    runnable,
    shape,
    twins,
)
from attn_cost.profilers.devicemodel.kernels.streaming import (
    BINARY,
    ELEMENTWISE,
    MAX_SQUARED_WIDTH,
    ROWWISE,
    operand_shape,
)

__all__ = [
    "ATTENTION", "BINARY", "CHUNK", "CHUNKED", "CHUNK_PRODUCTS", "ELEMENTWISE", "FAMILIES", "GATED_CHUNK", "GEMM",
    "KERNELS", "LINEAR_RNN", "MATMUL_LAYOUTS", "MAX_SQUARED_WIDTH", "PRODUCT", "RANK", "ROWWISE", "STREAMING",
    "Family", "Kernel", "Runner", "Shape", "declare", "declared", "family_of", "fresh_inputs", "members",
    "operand_shape", "priced_families", "refuse_unpriced", "register_family", "runnable", "shape", "twins",
    "window_rows",
]  # fmt: skip

LAYOUT = ("bcast", "xview", "zview", "accumulate", "window")
"""Features of an op's operand layout, present only where it differs from the grid's plain operands."""
LOOP_STEP, CALL, SEQUENCE = "loop-step", "call", "op-sequence"
"""What `calibrate` times beside the kernels: costs of running ops at all, not ops. One iteration of a loop
(slicing the token, writing its row); calling a variant at all (Python frames, taking its inputs, the timer);
chains of different ops, timed whole against the same ops alone. The op model keeps them as named fields
(`forms.Overheads`), not as kernels."""
OVERHEADS = (LOOP_STEP, CALL, SEQUENCE)


def _check_coverage() -> None:
    """Every op kind the engine can emit has a kernel (as `conventions.py` checks its rules); those of a family
    without a price are refused by `kernel_of`."""

    covered = {k.kind for k in KERNELS.values()} | {kind for k in KERNELS.values() for kind in k.kinds}
    missing = sorted(set(KINDS) - covered)
    if missing:
        raise AssertionError(f"op kinds without a kernel in profilers/devicemodel/kernels/: {', '.join(missing)}")


_check_coverage()


def kernel_of(op) -> str:
    """The kernel that runs an engine op: its kind, product layout or reduction axis, '!' when in place. An op of
    a family no device model prices yet is refused in one line (`registry.refuse_unpriced`)."""
    name = _name_of(op)
    refuse_unpriced(name, op.label)
    return name


def _name_of(op) -> str:
    if op.kind in PRODUCT_KINDS:
        return op.kind
    if op.kind in ("matmul", "linear"):
        if op.kind == "linear":
            return "matmul-NT"
        a, b = op.inputs[0], op.inputs[1]
        layout = ("T" if a.transposed else "N") + ("T" if b.transposed else "N")
        return f"matmul-{layout}"  # TT has no kernel: refused by calibrate, priced with a named warning
    if op.kind == "fused_attention":
        return "sdpa-causal" if op.attrs.get("causal") else "sdpa"
    if op.kind == "linear_chunk":
        a = op.attrs
        return CHUNK if plain_chunk(op) else gated_kernel(a["gate"], a["delta"], a["makes_states"], a["scores_in"])
    if op.kind == "copy":
        return "store" if op.attrs.get("overwrite") else "copy"
    axis = op.attrs.get("axis")
    rank = len(op.inputs[0].shape) if op.inputs else 0
    suffix = "-axis2" if axis is not None and axis % rank == rank - 2 else ""
    return f"{op.kind}{suffix}{'!' if op.inplace else ''}"


def build_runner(at: Shape, dtype: str, device: str, parts: Callable[[Shape], list[Shape]] | None = None) -> Runner:
    """(run, make) of the kernel at a shape, as the reference implementations run it (its own runner, else its
    family's); `parts` gives the ops an op-sequence chains (`calibrated.fit.sequence_parts`)."""
    import torch
    from attn_cost.profilers.measure.cases import DTYPES

    dt = DTYPES[dtype]
    gen = torch.Generator(device="cpu").manual_seed(0)

    def rand(*s: int, positive: bool = False) -> torch.Tensor:
        """A tensor of shape (1, 1, *s) unless s has its own batch: the rank the variants' cores run at."""
        s = (1,) * (RANK - len(s)) + s
        x = torch.rand(*s, generator=gen) + 0.5 if positive else torch.randn(*s, generator=gen)
        return x.to(device=device, dtype=dt)

    if at.kernel in OVERHEADS:
        return _overhead_runner(at, rand, dtype, device, parts)
    kernel = KERNELS[at.kernel]
    make = kernel.runner or FAMILIES[kernel.family].runner
    if make is None:
        raise RuntimeError(f"kernel {kernel.name} has no PyTorch code")
    runner = make(kernel, at, rand, dt, device)
    return fresh_inputs(runner) if kernel.inplace else runner


def _overhead_runner(at: Shape, rand: Callable, dtype: str, device: str, parts: Callable | None) -> Runner:
    """PyTorch code of what `calibrate` times beside the kernels (`OVERHEADS`)."""
    from attn_cost.profilers.measure import references as ref

    if at.kernel == LOOP_STEP:
        its = at.get("iterations")

        def loop(box: list) -> None:
            (x,) = box
            for t in range(its):
                x[:, :, t], x[:, :, t], x[:, :, t]

        return Runner(loop, lambda: [rand(its, 1)])
    if at.kernel == SEQUENCE:
        runners = [build_runner(part, dtype, device, parts) for part in (parts or (lambda s: []))(at)]

        def chain(box: list) -> None:
            for runner, inputs in zip(runners, ref.take(box), strict=True):
                runner.run(inputs)  # type: ignore[arg-type]  # each part's inputs: a list, not one tensor

        return Runner(chain, lambda: [r.make() for r in runners])
    rows, cols = at.get("rows"), at.get("cols")

    def call(box: list):
        q, k, v = ref.take(box)
        del q, k
        return v

    return Runner(call, lambda: [rand(1, 1, rows, cols) for _ in range(3)])
