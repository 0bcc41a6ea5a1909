"""retention, gla, deltanet, gated-deltanet and mamba2 (costmodel/variants/linear_rnn.py): the chunk ops' counts by
hand on tiny sizes, each variant's chunked form against its recurrence in float64, FlopCounterMode against the
engine's `matmul` count, the library selection, and the commands. The tracer and FlopCounterMode on every scope of
every variant are in test_tracer_and_flops.py."""

from __future__ import annotations

import pytest
import sympy as sp
import torch
from attn_cost.costmodel.conventions import CONVENTIONS, FULL, MATMUL, backward_factor
from attn_cost.costmodel.counting import F_chunk
from attn_cost.costmodel.errors import ModelError
from attn_cost.costmodel.graph import Graph
from attn_cost.costmodel.symbols import C, G, N, b, d, d_state, d_v, h
from attn_cost.costmodel.variants import derive
from attn_cost.profilers.measure import references
from attn_cost.profilers.measure.cases import build_case
from attn_cost.profilers.measure.references import linear_rnn as ref
from attn_cost.profilers.measure.sizes import Sizes
from torch.utils.flop_counter import FlopCounterMode

NAMES = ("retention", "gla", "deltanet", "gated-deltanet", "mamba2")

# -- the chunk ops by hand: batch 2, 10 tokens in chunks of 4 (3 chunks, the last ragged and computed whole), keys 3
# wide, values 5 wide (d_k ≠ d_v) ----------------------------------------------------------------------------------

PER = 2 * 3  # heads × chunks
STATE = 2 * 4 * 3 * 5  # one product against the state a chunk: 2·C·d_k·d_v = 120
QK, AV = 2 * 4 * 4 * 3, 2 * 4 * 4 * 5  # the C×C scores 2·C²·d_k = 96, and times the values 2·C²·d_v = 160


def _chunk(**kw) -> Graph:
    g = Graph("t")
    q, k, v = g.input("Q", 2, 10, 3), g.input("K", 2, 10, 3), g.input("V", 2, 10, 5)
    if kw.pop("gated", None) == "token":
        kw["gates"] = (g.input("G", 2, 10),)
    if kw.get("gate") == "vector":
        kw["gates"] = (g.input("G", 2, 10, 3),)
    if kw.pop("delta", False):
        kw["w"] = g.input("W", 2, 10, 3)
    if kw.pop("given", False):
        kw["states"] = g.input("S", 2, 3, 3, 5)
        kw["scores"] = g.input("A", 2, 10, 4)
    elif kw.pop("scored", False):
        kw["scores"] = g.input("A", 2, 10, 4)
    g.linear_chunk("Y", q, k, v, chunk=4, **kw)
    return g


@pytest.mark.parametrize(
    ("kw", "state", "scores"),
    [
        ({}, 2, QK + AV),  # chunk_fwd_h: S ← S + KᵀV; chunk_fwd_o: Q·S, QKᵀ, A·V
        ({"gate": "head"}, 2, QK + AV),  # retention: the same products, the decay element-wise
        ({"gate": "vector", "scored": True}, 2, AV),  # GLA: its A made by another op, read here
        ({"delta": True}, 3, QK + AV),  # the delta rule: W·S, Kᵀv_new, Q·S
        ({"gated": "token", "gate": "token", "given": True}, 1, AV),  # mamba's chunk_scan: C·S and (CB⊙decay)·X
    ],
)
def test_the_products_of_each_chunk_kernel_are_counted_by_hand(kw: dict, state: int, scores: int) -> None:
    op = _chunk(**kw).ops[-1]
    assert sp.expand(MATMUL.op_flops(op) - PER * (state * STATE + scores * F_chunk)) == 0


@pytest.mark.parametrize(
    ("kw", "state", "dk", "dv"),
    [
        ({}, 5, 3, 2),  # chunk_fwd_h again, dh, dqkwg, dv: five against the state; K·Qᵀ, dA·K, dAᵀ·Q, dO·Vᵀ, Aᵀ·dO
        ({"gate": "vector", "scored": True}, 5, 0, 2),  # the products with dA are the backward of the op that made A
        ({"delta": True}, 8, 3, 2),  # W·S, Kᵀv_new again; Qᵀ·dO, Wᵀ·dv, K·dS; dO·Sᵀ, v_new·dSᵀ, dv·Sᵀ
        ({"gated": "token", "gate": "token", "given": True}, 2, 0, 2),  # Cᵀ·dout, dout·Sᵀ; CBᵀ·dout, dout·Xᵀ
    ],
)
def test_the_backward_kernels_products_are_counted_by_hand(kw: dict, state: int, dk: int, dv: int) -> None:
    op = _chunk(**kw).ops[-1]
    expected = PER * (state * STATE + (dk * QK + dv * AV) * F_chunk)
    assert sp.expand(MATMUL.backward(op) - expected) == 0
    assert backward_factor(op) == sp.Rational(5, 2)  # bytes and element-wise work, as the plain kernels'


def test_the_decays_element_wise_work_under_full() -> None:
    """Per chunk (C = 4, d_k = 3, d_v = 5), besides the products: the state's accumulation (15) and each output row's
    two parts (20); a fixed decay (retention) also S·γ^C (15 and one power), V_c's rows by γ^(C−j) (4 differences
    and exps, 20 products), Q_cS_c's rows by γ^(i+1) (4 and 20) and each score by γ^(i−j) (3 a score: 48); the
    folded 1/√d one product an output element (2·10·5 = 100)."""
    plain = _chunk().ops[-1]
    assert sp.expand(FULL.op_flops(plain) - MATMUL.op_flops(plain) - PER * (15 + 20)) == 0
    retention = _chunk(gate="head", gain="1/√d").ops[-1]
    decay = (15 + 1 + 8 + 20) + (4 + 20 + 48 * F_chunk)
    assert sp.expand(FULL.op_flops(retention) - MATMUL.op_flops(retention) - PER * (15 + 20 + decay) - 100) == 0


def test_a_chunk_kernel_the_libraries_do_not_have_is_refused() -> None:
    with pytest.raises(ModelError, match="no chunk kernel"):
        _chunk(delta=True, scored=True)
    with pytest.raises(ModelError, match="needs its gate tensors"):
        _chunk(gate="token")


@pytest.mark.parametrize(
    ("form", "a", "bshape", "out", "flops"),
    [
        ("scores", (2, 10, 3), (2, 10, 3), (2, 10, 4), 2 * 3 * 2 * 4 * 4 * 3 * F_chunk),  # βKKᵀ: C×C, 3 wide
        ("apply", (2, 10, 4), (2, 10, 5), (2, 10, 5), 2 * 3 * 2 * 4 * 4 * 5 * F_chunk),  # T·U: a block times C rows
        ("states", (2, 10, 3), (2, 10, 5), (2, 3, 3, 5), 2 * 3 * 2 * 3 * 4 * 5),  # chunk_state: whole, no F_chunk
    ],
)
def test_a_chunk_product_by_hand(form: str, a: tuple, bshape: tuple, out: tuple, flops) -> None:
    g = Graph("t")
    y = g.chunk_matmul("Y", g.input("A", *a), g.input("B", *bshape), chunk=4, form=form)
    assert y.shape == out
    assert sp.expand(MATMUL.op_flops(g.ops[-1]) - flops) == 0
    assert CONVENTIONS["flash-bench"].op_flops(g.ops[-1]) == 0  # not attention scores unless marked


# -- the variants' totals, by the papers' chunkwise algorithms ------------------------------------------------------


def test_each_variants_products_per_chunk() -> None:
    """Per chunk of C tokens and head (b = h = 1): retention and GLA, two state products (2Cd·d_v each) and the
    scores and their values (2C²d, 2C²d_v; GLA's scores are an op of their own); the delta rule adds βKKᵀ (2C²d),
    W = T·βK (2C²d), U = T·βV (2C²d_v) and W·S (2Cd·d_v); Mamba-2 runs CB once per group (2C²d_state·G), each
    chunk's state (2C·d_state·d), C·S (2C·d_state·d) and CB·X (2C²d) per head."""
    chunks = sp.ceiling(N / C)
    expected = {
        "retention": 4 * C * d * d_v + 2 * C**2 * (d + d_v),
        "gla": 4 * C * d * d_v + 2 * C**2 * (d + d_v),
        "deltanet": 6 * C * d * d_v + 2 * C**2 * (d + d_v) + 2 * C**2 * (2 * d + d_v),
        "gated-deltanet": 6 * C * d * d_v + 2 * C**2 * (d + d_v) + 2 * C**2 * (2 * d + d_v),
        "mamba2": h * (4 * C * d_state * d + 2 * C**2 * d) + 2 * C**2 * d_state * G,
    }
    for name, per_chunk in expected.items():
        got = derive(name).flops(MATMUL).xreplace({b: 1} if name == "mamba2" else {b: 1, h: 1})
        assert sp.expand(got - chunks * per_chunk) == 0, name


def test_the_recurrence_decodes_against_a_state_of_d_by_d_v() -> None:
    """A decoding step keeps the d×d_v state (Mamba-2: d×d_state) and nothing that grows with the context."""
    for name, state in (("retention", d * d_v), ("gla", d * d_v), ("deltanet", d * d_v), ("mamba2", d * d_state)):
        g = derive(name, "decode")
        assert not any(N in e.free_symbols for e in g.peak().branches), name
        assert any(sp.expand(t.numel - b * h * state) == 0 for t in g.graph.inputs), name


# -- the references: chunked == recurrent, FlopCounterMode == the op list -------------------------------------------

SIZES = [(13, 4), (16, 4), (7, 8), (33, 16), (64, 64)]
"""(N, C): a ragged last chunk, whole chunks, a sequence shorter than a chunk, a chunk of 16, one of 64."""


def _inputs(name: str, n: int, c: int) -> tuple[Sizes, list[torch.Tensor]]:
    sizes = Sizes(N=n, d=4, h=4, b=2, C=c, d_v=6, d_state=5, G=2 if name == "mamba2" else None)
    return sizes, [x.double() for x in build_case(f"{name}-recurrent", "core", sizes).make_inputs()]


@pytest.mark.parametrize("name", NAMES)
def test_the_chunked_form_computes_the_recurrence_in_float64(name: str) -> None:
    for n, c in SIZES:
        _, inputs = _inputs(name, n, c)
        recurrent = ref.RECURRENT[name]([x.clone() for x in inputs])
        chunked = ref.CHUNKED[name]([x.clone() for x in inputs], c)
        assert ((recurrent - chunked).abs().max() / recurrent.abs().max()).item() < 1e-12, (n, c)


@pytest.mark.parametrize("name", NAMES)
def test_flop_counter_mode_on_the_chunked_form_is_the_chunk_kernels_matmul_count(name: str) -> None:
    for n, c in SIZES:
        sizes, inputs = _inputs(name, n, c)
        with FlopCounterMode(display=False) as mode, torch.no_grad():
            ref.CHUNKED[name](inputs, c)
        assert mode.get_total_flops() == int(derive(name).flops(MATMUL).xreplace(sizes.symbols())), (n, c)


def test_check_flops_counts_the_chunked_forms(cli) -> None:
    r = cli("check-flops", "--variant", "deltanet", "--scope", "core", "--json")
    assert r.code == 0, r.err
    forms = [x for x in r.json()["results"] if x["form"] == "pytorch chunked form"]
    assert forms and all(x["ok"] and x["formulas_of"] == "deltanet" and x["C"] == 4 for x in forms)


# -- which implementation runs, and the record ----------------------------------------------------------------------


def test_the_recurrence_runs_where_the_libraries_cannot_and_the_record_says_so(tmp_path) -> None:
    from attn_cost.profilers.measure.machine import prepare
    from attn_cost.profilers.measure.profile import Measurer
    from attn_cost.profilers.store.store import ResultStore

    sizes = Sizes(N=20, d=4, h=2, C=8)
    for name in NAMES:
        impl = references.implementation_of(name, sizes, "cpu")
        assert impl is not None and not impl.native and "recurrent" in impl.name
        assert references.stand_in(name, sizes, "cpu") == f"{name}-recurrent"
    store = ResultStore(prepare("cpu"), tmp_path / "store", shipped=False)
    Measurer("cpu", store).memory("gla", sizes)
    (record,) = store.records.values()
    assert record["implementation"] == "pytorch recurrence (gla-recurrent's reference)"
    assert record["key"].endswith("|impl=pytorch")
    assert record["memory"]["peak_bytes"] == derive("gla-recurrent").peak("fp32").at(sizes.symbols())[0]


@pytest.mark.parametrize("name", NAMES)
def test_where_the_library_runs_it_gets_token_major_inputs_and_the_activations(name: str, monkeypatch) -> None:
    """The plumbing of the library path, on this CPU: a stand-in with the library function's layout takes its place
    (fla-core and mamba_ssm need CUDA). It receives [B, T, H, ·] views without a copy, the gate and β after the op
    list's activations, the chunk only where the chunk is the library's (64), and its result is the variant's."""
    calls: list[tuple] = []

    def library(*args, **kwargs):
        assert all(x.is_contiguous() for x in args if torch.is_tensor(x) and x.dim() >= 3)  # [B, T, H, ·]
        calls.append((args, kwargs))
        if name == "mamba2":
            x, dt, a, bk, cq, chunk = args
            assert torch.equal(a, ref.constants(x.shape[2], x.dtype, "cpu")["−A"].float()) and kwargs["dt_softplus"]
            return ref.CHUNKED[name]([t.transpose(1, 2) for t in (cq, bk, x, dt)], chunk).transpose(1, 2)
        q, _, _, *rest = (t.transpose(1, 2) for t in args)
        assert kwargs["scale"] == q.shape[-1] ** -0.5
        if name == "gla":  # the gate after logsigmoid/16: its cumulative sum decays
            assert (rest[0] < 0).all()
        if name in ("deltanet", "gated-deltanet"):  # β after the sigmoid, Q and K normalised in the kernel
            assert ((rest[-1] > 0) & (rest[-1] < 1)).all() and kwargs["use_qk_l2norm_in_kernel"]
        return (args[2], None)  # fla's (o, final_state), o as [B, T, H, V]

    monkeypatch.setattr(ref, "LIBRARY_DEVICE", "cpu")
    monkeypatch.setattr(ref, "library_kernel", lambda variant: (library, "test-lib 0.0"))
    sizes = Sizes(N=40, d=4, h=2, b=2, C=ref.LIBRARY_CHUNK, d_state=4)
    impl = references.implementation_of(name, sizes, "cpu")
    assert impl is not None and impl.native and impl.token_major and impl.version == "test-lib 0.0"
    case = build_case(name, "core", sizes)
    inputs = case.make_inputs()
    assert all(x.transpose(1, 2).is_contiguous() for x in inputs if x.dim() >= 3)
    with torch.no_grad():
        y = case.run(inputs)
    assert len(calls) == 1
    if name == "mamba2":
        expect = ref.RECURRENT[name](build_case(name, "core", sizes).make_inputs())
        assert ((y - expect).abs().max() / expect.abs().max()).item() < 1e-4
    assert not references.implementation_of(name, Sizes(N=40, d=4, C=32), "cpu").native  # not the library's chunk


# -- the commands ---------------------------------------------------------------------------------------------------


def test_the_value_dim_state_and_groups_size_only_the_variants_written_with_them(cli) -> None:
    r = cli("crossover", "--pair", "softmax-fused-causal:gla", "--d", "64", "--dv", "128", "--json")
    assert r.code == 0, r.err
    wide = r.json()["results"][0]
    plain = cli("crossover", "--pair", "softmax-fused-causal:gla", "--d", "64", "--json").json()["results"][0]
    assert (wide["d_v"], plain["d_v"]) == (128, 64) and wide["n0"] != plain["n0"]  # d_v = d unless given
    for args in (("--pair", "softmax:softmax-fused", "--dv", "128"), ("--pair", "softmax:gla", "--state", "64"),
                 ("--pair", "softmax:mamba2", "--groups", "3", "--h", "4")):  # fmt: skip
        r = cli("crossover", *args)
        assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err
    assert "divide --h" in cli("crossover", "--pair", "softmax:mamba2", "--groups", "3", "--h", "4").err


def test_the_value_dim_follows_the_head_dim_unless_given(cli) -> None:
    """Without --dv, d_v = d: gla at d = 32 costs what it costs at d = d_v = 32; heads moves d_v with d."""
    rows = cli("cheapest", "--variant", "gla", "--variant", "retention", "--d", "32", "--json").json()
    assert rows["results"]
    r = cli("heads", "--variant", "gla", "--d-embed", "256", "--n", "1024", "--json")
    assert r.code == 0, r.err
    at = {d: 32, d_v: 32, h: 8, b: 1, C: 64, N: 1024}
    table = next(x for x in r.json()["results"] if x["cost"] == "flops")["table"]
    assert next(row for row in table if row["h"] == 8)["value"] == int(
        derive("gla").flops(CONVENTIONS["taylorshift-v1"]).xreplace(at)
    )


def test_decode_says_from_which_context_the_state_is_cheaper_than_the_cache(cli) -> None:
    """At the context decode reports, the state's per-token memory is no more than the KV cache's, one token
    before it is more (the peaks read by the liveness walk at those sizes, not by the crossing)."""
    r = cli("decode", "--variant", "softmax-fused-causal", "--variant", "mamba2", "--d", "64", "--json")
    assert r.code == 0, r.err
    (win,) = r.json()["state_wins"]
    assert (win["cache"], win["state"]) == ("softmax-fused-causal", "mamba2")
    at = {d: 64, h: 1, b: 1, d_state: 128, G: 1}
    cache, state = (derive(v, "decode").peak("fp32") for v in ("softmax-fused-causal", "mamba2"))
    n = win["memory"]
    assert state.at({**at, N: n})[0] <= cache.at({**at, N: n})[0]
    assert state.at({**at, N: n - 1})[0] > cache.at({**at, N: n - 1})[0]


def test_the_datasheet_model_prices_the_gated_and_delta_rule_layers(cli) -> None:
    """`crossover --device` answers for gated-deltanet against FlashAttention on a datasheet GPU (fla's kernels by
    their grids), and each of the five layers has a predicted time there, growing with N."""
    r = cli("crossover", "--pair", "softmax-fused-causal:gated-deltanet", "--d", "128", "--device", "h100-sxm5-80gb")
    assert r.code == 0, r.err
    for v in ("retention", "gla", "deltanet", "gated-deltanet", "mamba2"):
        r = cli("predict", "--device", "h100-sxm5-80gb", "--variant", v, "--n", "4096", "--n", "8192", "--d", "128",
                "--json")  # fmt: skip
        assert r.code == 0, (v, r.err)
        t = [row["seconds"] for row in r.json()["results"]]
        assert 0 < t[0] < t[1], (v, t)


# -- the op calibration: each chunk kernel timed as its own op ------------------------------------------------------


def _op_inputs(name: str, n: int, c: int) -> tuple[list[torch.Tensor], list[torch.Tensor], dict]:
    """The variant's inputs (float64) and what its `linear_chunk` op reads, made by the chunked forms' own pieces
    (`_wy`, the gates, the scores and Mamba-2's states), b = 2, h = 3 (Mamba-2: a group a head), d_v ≠ d_k."""
    gen = torch.Generator().manual_seed(n * 100 + c)
    b_, h_, dk, dv = 2, 3, 4, 6

    def rnd(*shape: int) -> torch.Tensor:
        return torch.randn(b_, h_, n, *shape, generator=gen, dtype=torch.float64)

    q, k = rnd(dk), rnd(dk)
    if name == "mamba2":
        x, dt = rnd(dk + 1), rnd()
        cst = ref.constants(h_, torch.float64, "cpu")
        delta = ref._chunked(ref._softplus_biased(dt, cst["dt_bias"]), c)
        da = (delta * cst["−A"].view(1, h_, 1, 1)).cumsum(3)
        bc, cc, xc = (ref._chunked(t, c) for t in (k, q, x))
        local = bc.transpose(-1, -2) @ (xc * (delta * (da[..., -1:] - da).exp()).unsqueeze(-1))
        states = ref._scan(local, da[:, :, :, -1].exp()[..., None, None])
        rows = delta.shape[2] * c
        ops = [q, k, x, delta.reshape(b_, h_, rows), da.reshape(b_, h_, rows), states,
               (cc @ bc.transpose(-1, -2)).reshape(b_, h_, rows, c)]  # fmt: skip
        return [q, k, x, dt], ops, {"gate": "token", "delta": False, "makes_states": False, "scores_in": True,
                                    "skip": True}  # fmt: skip
    v = rnd(dv)
    if name == "retention":
        return [q, k, v], [q, k, v], {"gate": "head", "delta": False, "makes_states": True, "scores_in": False}
    if name == "gla":
        alpha = rnd(dk)
        big = ref._chunked(ref._gla_gate(alpha), c).cumsum(3)
        a = (ref._chunked(q, c) * big.exp()) @ (ref._chunked(k, c) * (-big).exp()).transpose(-1, -2)
        flat = [t.reshape(b_, h_, -1, t.shape[-1])[:, :, :n] for t in (big, a)]
        return [q, k, v, alpha], [q, k, v, *flat], {"gate": "vector", "delta": False, "makes_states": True,
                                                    "scores_in": True}  # fmt: skip
    beta, a_ = rnd(), rnd()
    qn, kn, bs = ref._unit(q, k, beta)
    gated = name == "gated-deltanet"
    big = ref._chunked(ref._decay(a_), c).cumsum(3) if gated else None
    w, u = ref._wy(ref._chunked(kn, c), ref._chunked(v, c), ref._chunked(bs, c), c, big)
    w, u = (t.reshape(b_, h_, -1, t.shape[-1])[:, :, :n] for t in (w, u))
    gates = [big.reshape(b_, h_, -1)[:, :, :n]] if big is not None else []
    inputs = [q, k, v, a_, beta] if gated else [q, k, v, beta]
    return inputs, [qn, kn, u, w, *gates], {"gate": "token" if gated else "none", "delta": True,
                                            "makes_states": True, "scores_in": False}  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_each_chunk_kernel_alone_computes_its_share_of_the_chunked_form(name: str) -> None:
    """What `calibrate` times for a gated or delta-rule chunk kernel (`linear_rnn.chunk_op`, the op alone, on the
    tensors the other ops made) completes the variant's chunked form exactly, in float64, ragged chunks included."""
    for n, c in SIZES:
        inputs, ops, config = _op_inputs(name, n, c)
        whole = ref.CHUNKED[name]([x.clone() for x in inputs], c)
        alone = ref.chunk_op(ops, c, **config)
        assert ((alone - whole).abs().max() / whole.abs().max()).item() < 1e-12, (n, c)


def test_a_calibration_times_the_chunk_kernels_and_prices_them_by_their_own_timings(tmp_path) -> None:
    """A tiny calibration of the gated chunk kernels and the per-chunk products (their grid, as `calibrate` times
    it): each is fitted as a product from its own timings, and the op model prices the five layers' ops from them,
    with no warning that one was priced as something else (a calibration without them names each stand-in)."""
    import warnings
    from dataclasses import replace

    from attn_cost.costmodel.errors import PricingWarning
    from attn_cost.profilers.devicemodel import kernels
    from attn_cost.profilers.devicemodel.calibrated import fit as cal
    from attn_cost.profilers.devicemodel.calibrated.data import fit_points
    from attn_cost.profilers.devicemodel.device import row_dims
    from attn_cost.profilers.devicemodel.tunables import QUICK
    from attn_cost.profilers.measure.machine import prepare
    from attn_cost.profilers.store.store import ResultStore
    from test_opmodel import DEVICE, op_crossing, streaming_points, synthetic_model

    tune = replace(QUICK, chunk_lengths=(32, 64, 128), chunk_d=(8,), chunk_sizes=(8, 16), batched_products=(4, 16))
    families = (kernels.LINEAR_RNN, kernels.CHUNK_PRODUCTS)
    shapes = [s for s in cal.grid({"L3": 1 << 20}, "fp32", tune) if kernels.family_of(s.kernel).name in families]
    calibrator = cal.Calibrator(ResultStore(prepare("cpu"), tmp_path / "store", shipped=False), "cpu", repeats=2,
                                rates=cal.FIRST_RATES, tune=tune)  # fmt: skip
    lined = {p.shape.kernel for p in cal.line_grid(list(NAMES), [{"d": 8}], {"L3": 1 << 20}, tune=tune)}
    assert set(kernels.chunk.CATALOGUE_CONFIGS) | {"chunk_matmul", "tri_solve"} <= lined  # d_v follows d
    timed = [calibrator.point(s) for s in shapes]
    assert all(p is not None and p.seconds > 0 for p in timed)
    base = synthetic_model()
    extra = [p for k in ("pointwise", "cumsum") for p in streaming_points(k)]
    model = fit_points(DEVICE, "fp32", base.points + extra + timed)  # type: ignore[operator]
    own = {*kernels.chunk.CATALOGUE_CONFIGS, "chunk_matmul", "tri_solve"}
    assert {name for name in own if type(model.kernels.get(name)).__name__ == "Gemm"} == own
    for name in NAMES:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            op_crossing(model, "softmax-causal", name, row_dims({"d": 8, "C": 16}), replicates=0)
        said = [str(w.message) for w in caught if issubclass(w.category, PricingWarning)]
        assert not [m for m in said if any(f"the {k} kernel" in m for k in own)], said
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        op_crossing(fit_points(DEVICE, "fp32", base.points + extra), "softmax-causal", "deltanet",
                    row_dims({"d": 8, "C": 16}), replicates=0)  # fmt: skip
    said = " ".join(str(w.message) for w in caught if issubclass(w.category, PricingWarning))
    assert "the linear-chunk-delta kernel: priced as copy" in said and "tri_solve kernel: priced as matmul-NN" in said


# -- on a GPU with the libraries: their kernels compute the recurrence ------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_on_cuda_the_librarys_kernels_compute_the_recurrence(name: str) -> None:
    """Where fla-core (mamba-ssm for Mamba-2) runs on CUDA: the chunked variant runs the library's kernels on
    token-major views, and agrees with its recurrence in float64 (fp32 kernels: tensor-core products, so 1e-2)."""
    if ref.library_kernel(name)[0] is None:
        pytest.skip(ref.library_kernel(name)[1])
    sizes = Sizes(N=200, d=64, h=4, b=2, C=ref.LIBRARY_CHUNK, d_state=64)
    impl = references.implementation_of(name, sizes, "cuda")
    assert impl is not None and impl.native
    case = build_case(name, "core", sizes, "fp32", "cuda")
    inputs = case.make_inputs()
    with torch.no_grad():
        y = case.run([x.clone() for x in inputs]).double()
        expect = ref.RECURRENT[name]([x.double().contiguous() for x in inputs])
    assert ((y - expect).abs().max() / expect.abs().max()).item() < 1e-2


def test_a_calibration_older_than_a_kernel_says_whether_calibrate_can_time_it(cli, monkeypatch) -> None:
    """The shipped CPU calibration predates the gated layers' kernels: the pointwise gate and GLA's chunk kernel
    (its vector gate, scores given) have PyTorch code, so a new calibration times them; a kernel without a runner
    (here the chunk kernel, made so) is said to have none, never promised a timing that `calibrate` cannot take."""
    args = ("crossover", "--device", "cpu-amd-epyc-5155e7", "--pair", "softmax-fused-causal:gla", "--d", "64")
    r = cli(*args)
    assert r.code == 0
    said = " ".join(r.err.split())
    assert "no timings of the pointwise kernel: priced as copy; `attn-cost calibrate` times it" in said
    assert "no timings of the linear-chunk-vector-scored kernel: priced as copy; `attn-cost calibrate` times" in said
    from attn_cost.profilers.devicemodel.calibrated import data

    monkeypatch.setattr(data, "runnable", lambda name: name != "linear-chunk-vector-scored")
    said = " ".join(cli(*args).err.split())
    assert "the linear-chunk-vector-scored kernel: priced as copy; the op model has no PyTorch code" in said
