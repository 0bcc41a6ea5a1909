"""linear-chunked-fused: causal linear attention by flash-linear-attention's fused chunk kernels (the `linear_chunk`
engine op), against hand arithmetic of what the kernels do per chunk, PyTorch where the kernels cannot run, and the
commands that use it. The kernels themselves (fla-core, Triton) run only on a GPU: the last test."""

from __future__ import annotations

import math
import time
from fractions import Fraction

import pytest
import sympy as sp
import torch
from attn_cost.costmodel.conventions import CONVENTIONS, backward_factor, get_convention
from attn_cost.costmodel.counting import Counting
from attn_cost.costmodel.errors import ModelError
from attn_cost.costmodel.graph import Graph
from attn_cost.costmodel.symbols import C, N, b, d, h
from attn_cost.costmodel.variants import derive
from attn_cost.profilers.measure import references
from attn_cost.profilers.measure.cases import build_case
from attn_cost.profilers.measure.flops import counted, derived
from attn_cost.profilers.measure.memory import traced_peak
from attn_cost.profilers.measure.references import linear as ref
from attn_cost.profilers.measure.sizes import Sizes

NAME = "linear-chunked-fused"
MATMUL = get_convention("matmul")


def _chunks(n: int, c: int) -> int:
    return -(-n // c)


def _at(n: int, c: int, dd: int, bb: int = 2, hh: int = 3) -> dict:
    return {N: n, C: c, d: dd, b: bb, h: hh}


# -- FLOPs: what the kernels do per chunk, by hand ------------------------------------------------------------


@pytest.mark.parametrize(("n", "c", "dd"), [(8, 4, 3), (10, 4, 3), (3, 4, 2), (64, 16, 8), (65, 16, 8)])
def test_flops_under_every_convention_are_the_kernels_work_per_chunk(n: int, c: int, dd: int) -> None:
    """Per chunk of C tokens (⌈N/C⌉ of them: a ragged last chunk is computed whole, masked): the state update
    φ(K_c)ᵀV_c and φ(Q_c)S_c (C·d·d multiply-adds each), the C×C scores φ(Q_c)φ(K_c)ᵀ and their product with V_c
    (C·C·d each), on chip the state's accumulation (d² adds) and each output row's two parts added (C·d). Outside
    the kernels, per token: two elu+1 (2 ops a element each), the key sum, φ(Q)·1, its product with z, the row sum
    (d ops each), + 10⁻¹⁰ (1 a row) and the division (d)."""
    bb, hh = 2, 3
    heads, chunks = bb * hh, _chunks(n, c)
    products = chunks * (2 * c * dd * dd + 2 * c * dd * dd + 2 * c * c * dd + 2 * c * c * dd)
    on_chip = chunks * (dd * dd + c * dd)
    outside = 2 * 2 * n * dd + n * dd + n * dd + n * dd + n * dd + n + n * dd  # elu1 ×2, z, ·1, ⊙z, Σ, +ε, ÷
    expected = {
        "matmul": products,
        "full": products + on_chip + outside,
        "taylorshift-icpr": products + on_chip + outside,
        "taylorshift-v1": products + on_chip + outside - n * dd,  # v1 leaves the row sum out
        "flash-bench": chunks * 2 * c * c * dd,  # its own counting: half of each chunk's two score products
    }
    assert set(expected) == set(CONVENTIONS)
    graph = derive(NAME)
    for name, per_head in expected.items():
        own = Counting(causal="half", backward="recompute") if name == "flash-bench" else Counting()
        assert graph.flops(CONVENTIONS[name], own).xreplace(_at(n, c, dd, bb, hh)) == heads * per_head, name


@pytest.mark.parametrize("causal", ["dense", "tiles", "triangle", "half"])
def test_causal_counting_applies_to_the_triangle_inside_each_chunk(causal: str) -> None:
    """--causal-count counts each chunk's C×C block as fused attention's score matrix: triangle C(C+1)/2 of its C²
    scores, half C²/2; tiles counts it whole (the kernel's tile is its chunk, computed and then masked), as dense.
    The products against the state are whole whatever the rule."""
    n, c, dd = 40, 8, 4
    chunks = _chunks(n, c)
    kept = {"dense": c * c, "tiles": c * c, "triangle": c * (c + 1) // 2, "half": Fraction(c * c, 2)}[causal]
    per_head = chunks * (4 * c * dd * dd + 2 * kept * 2 * dd)
    got = derive(NAME).flops(MATMUL, Counting(causal=causal)).xreplace(_at(n, c, dd, 1, 1))
    assert got == per_head


def test_training_follows_the_four_backward_kernels_with_the_states_recomputed() -> None:
    """Backward (chunk_fwd_h again, chunk_bwd_dh, chunk_bwd_dqkwg, chunk_bwd_dv), per chunk: five products against
    the state (K_cᵀV_c recomputed, Q_cᵀdO_c, dO_cS_cᵀ, V_cdS_cᵀ, K_cdS_c) and five over the C×C scores (dO_cV_cᵀ,
    dA·K_c, dAᵀQ_c, K_cQ_cᵀ recomputed, A_cᵀdO_c): with d_k = d_v, 5/2 of the forward at every causal share."""
    n, c, dd = 24, 8, 4
    chunks = _chunks(n, c)
    for causal, share in (("dense", Fraction(1)), ("triangle", Fraction(c + 1, 2 * c))):
        counting = Counting(causal=causal)
        forward = chunks * (2 * 2 * c * dd * dd + share * 2 * 2 * c * c * dd)
        backward = chunks * (5 * 2 * c * dd * dd + share * 5 * 2 * c * c * dd)
        got = derive(NAME, mode="training").flops(MATMUL, counting).xreplace(_at(n, c, dd, 1, 1))
        assert got == forward + backward, causal
    op = next(op for op in derive(NAME).ops if op.kind == "linear_chunk")
    assert backward_factor(op) == sp.Rational(5, 2)


def test_keys_and_values_of_other_lengths_or_queries_and_keys_of_other_widths_are_refused() -> None:
    """Values of their own width are taken (retention, GLA: d_v apart from d_k, `tests/test_linear_rnn.py`)."""
    g = Graph("t")
    q = g.input("Q", 2, N, d)
    with pytest.raises(ModelError, match="q, k of one width"):
        g.linear_chunk("Y", q, g.input("K1", 2, N, 2 * d), g.input("V1", 2, N, d), chunk=C)
    with pytest.raises(ModelError, match="one length"):
        g.linear_chunk("Y", q, g.input("K2", 2, N + 1, d), g.input("V2", 2, N + 1, d), chunk=C)


# -- memory and traffic: what goes to memory ----------------------------------------------------------------------


@pytest.mark.parametrize(("n", "c", "dd", "kind"), [(10, 4, 3, "mul"), (64, 16, 8, "mul"), (4096, 64, 64, "mul"),
                                                    (256, 16, 64, "linear_chunk")])  # fmt: skip
def test_peak_memory_is_the_kernels_states_or_the_normaliser(n: int, c: int, dd: int, kind: str) -> None:
    """While the kernels run: φ(Q), φ(K), V, the numerator (N·d each) and the state entering each chunk
    (⌈N/C⌉·d², chunk_fwd_h writes them in the activation dtype); the C×C scores and the running state never reach
    memory. In the normaliser, while φ(Q)·1 is multiplied by z: the same four N·d tensors (chunk_linear_attn's
    arguments and normalize_with_z_state's numerator, alive until it returns), z, φ(Q)·1 and the product: 7·N·d.
    The states win where ⌈N/C⌉·d² > 3·N·d (d > 3C)."""
    heads, nd = 2 * 3, n * dd
    elements = heads * max(4 * nd + _chunks(n, c) * dd * dd, 7 * nd)
    for dtype, width in (("fp32", 4), ("bf16", 2)):
        peak, step = derive(NAME).peak(dtype).at(_at(n, c, dd))
        assert peak == elements * width and step.op.kind == kind


def test_training_backward_holds_the_recomputed_states_and_their_gradients_in_fp32() -> None:
    """flash-linear-attention's backward recomputes the states (chunk_fwd_h, states_in_fp32=True) and makes their
    gradients (chunk_bwd_dh, fp32): two ⌈N/C⌉·d² fp32 tensors alive while dQ, dK and dV are made."""
    n, c, dd = 100, 16, 8
    g = derive(NAME, mode="training")
    step = next(s for s in g.backward_steps if s.op.kind == "linear_chunk")
    scratch = sorted(s.name for s in step.live if s.dtype == "fp32")
    assert scratch == ["chunk state gradients (num)", "recomputed chunk states (num)"]
    for s in step.live:
        if s.dtype == "fp32":
            assert s.numel.xreplace(_at(n, c, dd)) == 2 * 3 * _chunks(n, c) * dd * dd


@pytest.mark.parametrize(("n", "c", "dd"), [(10, 4, 3), (64, 16, 8)])
def test_traffic_is_what_each_kernel_reads_and_writes(n: int, c: int, dd: int) -> None:
    """Bytes per head, fp32 (4 a element), op by op: elu+1 of Q and of K (read N·d, write N·d each); chunk_fwd_h
    reads K and V and writes the ⌈N/C⌉ states, chunk_fwd_o reads Q, K, V and the states and writes the output; the
    key sum (N·d in, N·d out), φ(Q)·1 (the same), its product with z (2N·d in, N·d out), the row sum (N·d in, N
    out), + 10⁻¹⁰ (N in, N out), the division (N·d + N in, N·d out), z's last row copied (d in, d out)."""
    nd, states = n * dd, _chunks(n, c) * dd * dd
    per_head = 4 * (
        2 * nd + 2 * nd  # elu1 of Q, of K
        + (2 * nd + states) + (3 * nd + states + nd)  # chunk_fwd_h, chunk_fwd_o
        + 2 * nd + 2 * nd + 3 * nd + (nd + n) + 2 * n + (nd + n + nd)  # z, ·1, ⊙z, Σ, +ε, ÷
        + 2 * dd  # z's last row copied out
    )  # fmt: skip
    assert derive(NAME).traffic("fp32").xreplace(_at(n, c, dd)) == 2 * 3 * per_head


# -- where the kernels cannot run: linear-chunked's PyTorch form, said so ------------------------------------------


@pytest.mark.parametrize("n", [7, 33, 64])
def test_the_pytorch_form_that_runs_here_computes_causal_linear_attention(n: int) -> None:
    """Without CUDA and fla-core the reference is linear-chunked's PyTorch form: the same function as linear-causal
    (whole chunks, a ragged last chunk, a sequence shorter than one chunk)."""
    sizes = Sizes(N=n, d=4, h=2, b=2, C=16)
    with torch.no_grad():
        ys = []
        for variant in (NAME, "linear-causal"):
            case = build_case(variant, "core", sizes)
            ys.append(case.run(case.make_inputs()).double())
    assert ((ys[0] - ys[1]).abs().max() / ys[1].abs().max()).item() < 1e-5
    impl = references.implementation_of(NAME, sizes, "cpu")
    assert impl is not None and not impl.native and not impl.token_major
    assert references.stand_in(NAME, sizes, "cpu") == "linear-chunked"
    assert references.stand_in("linear-chunked", sizes, "cpu") == "linear-chunked"


@pytest.mark.parametrize(("n", "c"), [(16, 4), (13, 4), (7, 8)])
def test_flop_counter_mode_on_the_pytorch_form_against_the_fused_formulas(n: int, c: int) -> None:
    """FlopCounterMode on the PyTorch form counts the fused kernels' products exactly, plus the one product the two
    make differently: the denominator φ(Q_c)·z_c, a (C×d)(d×1) product per chunk in the PyTorch form (2·C·d a
    chunk, padded rows included) and an element-wise product and row sum in flash-linear-attention's normaliser
    (no product). The PyTorch form materialises what the kernels keep on chip (each chunk's C×C scores, the states
    twice over) and pads a ragged last chunk, and it normalises as it goes: its peak is linear-chunked's, not the
    kernels'."""
    sizes = Sizes(N=n, d=4, h=2, b=3, C=c)
    case = build_case(NAME, "core", sizes)
    heads, chunks = 3 * 2, _chunks(n, c)
    assert counted(case) == derived(NAME, "core", sizes) + heads * chunks * 2 * c * 4
    peak = traced_peak(case)[0]
    assert peak == derive("linear-chunked").peak("fp32").at(sizes.symbols())[0]


def test_a_measurement_records_the_implementation_that_ran(tmp_path) -> None:
    """The record names what ran (here linear-chunked's PyTorch form, with torch's version) and its key carries it:
    a later measurement by flash-linear-attention's kernels on the same device never replaces it."""
    from attn_cost.profilers.measure.machine import prepare
    from attn_cost.profilers.measure.profile import Measurer
    from attn_cost.profilers.store.store import ResultStore

    store = ResultStore(prepare("cpu"), tmp_path / "store", shipped=False)
    sizes = Sizes(N=20, d=4, C=8)
    measurer = Measurer("cpu", store)
    measurer.memory(NAME, sizes)
    measurer.memory("linear-chunked", sizes)
    records = {r["variant"]: r for r in store.records.values()}
    mine = records[NAME]
    assert mine["implementation"].startswith("pytorch chunked form") and mine["implementation_version"].startswith(
        "torch "
    )
    assert mine["key"].endswith("|impl=pytorch") and "implementation" not in records["linear-chunked"]
    assert mine["memory"]["peak_bytes"] == records["linear-chunked"]["memory"]["peak_bytes"]


def test_where_fla_runs_its_function_gets_token_major_inputs_without_a_copy_and_the_record_says_so(
    monkeypatch, tmp_path
) -> None:
    """The plumbing of the fla path, on this CPU: a stand-in with chunk_linear_attn's signature and layout takes the
    place of fla-core (which needs CUDA). It receives φ(Q), φ(K), V as contiguous [B, T, H, K] tensors (the inputs
    are drawn token-major: no transpose copy), scale 1 and normalize=True; the result is causal linear attention;
    the op model's chunk kernel calls it with normalize=False; the record names it and its key carries `|impl=fla`."""
    from attn_cost.profilers.devicemodel.kernels import CHUNK, build_runner, shape
    from attn_cost.profilers.measure.machine import prepare
    from attn_cost.profilers.measure.profile import Measurer
    from attn_cost.profilers.store.store import ResultStore

    calls: list[tuple] = []

    def chunk_linear_attn(q, k, v, scale=None, initial_state=None, output_final_state=False, normalize=True):
        assert q.is_contiguous() and k.is_contiguous() and v.is_contiguous()  # [B, T, H, K] as fla takes them
        calls.append((tuple(q.shape), scale, normalize))
        a = (q.transpose(1, 2) @ k.permute(0, 2, 3, 1)).tril()
        o = a @ v.transpose(1, 2)
        return (o / a.sum(-1, keepdim=True) if normalize else o).transpose(1, 2), None

    monkeypatch.setattr(ref, "FLA_DEVICE", "cpu")
    monkeypatch.setattr(ref, "fla_linear_attn", lambda: (chunk_linear_attn, "0.0-test"))
    sizes = Sizes(N=40, d=4, h=3, b=2, C=ref.FLA_CHUNK)
    case = build_case(NAME, "core", sizes)
    inputs = case.make_inputs()
    assert all(x.shape == (2, 3, 40, 4) and x.transpose(1, 2).is_contiguous() for x in inputs)
    with torch.no_grad():
        expect = ref.linear_causal([x.contiguous() for x in inputs]).double()
        y = case.run(inputs).double()
    assert calls == [((2, 40, 3, 4), 1.0, True)]
    assert ((y - expect).abs().max() / expect.abs().max()).item() < 1e-5
    runner = build_runner(shape(CHUNK, batch=6, m=40, k=4, n=ref.FLA_CHUNK), "fp32", "cpu")
    runner.run(runner.make())
    assert calls[-1] == ((1, 40, 6, 4), 1.0, False)
    store = ResultStore(prepare("cpu"), tmp_path / "store", shipped=False)
    Measurer("cpu", store).time([NAME], sizes, repeats=2)
    (record,) = store.records.values()
    assert record["implementation"] == "fla chunk_linear_attn"
    assert record["implementation_version"] == "fla-core 0.0-test"
    assert record["key"].endswith("|impl=fla")
    assert references.stand_in(NAME, sizes, "cpu") == NAME
    other = Sizes(N=40, d=4, h=3, b=2, C=32)  # not fla's chunk: the PyTorch form runs
    assert not references.implementation_of(NAME, other, "cpu").native


# -- the commands ---------------------------------------------------------------------------------------------------


def test_crossover_with_fused_attention_answers_quickly_and_exactly(cli) -> None:
    """softmax-fused-causal against the chunk kernels at d = 64 (C = 64: costs step at every 64 tokens, 64 residue
    classes): N0 is one past the last N at which the chunk kernels need more FLOPs, checked at every N up to well
    past it; the command answers in seconds, not minutes."""
    start = time.monotonic()
    r = cli("crossover", "--pair", f"softmax-fused-causal:{NAME}", "--d", "64", "--json")
    assert r.code == 0, r.err
    assert time.monotonic() - start < 60
    row = r.json()["results"][0]
    a = derive("softmax-fused-causal").flops(get_convention("taylorshift-v1"))
    bb = derive(NAME).flops(get_convention("taylorshift-v1"))
    at = {d: 64, C: 64, b: 1, h: 1}
    fa = sp.lambdify(N, a.xreplace(at), "math")
    fb = sp.lambdify(N, bb.xreplace(at), modules=[{"ceiling": math.ceil}, "math"])
    losing = [n for n in range(1, 3 * row["n0"] + 256) if fb(n) > fa(n)]
    assert row["n0"] == losing[-1] + 1


def test_formula_shows_the_named_chunk_factor_and_no_padded_copy(cli) -> None:
    """`formula` names the intra-chunk share (F_chunk, here the triangle's) and says the costs step at whole chunks
    without a padded copy (the kernels mask their last chunk); linear-chunked's PyTorch form pads, and has no
    causal mask of a score matrix for --causal-count to count."""
    r = cli("formula", NAME, "--convention", "matmul", "--causal-count", "triangle")
    assert r.code == 0, r.err
    assert "F_chunk·(4bhC⌈N⌉_C·d)" in r.out and "F_chunk = (C + 1)/(2*C)" in r.out
    data = cli("formula", NAME, "--json").json()
    assert data["padded_to"][0]["multiple"] == "C" and "padded copy" not in data["padded_to"][0]["meaning"]
    assert "padded copy" in cli("formula", "linear-chunked", "--json").json()["padded_to"][0]["meaning"]
    r = cli("formula", "linear-chunked", "--causal-count", "triangle")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err  # its C×C blocks are not a causal mask's


def test_io_decode_and_n_kv(cli) -> None:
    """`io --against` takes the chunk kernels (their traffic grows as N: ⌈N/C⌉ counts as N); their decoding step is
    the recurrent one, as linear-chunked's; keys of their own length are refused in one line."""
    r = cli("io", "--against", NAME, "--d", "64", "--json")
    assert r.code == 0, r.err
    against = r.json()["results"][0]["against"][0]
    n, dd = 4096, 64
    assert against["variant"] == NAME
    assert against["traffic"][str(n)] == derive(NAME).traffic("bf16").xreplace(_at(n, 64, dd, 1, 1))
    decode = cli("decode", "--variant", NAME, "--variant", "linear-chunked", "--json").json()
    rows = {row["variant"]: {k: row[k] for k in ("flops", "memory", "traffic")} for row in decode["results"]}
    assert rows[NAME] == rows["linear-chunked"] and rows[NAME]["flops"]["per_token"]["1024"] > 0
    r = cli("crossover", "--pair", f"softmax-fused-causal:{NAME}", "--n-kv", "4096")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err


def test_doctor_says_whether_flash_linear_attention_runs(cli) -> None:
    data = cli("doctor", "--cpu", "--no-profile", "--json").json()
    assert data["fla"]["usable"] is False and data["fla"]["why"]
    assert any("linear-chunked-fused runs the PyTorch chunked form" in m for m in data["missing"])


def test_the_op_model_times_the_chunk_kernels_at_the_variants_shapes_and_names_what_it_never_timed() -> None:
    """`calibrate --d` times the chunk kernels as one op at the variant's shapes (heads, length, head dim, chunk),
    by the code that runs them here; a calibration without those timings prices the op as a copy of its bytes and
    says so (a named warning), never silently."""
    import warnings

    from attn_cost.costmodel.errors import PricingWarning
    from attn_cost.profilers.devicemodel.calibrated import fit as cal
    from attn_cost.profilers.devicemodel.device import row_dims
    from attn_cost.profilers.devicemodel.kernels import CHUNK, build_runner
    from test_opmodel import op_crossing, synthetic_model

    points = [p for p in cal.line_grid([NAME], [{"d": 8, "C": 16}], {"L3": 1 << 20}) if p.shape.kernel == CHUNK]
    assert points and all(dict(p.shape.dims) == {"batch": 1, "m": p.n, "k": 8, "n": 16} for p in points)
    runner = build_runner(points[0].shape, "fp32", "cpu")
    assert tuple(runner.run(runner.make()).shape) == (1, 1, points[0].n, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        op_crossing(synthetic_model(), "softmax-causal", NAME, row_dims({"d": 16}), replicates=0)
    messages = {str(w.message) for w in caught if issubclass(w.category, PricingWarning)}
    assert any(f"the {CHUNK} kernel: priced as copy" in m for m in messages), messages


# -- on a GPU with fla-core: the kernels themselves -----------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.skipif(ref.fla_linear_attn()[0] is None, reason="needs fla-core on CUDA")
@pytest.mark.parametrize(("n", "dtype", "tol"), [(256, "fp32", 1e-3), (1000, "bf16", 3e-2)])
def test_flash_linear_attention_runs_on_token_major_views_and_computes_causal_linear_attention(
    n: int, dtype: str, tol: float
) -> None:
    """On CUDA with fla-core: its chunk_linear_attn runs (not the PyTorch form), on [B, T, H, K] storage handed over
    as (b, h, N, d) views, agrees with linear-causal (fla adds 10⁻¹⁰ to the denominator), and the bytes it requests
    are the engine's peak: the states in the activation dtype, the normaliser's tensors, nothing else."""
    from attn_cost.profilers.measure.memory import cuda_peak

    sizes = Sizes(N=n, d=64, h=4, b=2, C=ref.FLA_CHUNK)
    case = build_case(NAME, "core", sizes, dtype, "cuda")
    impl = references.implementation_of(NAME, sizes, "cuda")
    assert impl is not None and impl.native and impl.version.startswith("fla-core ")
    inputs = case.make_inputs()
    assert all(x.transpose(1, 2).is_contiguous() for x in inputs)
    with torch.no_grad():
        y = case.run([x.clone() for x in inputs]).float()
        causal = build_case("linear-causal", "core", sizes, "fp32", "cuda")
        expect = causal.run([x.float().contiguous() for x in inputs])
    assert ((y - expect).abs().max() / expect.abs().max()).item() < tol
    assert cuda_peak(case)["requested"] == derive(NAME).peak(dtype).at(sizes.symbols())[0]
