"""`attn-cost trace` on code written the way attention code is written (no third-party package).

Each module below uses what real attention classes use: dropout in eval, heads split by view + transpose
(eager matmul copies them at b ≥ 2), Python names holding q, k, v and the attention weights, masks built from
arange and comparisons, positions converted with `.to`, SDPA with an attn_mask, einsum with '...' and three
operands, F.pad, an embedding (relative position bias), eye, a full max, torch.cat of a list. The expected
values are measured on the same code, at sizes other than the example sizes the trace ran at (b = 2, N = 13):
FLOPs by torch.utils.flop_counter.FlopCounterMode, the peak by the live-tensor tracer (profilers/measure/memory.py).
"""

from __future__ import annotations

import gc
import importlib.util
import textwrap
from pathlib import Path

import pytest
import sympy as sp

torch = pytest.importorskip("torch")

from attn_cost.costmodel.conventions import MATMUL  # noqa: E402
from attn_cost.costmodel.symbols import BY_NAME, N, b, d, h  # noqa: E402

CODE = textwrap.dedent(
    '''
    import torch
    import torch.nn.functional as F
    from torch import nn


    class Dropped(nn.Module):
        """Dropout in eval (module and functional), q, k, v by view + permute, names holding tensors."""

        def __init__(self, dim=32, heads=2):
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)
            self.drop = nn.Dropout(0.1)

        def forward(self, x):
            b, n, c = x.shape
            q, k, v = self.qkv(x).view(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
            attn = (q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5
            attn = F.dropout(attn.softmax(dim=-1), p=0.1, training=False)
            attn = self.drop(attn)
            y = (attn @ v).transpose(1, 2).reshape(b, n, c)
            return self.drop(self.proj(y))


    class Masked(nn.Module):
        """A causal mask from arange and a comparison, a relative bias by embedding, positions as floats,
        SDPA reading the mask, einsum with '...', a padded copy."""

        def __init__(self, dim=32, heads=2):
            super().__init__()
            self.heads = heads
            self.qkv = nn.Linear(dim, 3 * dim)
            self.out = nn.Linear(dim, dim)
            self.rel = nn.Embedding(17, heads)
            self.register_buffer("freq", torch.linspace(0.1, 1.0, dim // heads))

        def forward(self, x):
            b, n, c = x.shape
            pos = torch.arange(n, device=x.device)
            mask = pos[:, None] >= pos[None, :]
            bias = self.rel((pos[:, None] - pos[None, :]).clamp(-8, 8) + 8).permute(2, 0, 1)
            q, k, v = self.qkv(x).view(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
            theta = pos.to(x.dtype)[:, None] * self.freq
            q = q * theta.cos()
            k = k * theta.sin()
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask & (bias > -100.0))
            s = torch.einsum("...id,...jd->...ij", q, k) + bias
            s = s.masked_fill(~mask, float("-inf")).softmax(-1)
            y = y + torch.einsum("bhij,bhjd->bhid", s, v)
            y = F.pad(y, (0, 0, 1, 0))[:, :, 1:]
            return self.out(y.transpose(1, 2).reshape(b, n, c))


    def cat_inputs(q, k, v):
        a = q * 2.0
        return torch.cat([a, a], dim=-1)


    def three_operands(q, k, v):
        kv = torch.einsum("bhnd,bhne,bhn->bhde", k, v, q[..., 0])
        return q @ kv


    def eye_and_max(q, k, v):
        s = q @ k.transpose(-1, -2)
        s = s / s.abs().max()
        return (s + torch.eye(s.shape[-1], dtype=s.dtype)) @ v


    def complex_rope(q, k, v):
        """Rotary embeddings through complex numbers (Meta's Llama code), scores in float64."""
        n, dd = q.shape[-2], q.shape[-1]
        freqs = torch.outer(torch.arange(n, dtype=torch.float32), torch.linspace(0.1, 1.0, dd // 2))
        rot = torch.polar(torch.ones_like(freqs), freqs)
        q = torch.view_as_real(torch.view_as_complex(q.reshape(*q.shape[:-1], -1, 2)) * rot).flatten(-2)
        return torch.softmax(q.double() @ k.transpose(-1, -2).double(), -1).float() @ v


    class NeedsMask(nn.Module):
        """forward(x, mask) with the mask required: run with no mask."""

        def __init__(self, dim=32, heads=2):
            super().__init__()
            self.dim, self.heads = dim, heads
            self.qkv = nn.Linear(dim, 3 * dim)

        def forward(self, x, mask):
            b, n, c = x.shape
            q, k, v = self.qkv(x).view(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
            s = q @ k.transpose(-1, -2)
            if mask is not None:
                s = s.masked_fill(~mask, float("-inf"))
            return (s.softmax(-1) @ v).transpose(1, 2).reshape(b, n, c)


    def parity_branch(q, k, v):
        s = q @ k.transpose(-1, -2)
        if q.shape[-2] % 2 == 1:
            s = s * 2.0
        return torch.softmax(s, dim=-1) @ v


    def threshold_branch(q, k, v):
        s = q @ k.transpose(-1, -2)
        if q.shape[-2] > 8:
            s = s * 2.0
        return torch.softmax(s, dim=-1) @ v


    def grows_by_one(q, k, v):
        """A branch on N % 4 that appends one row (N + 1, not a multiple of 4): not padding."""
        if q.shape[-2] % 4 != 0:
            k = torch.cat([k, k[:, :, :1]], dim=-2)
            v = torch.cat([v, v[:, :, :1]], dim=-2)
        return torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v


    def _in_windows(q, k, v, w, n):
        """Attention within windows of w rows of padded q, k, v; the first n rows of the result."""
        b, h, rows, dd = q.shape
        q, k, v = (t.reshape(b, h, rows // w, w, dd) for t in (q, k, v))
        s = (q @ k.transpose(-1, -2)).softmax(-1)
        return (s @ v).reshape(b, h, rows, dd)[:, :, :n]


    class PaddedByF(nn.Module):
        """Pads q, k, v with F.pad up to a multiple of its window."""

        def __init__(self, window=4):
            super().__init__()
            self.window = window

        def forward(self, q, k, v):
            n = q.shape[-2]
            if n % self.window != 0:
                pad = self.window - n % self.window
                q, k, v = (F.pad(t, (0, 0, 0, pad)) for t in (q, k, v))
            return _in_windows(q, k, v, self.window, n)


    class PaddedByCat(nn.Module):
        """Appends a zeros tensor to q, k, v with torch.cat up to a multiple of its window."""

        def __init__(self, window=3):
            super().__init__()
            self.window = window

        def forward(self, q, k, v):
            b, h, n, dd = q.shape
            rest = n % self.window
            if rest > 0:
                zeros = torch.zeros(b, h, self.window - rest, dd, dtype=q.dtype, device=q.device)
                q, k, v = (torch.cat([t, zeros], dim=-2) for t in (q, k, v))
            return _in_windows(q, k, v, self.window, n)


    class PaddedIntoZeros(nn.Module):
        """A layer that copies x into the first n rows of x.new_zeros of the padded length (a multiple of its
        chunk), attends within chunks and drops the padded rows."""

        def __init__(self, dim=32, heads=2, chunk=5):
            super().__init__()
            self.heads, self.chunk = heads, chunk
            self.qkv = nn.Linear(dim, 3 * dim)
            self.out = nn.Linear(dim, dim)

        def forward(self, x):
            b, n, c = x.shape
            if n % self.chunk:
                rows = (n + self.chunk - 1) // self.chunk * self.chunk
                padded = x.new_zeros(b, rows, c)
                padded[:, :n] = x
                x = padded
            rows = x.shape[1]
            q, k, v = self.qkv(x).view(b, rows, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
            y = _in_windows(q, k, v, self.chunk, n)
            return self.out(y.transpose(1, 2).reshape(b, n, c))
    '''
)

LAYER_SIZES = [(3, 20), (2, 7)]
CORE_SIZES = [(3, 2, 20, 16), (2, 3, 7, 8)]


@pytest.fixture(scope="module")
def code(tmp_path_factory) -> tuple[Path, object]:
    path = tmp_path_factory.mktemp("written") / "written_attention.py"
    path.write_text(CODE)
    spec = importlib.util.spec_from_file_location("written_attention_measured", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return path, module


def measured(fn, inputs: list) -> tuple[int, int]:
    """FlopCounterMode's count (the CPU SDPA kernel mapped to PyTorch's sdpa_flop_count) and the live-tensor
    tracer's peak of one call, the caller holding the inputs."""
    from attn_cost.profilers.measure.flops import CPU_SDPA
    from attn_cost.profilers.measure.memory import LiveTensorTracer
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad():
        fn(*[x.clone() for x in inputs])
        gc.collect()
        tracer = LiveTensorTracer()
        for x in inputs:
            tracer.track(x)
        with tracer:
            out = fn(*inputs)
        del out
        with FlopCounterMode(display=False, custom_mapping=CPU_SDPA) as mode:
            fn(*inputs)
    return mode.get_total_flops(), tracer.peak


def derived(spec: str, scope: str):
    from attn_cost.costmodel.variants import derive
    from attn_cost.profilers.trace.register import register

    return derive(register(spec), scope)


@pytest.mark.parametrize("cls", ["Dropped", "Masked", "NeedsMask"])
def test_layers_as_written_match_flopcounter_and_the_live_peak(code, cls: str) -> None:
    path, module = code
    dv = derived(f"{path}:{cls}", "layer")
    torch.manual_seed(0)
    layer = getattr(module, cls)().eval()
    for bb, n in LAYER_SIZES:
        run = (lambda x, layer=layer: layer(x, None)) if cls == "NeedsMask" else layer
        flops, peak = measured(run, [torch.randn(bb, n, 32)])
        at = {b: bb, N: n}
        assert int(dv.flops(MATMUL).xreplace(at)) == flops, (cls, bb, n)
        assert int(dv.peak("fp32").expr.xreplace(at)) == peak, (cls, bb, n)


@pytest.mark.parametrize("fn", ["cat_inputs", "three_operands", "eye_and_max", "complex_rope"])
def test_cores_as_written_match_flopcounter_and_the_live_peak(code, fn: str) -> None:
    path, module = code
    dv = derived(f"{path}:{fn}", "core")
    for bb, hh, n, dd in CORE_SIZES:
        dd = 8 if fn == "complex_rope" else dd  # view_as_complex fixes the head width to the example's 8
        gen = torch.Generator().manual_seed(0)
        flops, peak = measured(getattr(module, fn), [torch.randn(bb, hh, n, dd, generator=gen) for _ in range(3)])
        at = {b: bb, h: hh, N: n, d: dd}
        assert int(dv.flops(MATMUL).xreplace(at)) == flops, (fn, bb, hh, n, dd)
        assert int(dv.peak("fp32").expr.xreplace(at)) == peak, (fn, bb, hh, n, dd)


def test_a_list_given_to_cat_is_read_by_it(code) -> None:
    """The review's reproducer: the formula was 20·bhNd bytes, the real peak 24·bhNd (q, k, v, a, the result)."""
    path, _ = code
    dv = derived(f"{path}:cat_inputs", "core")
    assert sp.expand(dv.peak("fp32").expr - 4 * 6 * b * h * N * d) == 0


def test_matmul_copies_and_held_names_are_in_the_peak_not_in_the_ideal(cli, code) -> None:
    """At b ≥ 2 eager matmul copies q and kᵀ split by view + permute, and the names q, k, v, attn live on:
    the code's peak is above the exported graph's, and both are reported."""
    path, _ = code
    r = cli("trace", f"{path}:Dropped", "--json")
    assert r.code == 0, r.err
    traced = r.json()["traced"]
    written = sp.sympify(traced["peak_bytes_as_written"], locals=dict(BY_NAME))
    ideal = sp.sympify(traced["peak_bytes_exported"], locals=dict(BY_NAME))
    assert traced["heads"] == 2 and traced["d_embed"] == 32
    for bb, n in LAYER_SIZES:
        assert written.xreplace({b: bb, N: n}) > ideal.xreplace({b: bb, N: n})


def test_a_branch_on_n_is_reported(code) -> None:
    from attn_cost.profilers.trace.register import traced

    path, _ = code
    derived(f"{path}:parity_branch", "core")
    assert "N % 2 == 1" in traced("parity_branch").conditions


@pytest.mark.parametrize(
    ("fn", "condition", "holds"),
    [("parity_branch", "N % 2 == 1", 13), ("threshold_branch", "N > 8", 13), ("grows_by_one", "N % 4 != 0", 13)],
)
def test_a_branch_on_n_that_pads_nothing_stays_a_branch(code, fn: str, condition: str, holds: int) -> None:
    """A branch on N % m, or on N > t, whose run does not pad N up to a multiple of m: its condition is
    reported as the code wrote it (the formulas hold where it does, as measured there), not taken for padding."""
    from attn_cost.profilers.trace.register import traced

    path, module = code
    dv = derived(f"{path}:{fn}", "core")
    assert condition in traced(fn).conditions and traced(fn).recording.pads == 0
    assert not dv.flops(MATMUL).has(sp.ceiling, sp.floor)
    gen = torch.Generator().manual_seed(0)
    flops, peak = measured(getattr(module, fn), [torch.randn(2, 3, holds, 8, generator=gen) for _ in range(3)])
    at = {b: 2, h: 3, N: holds, d: 8}
    assert (int(dv.flops(MATMUL).xreplace(at)), int(dv.peak("fp32").expr.xreplace(at))) == (flops, peak)


PADDED = {"PaddedByF": 4, "PaddedByCat": 3, "PaddedIntoZeros": 5}
"""Modules that pad N up to a multiple of their window (a module attribute), each written another way."""


@pytest.mark.parametrize("cls", sorted(PADDED))
def test_code_that_pads_is_exact_at_every_length(code, cls: str) -> None:
    """F.pad, torch.cat with a zeros tensor, x.new_zeros and a slice assignment: the formulas are written in
    ⌈N/m⌉ and hold at lengths that are multiples of m and at lengths that are not, with no condition on N % m."""
    from attn_cost.profilers.trace.register import traced

    path, module = code
    scope = "layer" if cls == "PaddedIntoZeros" else "core"
    dv = derived(f"{path}:{cls}", scope)
    m = PADDED[cls]
    assert traced(cls).recording.pads == m and not any("%" in c for c in traced(cls).conditions)
    assert dv.flops(MATMUL).has(sp.ceiling(N / m))
    torch.manual_seed(0)
    layer = getattr(module, cls)().eval()
    for bb, hh, n in ((2, 3, 7), (3, 2, 13), (2, 2, 15), (2, 3, 16), (1, 2, 33)):
        gen = torch.Generator().manual_seed(0)
        if scope == "layer":
            flops, peak = measured(layer, [torch.randn(bb, n, 32, generator=gen)])
            at = {b: bb, N: n}
        else:
            flops, peak = measured(layer, [torch.randn(bb, hh, n, 8, generator=gen) for _ in range(3)])
            at = {b: bb, h: hh, N: n, d: 8}
        assert int(dv.flops(MATMUL).xreplace(at)) == flops, (cls, n)
        assert int(dv.peak("fp32").expr.xreplace(at)) == peak, (cls, n)


USER_ERRORS = {
    "identity.py": ("def f(q, k, v):\n    return q\n", "f", "produced no ops"),
    "exits.py": ("import sys\nsys.exit(3)\n\ndef f(q, k, v):\n    return q @ k\n", "f", "sys.exit(3)"),
    "missing.py": ("import no_such_package_xyz\n\ndef f(q, k, v):\n    return q\n", "f", "no_such_package_xyz"),
    "values.py": (
        "import torch\n\ndef f(q, k, v):\n    s = q @ k.transpose(-1, -2)\n    if s.sum() > 0:\n"
        "        s = s * 2\n    return s @ v\n",
        "f",
        "reads tensor values",
    ),
    "needs_args.py": (
        "import torch\n\nclass M(torch.nn.Module):\n    def __init__(self, dim, heads):\n        super().__init__()\n"
        "        self.lin = torch.nn.Linear(dim, dim)\n\n    def forward(self, x):\n        return self.lin(x)\n",
        "M",
        "--init",
    ),
}


@pytest.mark.parametrize("case", sorted(USER_ERRORS))
def test_code_that_cannot_be_traced_is_one_line_and_exit_2(cli, tmp_path: Path, case: str) -> None:
    text, name, words = USER_ERRORS[case]
    (tmp_path / case).write_text(text)
    r = cli("trace", f"{case}:{name}", "--json")
    assert r.code == 2, (r.code, r.err)
    assert len(r.err.strip().splitlines()) == 1, r.err
    assert words in r.err and "Traceback" not in r.err and r.out == ""


def test_prints_in_traced_code_stay_off_json_stdout_and_example_sizes_are_chosen(cli, tmp_path: Path) -> None:
    (tmp_path / "chatty.py").write_text(
        "import torch\nprint('hello from import')\n\ndef f(q, k, v):\n    print('hello from forward')\n"
        "    assert q.shape[-2] % 4 == 0, 'N must be a multiple of 4'\n"
        "    return torch.softmax(q @ k.transpose(-1, -2), -1) @ v\n"
    )
    r = cli("trace", "chatty.py:f", "--json", "--example", "N=24,d=16")
    assert r.code == 0, r.err
    data = r.json()
    assert data["traced"]["example"]["N"] == 24 and data["traced"]["example"]["d"] == 16
    assert "N % 4 == 0" in data["traced"]["holds_for"]
    assert "hello from forward" in r.err
    bad = cli("trace", "chatty.py:f", "--example", "N=13")
    (error,) = [line for line in bad.err.splitlines() if not line.startswith("hello from")]  # the code's own prints
    assert bad.code == 2 and "--example" in error and "multiple of 4" in error


def test_a_traced_variant_is_not_measured_as_a_reference(cli, code) -> None:
    path, _ = code
    r = cli("measure", "--trace", f"{path}:cat_inputs", "--variant", "cat_inputs", "--n", "16")
    assert r.code == 2 and "attn-cost trace" in r.err and "Traceback" not in r.err


def test_crossover_compares_a_traced_layer_at_its_own_width(cli, code) -> None:
    path, _ = code
    r = cli("crossover", "--trace", f"{path}:Dropped", "--pair", "Dropped:softmax", "--d", "64", "--json")
    assert r.code == 0, r.err
    (row,) = r.json()["results"]
    assert row["d"] == 16 and "d_embed = 32 = 2 heads" in r.err
