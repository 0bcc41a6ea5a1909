"""--feature-map and --normalize (flash-linear-attention's options of linear attention): the op list changes (φ's ops
gone for the identity, one op for relu in place of elu + 1's, the normaliser's ops gone without it), and so do the
FLOPs, the peak, the traffic and the device's kernels; the references compute the same maths (a naive float64
formula per option), PyTorch counts their products as the op list does (FlopCounterMode) and holds the bytes the
liveness walk says (the live-tensor tracer); the commands take the options where a variant has them and refuse them
with one line where none has."""

from __future__ import annotations

from collections.abc import Callable
from itertools import product

import pytest
import sympy as sp
import torch
import torch.nn.functional as F  # noqa: N812
from attn_cost.costmodel.conventions import FULL, MATMUL
from attn_cost.costmodel.counting import Counting
from attn_cost.costmodel.errors import UserError
from attn_cost.costmodel.symbols import C, N, b, d, h
from attn_cost.costmodel.variants import derive
from attn_cost.profilers.devicemodel.opcalls import kernel_calls
from attn_cost.profilers.measure.cases import Case, Params
from attn_cost.profilers.measure.flops import CPU_SDPA
from attn_cost.profilers.measure.memory import traced_peak
from attn_cost.profilers.measure.references import REFERENCES, stand_in
from attn_cost.profilers.measure.sizes import Sizes
from torch import Tensor
from torch.utils.flop_counter import FlopCounterMode

LINEAR = [
    "linear",
    "linear-causal",
    "linear-recurrent",
    "linear-causal-fused",
    "linear-chunked",
    "linear-chunked-fused",
]
DECODING = LINEAR[1:]
MAPS = ["elu1", "relu", "identity"]
OPTIONS = list(product(MAPS, (True, False)))
SIZES = [Sizes(N=7, d=4, h=2, b=1, C=4), Sizes(N=12, d=3, h=1, b=2, C=4)]
"""A ragged last chunk (N = 7) and whole ones (N = 12), several chunks each."""


def graph(variant: str, scope: str, phi: str, normalize: bool, mode: str = "inference"):
    return derive(variant, scope, mode, feature_map=phi, normalize=normalize)


# -- the op list ---------------------------------------------------------------------------------------------------


def test_fla_chunk_linear_attn_without_normalize_is_its_chunk_kernels_alone() -> None:
    """fla's chunk_linear_attn(normalize=False) on its inputs (no feature map) is chunk_simple_gla's kernels and
    nothing else (docs/linear-kernels.md 1.5: two forward kernels, no eager op); normalize=True adds the running key
    sum and the eager mul, sum, add, div (1.1); φ = elu + 1 is F.elu then + 1 on each of q and k, relu one op."""
    kinds = {
        (phi, norm): [op.kind for op in graph("linear-chunked-fused", "core", phi, norm).ops] for phi, norm in OPTIONS
    }
    assert kinds[("identity", False)] == ["linear_chunk"]
    assert kinds[("relu", False)] == ["pointwise", "pointwise", "linear_chunk"]
    assert kinds[("elu1", False)] == ["elu1", "elu1", "linear_chunk"]
    normaliser = ["cumsum", "scale", "mul", "sum", "pointwise", "div", "copy"]
    assert kinds[("identity", True)] == ["linear_chunk", *normaliser]
    assert kinds[("elu1", True)] == ["elu1", "elu1", "linear_chunk", *normaliser]


def test_the_options_change_the_flops_by_the_ops_they_add() -> None:
    """Counted by hand under `full`, per head and batch: elu + 1 is 2 operations an element of Q and of K (4Nd),
    relu 1 (2Nd), the identity none; fla's normaliser z = cumsum(φ(K)) (Nd), φ(Q)·scale (Nd), ⊙ z (Nd), the row
    sum (Nd), + 10⁻¹⁰ (N), num / den (Nd): 5Nd + N. The bidirectional form's normaliser: Σφ(K) (Nd), φ(Q)·z (2Nd),
    the division (Nd): 4Nd."""
    bh = b * h

    def full(variant: str, phi: str, norm: bool) -> sp.Expr:
        return graph(variant, "core", phi, norm).flops(FULL)

    for variant in ("linear-chunked-fused", "linear"):
        assert sp.expand(full(variant, "elu1", False) - full(variant, "identity", False)) == 4 * bh * N * d
        assert sp.expand(full(variant, "relu", False) - full(variant, "identity", False)) == 2 * bh * N * d
    assert sp.expand(
        full("linear-chunked-fused", "relu", True) - full("linear-chunked-fused", "relu", False)
    ) == sp.expand(bh * (5 * N * d + N))
    assert sp.expand(full("linear", "relu", True) - full("linear", "relu", False)) == 4 * bh * N * d


def test_memory_and_traffic_follow_the_normaliser() -> None:
    """fla's chunk_linear_attn(normalize=False) on Q, K, V holds them, its output and the state entering each chunk
    (h: [B, NT, H, K, V], docs/linear-kernels.md 1.1): 4Nd + ⌈N/C⌉·d² elements a head, by hand 4·4096·64 + 64·64²
    = 1,310,720 at N = 4096, d = C = 64; the normaliser's z = cumsum(φ(K)) and den come on top, and their reads and
    writes add to the traffic."""
    on, off = (graph("linear-chunked-fused", "core", "identity", norm) for norm in (True, False))
    at = {b: 1, h: 1, d: 64, C: 64, N: 4096}
    assert off.peak("fp32").at(at)[0] == 4 * 1_310_720
    assert off.peak("fp32").at(at)[0] < on.peak("fp32").at(at)[0]
    assert off.traffic("fp32").xreplace(at) < on.traffic("fp32").xreplace(at)


def test_device_pricing_prices_the_op_list_of_the_options() -> None:
    """A device prices the kernels the options leave: fla's chunk kernels alone for identity without normaliser."""
    dims = {b: 1, h: 8, d: 64, C: 64}
    calls = {opt: kernel_calls("linear-chunked-fused", "core", "bf16", dims, Counting(feature_map=opt[0],
                                                                                      normalize=opt[1]))
             for opt in OPTIONS}  # fmt: skip
    assert len(calls[("identity", False)].kernels) == 1
    assert len(calls[("relu", False)].kernels) == 3
    assert len(calls[("elu1", True)].kernels) == 10
    assert calls[("relu", False)].kernels[0] == "pointwise"


def test_counting_checks_the_options() -> None:
    with pytest.raises(UserError, match="unknown --feature-map 'hedgehog'"):
        Counting(feature_map="hedgehog")
    data = Counting(feature_map="relu", normalize=False).as_json()
    assert (data["feature_map"], data["normalize"]) == ("relu", False)
    assert "φ relu" in Counting(feature_map="relu").caption()


# -- the references: the same maths, the same products, the same bytes ----------------------------------------------


def phi_of(name: str) -> Callable[[Tensor], Tensor]:
    return {"elu1": lambda x: F.elu(x) + 1, "relu": F.relu, "identity": lambda x: x}[name]


def naive(q: Tensor, k: Tensor, v: Tensor, phi: str, norm: bool, causal: bool) -> Tensor:
    """Katharopoulos et al.'s Eq. (4) row by row in float64: yᵢ = Σⱼ (φ(qᵢ)·φ(kⱼ)) vⱼ / Σⱼ φ(qᵢ)·φ(kⱼ), j ≤ i where
    causal; without the normaliser the numerator alone (fla's chunk_linear_attn(normalize=False), scale 1)."""
    f = phi_of(phi)
    fq, fk = f(q.double()), f(k.double())
    n = q.shape[-2]
    out = torch.empty(*q.shape[:-1], v.shape[-1], dtype=torch.float64)
    for i in range(n):
        keys = slice(0, i + 1) if causal else slice(0, n)
        w = (fq[..., i : i + 1, :] * fk[..., keys, :]).sum(-1)  # b, h, j
        num = (w.unsqueeze(-1) * v.double()[..., keys, :]).sum(-2)
        out[..., i, :] = num / w.sum(-1, keepdim=True) if norm else num
    return out


def inputs_of(variant: str, scope: str, s: Sizes, phi: str, norm: bool, dtype=torch.float64) -> list[Tensor]:
    """Random inputs of the shapes the op list reads with these options (a decoding step without the normaliser has
    no z); a normaliser's running key sum z positive, as a sum of positive features is."""
    gen = torch.Generator().manual_seed(3)
    out = []
    for t in graph(variant, scope, phi, norm).graph.inputs:
        shape = [int(x.xreplace(s.symbols())) for x in t.shape]
        x = torch.randn(*shape, generator=gen, dtype=dtype)
        out.append(x.abs() + 1 if t.name == "z" else x)
    return out


def runner(variant: str, scope: str, s: Sizes, phi: str, norm: bool) -> Callable[[list[Tensor]], Tensor]:
    ref = REFERENCES[variant]
    if scope == "decode":
        assert ref.decode is not None
        step = ref.decode
        return lambda xs: step(xs, feature_map=phi, normalize=norm)  # type: ignore[call-arg]
    assert ref.core is not None
    core = ref.core
    consts = ref.constants(s, Params(torch.float64, "cpu", 0)) if ref.constants is not None else {}
    return lambda xs: core(xs, **consts, feature_map=phi, normalize=norm)


@pytest.mark.parametrize("variant", LINEAR)
@pytest.mark.parametrize(("phi", "norm"), OPTIONS)
def test_references_compute_the_naive_formula(variant: str, phi: str, norm: bool) -> None:
    for s in SIZES:
        xs = inputs_of(variant, "core", s, phi, norm)
        want = naive(*xs, phi, norm, causal=variant != "linear")
        got = runner(variant, "core", s, phi, norm)(list(xs))
        # relu's features of a row can all be 0: 0/0 there, in the formula as in the code (NaN at the same places)
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9, equal_nan=True, msg=f"{variant} {phi} {norm} {s}")
        assert want.isfinite().float().mean() > 0.5  # most rows compared


@pytest.mark.parametrize(("phi", "norm"), OPTIONS)
def test_a_decoding_step_computes_the_naive_step(phi: str, norm: bool) -> None:
    """One token after a state s (and z): y = φ(q)ᵀ(s + φ(k)vᵀ) / φ(q)ᵀ(z + φ(k)), or the numerator alone."""
    s = SIZES[0]
    f = phi_of(phi)
    for variant in DECODING:
        xs = inputs_of(variant, "decode", s, phi, norm)
        q, k, v, state = (x.clone() for x in xs[:4])
        num = f(q).unsqueeze(-2) @ (state + f(k).unsqueeze(-1) * v.unsqueeze(-2))
        want = num / (f(q).unsqueeze(-2) @ (xs[4] + f(k).unsqueeze(-1))) if norm else num
        got = runner(variant, "decode", s, phi, norm)(list(xs))
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-9, msg=f"{variant} {phi} {norm}")


def case(variant: str, scope: str, s: Sizes, phi: str, norm: bool) -> Case:
    return Case(variant, scope, s, "fp32", "cpu", runner(variant, scope, s, phi, norm),
                lambda: inputs_of(variant, scope, s, phi, norm, torch.float32))  # fmt: skip


@pytest.mark.parametrize(("phi", "norm"), OPTIONS)
def test_flop_counter_mode_counts_the_products_of_the_op_list(phi: str, norm: bool) -> None:
    """Without the normaliser the products of the denominator (φ(Q)·z, φ(Q_c)z_c, the per-token φ(q)ᵀz) are gone
    from the code and from the op list alike."""
    for variant, scope, s in product(LINEAR, ("core", "decode"), SIZES):
        if scope == "decode" and variant not in DECODING:
            continue
        model = stand_in(variant, s, "cpu", scope)  # linear-chunked-fused runs linear-chunked's form on a CPU
        with FlopCounterMode(display=False, custom_mapping=CPU_SDPA) as mode, torch.no_grad():
            case(variant, scope, s, phi, norm).run(inputs_of(variant, scope, s, phi, norm, torch.float32))
        expected = int(graph(model, scope, phi, norm).flops(MATMUL).xreplace(s.symbols()))
        assert mode.get_total_flops() == expected, (variant, scope, s)


@pytest.mark.parametrize(("phi", "norm"), OPTIONS)
def test_traced_peak_equals_the_liveness_walk_per_option(phi: str, norm: bool) -> None:
    for variant, scope in [(v, "core") for v in LINEAR] + [(v, "decode") for v in DECODING[:1]]:
        s = SIZES[0]
        peak, op = traced_peak(case(variant, scope, s, phi, norm))
        model = stand_in(variant, s, "cpu", scope)
        modelled, step = graph(model, scope, phi, norm).peak("fp32").at(s.symbols())
        assert peak == modelled, f"{variant} {scope}: traced {peak} at {op}, modelled {modelled} at {step.op.label}"


# -- the commands ----------------------------------------------------------------------------------------------------


def test_formula_json_names_the_options(cli) -> None:
    r = cli("formula", "linear-chunked-fused", "--feature-map", "identity", "--no-normalize", "--json")
    assert r.code == 0, r.err
    counting = r.json()["counting"]
    assert (counting["feature_map"], counting["normalize"]) == ("identity", False)


def test_formula_counts_the_op_list_of_the_options(cli) -> None:
    """linear with the identity and no normaliser is two products of N×d by d×d per head, φ(K)ᵀV and Q(φ(K)ᵀV):
    4Nd² under every convention that counts products (hand arithmetic); elu + 1 and the normaliser add 4Nd + 4Nd
    under `full` (2 an element of Q and K; Σφ(K), φ(Q)·z, the division)."""
    names = {"N": N, "b": b, "d": d, "h": h}
    bare = cli("formula", "linear", "--feature-map", "identity", "--no-normalize", "--json").json()["flops"]
    assert sp.sympify(bare["full"], locals=names) == 4 * N * b * d**2 * h
    paper = cli("formula", "linear", "--json").json()["flops"]
    assert sp.expand(sp.sympify(paper["full"], locals=names) - sp.sympify(bare["full"], locals=names)) == sp.expand(
        8 * N * b * d * h
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["formula", "softmax", "--feature-map", "relu"], "--feature-map"),
        (["formula", "softmax-fused", "--no-normalize"], "--no-normalize"),
        (["formula", "linear", "--feature-map", "dpfp"], "unknown --feature-map 'dpfp'"),
        (["crossover", "--pair", "softmax:performer", "--feature-map", "relu", "--d", "16"], "--feature-map"),
    ],
)
def test_a_variant_without_a_feature_map_refuses_the_options(cli, args: list[str], says: str) -> None:
    r = cli(*args)
    assert r.code == 2, r.err
    assert says in r.err and len(r.err.strip().splitlines()) == 1, r.err


def test_the_device_answer_follows_the_options(cli) -> None:
    """predict prices the op list of the options: without φ and the normaliser fla's kernels alone, less time."""
    times = {}
    for extra in ([], ["--feature-map", "identity", "--no-normalize"]):
        r = cli("predict", "--device", "h100-sxm5-80gb", "--variant", "linear-chunked-fused", "--n", "8192",
                    "--d", "64", "--h", "16", "--b", "8", "--json", *extra)  # fmt: skip
        assert r.code == 0, r.err
        out = r.json()
        times[bool(extra)] = out["results"][0]["seconds"]
        assert out["setting"]["counting"]["normalize"] is not bool(extra)
    assert times[True] < times[False]


def test_measured_commands_do_not_offer_the_options(cli) -> None:
    """The measured runs take each variant's own φ and normaliser (the references take the options, the measuring
    path does not pass them yet): profile and validate do not offer what they would not run."""
    for command in ("profile", "validate"):
        r = cli(command, "--feature-map", "relu")
        assert r.code == 2 and "--feature-map" in r.err, r.err
