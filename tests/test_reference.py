"""The PyTorch references compute the papers' maths: against each other and against the definitions."""

from __future__ import annotations

import math

import pytest
import torch
from attn_cost.profilers.measure.cases import build_case
from attn_cost.profilers.measure.sizes import Sizes

EQUIVALENT = [
    ("taylorshift-direct", "taylorshift-efficient"),
    ("linear-causal", "linear-recurrent"),
    ("latte-causal", "latte-recurrent"),
    ("softmax", "softmax-fused"),
    ("softmax-causal", "softmax-fused-causal"),
]
TOLERANCE = {"fp32": 1e-5, "bf16": 3e-2}  # relative to the largest output entry
SIZES = [Sizes(N=37, d=8, h=2, b=2, L=6), Sizes(N=128, d=16)]


def run(variant: str, sizes: Sizes, dtype: str = "fp32", scope: str = "core") -> torch.Tensor:
    case = build_case(variant, scope, sizes, dtype)
    with torch.no_grad():
        return case.run(case.make_inputs()).double()


def rel_err(x: torch.Tensor, y: torch.Tensor) -> float:
    return ((x - y).abs().max() / y.abs().max()).item()


@pytest.mark.parametrize(("a", "b"), EQUIVALENT)
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("sizes", SIZES, ids=lambda s: f"N{s.N}")
def test_equivalent_forms_agree(a: str, b: str, dtype: str, sizes: Sizes) -> None:
    assert rel_err(run(a, sizes, dtype), run(b, sizes, dtype)) < TOLERANCE[dtype]


def _qkv(variant: str, sizes: Sizes) -> list[torch.Tensor]:
    return [t.double() for t in build_case(variant, "core", sizes).make_inputs()]


@pytest.mark.parametrize("sizes", SIZES, ids=lambda s: f"N{s.N}")
def test_taylorshift_is_the_taylor_softmax_of_normalised_scores(sizes: Sizes) -> None:
    """Y = √(N/d) · T-SM(q̂k̂ᵀ)V with T-SM(x) = (x²/2 + x + 1)/Σ(x²/2 + x + 1) (Sec. 3, τ = 1)."""
    q, k, v = _qkv("taylorshift-efficient", sizes)
    x = (q / q.norm(dim=-1, keepdim=True)) @ (k / k.norm(dim=-1, keepdim=True)).transpose(-1, -2)
    p = x**2 / 2 + x + 1
    expected = math.sqrt(sizes.N / sizes.d) * (p / p.sum(-1, keepdim=True)) @ v
    for variant in ("taylorshift-direct", "taylorshift-efficient"):
        assert rel_err(run(variant, sizes), expected) < 1e-5


@pytest.mark.parametrize("sizes", SIZES, ids=lambda s: f"N{s.N}")
def test_linear_attention_is_the_kernel_average(sizes: Sizes) -> None:
    """V'_i = Σ_j φ(Q_i)·φ(K_j) V_j / Σ_j φ(Q_i)·φ(K_j), over all j, or over j <= i when causal."""
    q, k, v = _qkv("linear", sizes)
    phi = torch.nn.functional.elu
    sim = (phi(q) + 1) @ (phi(k) + 1).transpose(-1, -2)
    assert rel_err(run("linear", sizes), (sim @ v) / sim.sum(-1, keepdim=True)) < 1e-5
    causal = sim.tril()
    for variant in ("linear-causal", "linear-recurrent"):
        assert rel_err(run(variant, sizes), (causal @ v) / causal.sum(-1, keepdim=True)) < 1e-5


@pytest.mark.parametrize("sizes", SIZES, ids=lambda s: f"N{s.N}")
def test_latte_is_a_mixture_over_latents(sizes: Sizes) -> None:
    """x̃_t = Σ_l p(l|t) Σ_s p(s|l, t) v_s with p(l|t) a softmax over latents and p(s|l, t) over s (<= t when causal)."""
    q, k, v = _qkv("latte", sizes)
    p_l = torch.softmax(q, dim=-1)  # (b, h, N, L)
    p_s = torch.softmax(k, dim=-2)  # over all s
    assert rel_err(run("latte", sizes), p_l @ (p_s.transpose(-1, -2) @ v)) < 1e-5
    n = sizes.N
    w = torch.exp(k).unsqueeze(-3).expand(*k.shape[:2], n, n, k.shape[-1])  # [t, s, l] = exp(k_s,l)
    w = w * torch.ones(n, n, dtype=torch.bool).tril().unsqueeze(-1)
    p_causal = w / w.sum(-2, keepdim=True)  # normalised over s <= t
    expected = torch.einsum("bhtl,bhtsl,bhsd->bhtd", p_l, p_causal, v)
    for variant in ("latte-causal", "latte-recurrent"):
        assert rel_err(run(variant, sizes), expected) < 1e-5


def test_softmax_matches_pytorch_math() -> None:
    sizes = SIZES[0]
    q, k, v = _qkv("softmax", sizes)
    expected = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(sizes.d), dim=-1) @ v
    assert rel_err(run("softmax", sizes), expected) < 1e-5


@pytest.mark.parametrize(
    ("recurrent", "full"), [("linear-recurrent", "linear-causal"), ("latte-recurrent", "latte-causal")]
)
def test_a_decoding_step_continues_the_sequence(recurrent: str, full: str) -> None:
    """Run the recurrence over N tokens, then one decode step for token N+1: it equals the
    causal output at position N+1 of the whole sequence."""
    sizes = Sizes(N=9, d=4, h=2, b=1, L=3)
    whole = build_case(full, "core", Sizes(N=10, d=4, h=2, b=1, L=3))
    q, k, v = whole.make_inputs()
    with torch.no_grad():
        expected = whole.run([q.clone(), k.clone(), v.clone()])[:, :, -1]
        from attn_cost.profilers.measure.references import latte, linear

        if recurrent == "linear-recurrent":
            s = q.new_zeros(1, 2, 4, 4)
            z = q.new_zeros(1, 2, 4, 1)
            for t in range(sizes.N):
                linear.linear_step([q[:, :, t], k[:, :, t], v[:, :, t]], s, z)
            y = linear.linear_decode([q[:, :, -1], k[:, :, -1], v[:, :, -1], s, z])
        else:
            p = torch.softmax(q, dim=-1)
            m = q.new_full((1, 2, 3), float("-inf"))
            alpha, vt = q.new_zeros(1, 2, 3), q.new_zeros(1, 2, 3, 4)
            for t in range(sizes.N):
                latte.latte_step([p[:, :, t], k[:, :, t], v[:, :, t]], m, alpha, vt)
            y = latte.latte_decode([q[:, :, -1], k[:, :, -1], v[:, :, -1], m, alpha, vt])
    assert rel_err(y.squeeze(-2).double(), expected.double()) < 1e-5


def test_softmax_decode_attends_over_the_cache() -> None:
    sizes = Sizes(N=9, d=4, h=2, b=1)
    case = build_case("softmax-causal", "decode", sizes)
    q, k, v, kc, vc = case.make_inputs()
    with torch.no_grad():
        y = case.run([q, k, v, kc.clone(), vc.clone()])
        kc[:, :, -1], vc[:, :, -1] = k.squeeze(-2), v.squeeze(-2)
        expected = torch.softmax(q @ kc.transpose(-1, -2) / 2, dim=-1) @ vc
    assert rel_err(y.double(), expected.double()) < 1e-5
