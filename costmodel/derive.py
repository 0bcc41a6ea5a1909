"""Derive FLOPs, peak memory, memory traffic and parameters from a variant's op list.

Nothing here is specific to a variant: every total is a sum or a maximum over the ops that the
variant's description produced.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property

import sympy as sp
from attn_cost.costmodel.conventions import FULL, Convention, backward_factor
from attn_cost.costmodel.counting import DEFAULT_COUNTING, Counting, causal_factor, causal_graph
from attn_cost.costmodel.dtypes import FLOAT_DTYPES, STORAGE_BYTES, dtype_bytes
from attn_cost.costmodel.graph import Graph, Op, Storage
from attn_cost.costmodel.polyterms import leads_for_large_n, nonneg_when_at_least_one, subtract, terms
from attn_cost.costmodel.symbols import d, d_embed, h

NO_GRADIENT = ("compare", "fill")
"""Op kinds whose result carries no gradient (a mask from a comparison, a fresh buffer)."""

BROADCASTING = ("add", "sub", "mul", "div", "maximum")
"""Element-wise kinds with two operands, either of which may be broadcast."""


def _nbytes(numel: sp.Expr, storage_dtype: str | None, act_dtype: str) -> sp.Expr:
    return numel * (STORAGE_BYTES[storage_dtype] if storage_dtype else dtype_bytes(act_dtype))


@dataclass(frozen=True)
class Step:
    """The live set while one op runs."""

    op: Op
    live: tuple[Storage, ...]
    """Storages alive during the op (its inputs and output included)."""
    copies: dict[int, sp.Expr] = field(default_factory=dict)
    """Storages saved for backward inside a loop exist once per iteration (counted in full from the
    step that makes them: the walk stands for the last iteration)."""
    stand_ins: tuple[tuple[Storage, sp.Expr], ...] = ()
    """Tensors alive in place of a padded copy where the length needs no padding, with the factor 1 − [m ∤ n]
    (`Graph.pad`): they count where the copy is alive and they are not."""
    backward: bool = False
    """A step of the backward walk (the op's gradient being computed), not of the forward pass."""

    @property
    def workspace(self) -> sp.Expr:
        """Scratch in activation elements while the step runs: the op's own forward; a backward step's scratch
        is in its live set (fixed-dtype storages, `backward_scratch`)."""
        return sp.Integer(0) if self.backward else self.op.workspace

    def share(self, s: Storage, dtype: str | None = None) -> sp.Expr:
        """What one live storage counts at this step: its elements (dtype None) or bytes, times its copies."""
        size = s.numel if dtype is None else _nbytes(s.numel, s.dtype, dtype)
        return size * self.copies.get(s.id, 1)

    def elements(self) -> sp.Expr:
        return sp.expand(sp.Add(*(self.share(s) for s in self.live)) + self.standing_in() + self.workspace)

    def nbytes(self, dtype: str) -> sp.Expr:
        live = sp.Add(*(self.share(s, dtype) for s in self.live)) + self.standing_in(dtype)
        return sp.expand(live + self.workspace * dtype_bytes(dtype))

    def standing_in(self, dtype: str | None = None) -> sp.Expr:
        """What the stand-ins of padded copies count at this step (elements, or bytes of `dtype`)."""
        sizes = ((s.numel if dtype is None else _nbytes(s.numel, s.dtype, dtype), f) for s, f in self.stand_ins)
        return sp.Add(*(size * f for size, f in sizes))


def backward_scratch(op: Op, grads: list[bool], ids: Iterator[int]) -> tuple[Storage, ...]:
    """Storages an op's backward allocates besides its input gradients, alive while it runs (`grads`: which of
    its distinct inputs get a gradient).

    Element-wise ops with two operands (PyTorch's derivatives.yaml): an operand broadcast to the output's shape
    gets its gradient made at the output's size, then summed down (one output-sized temporary); a division's
    divisor gradient −grad·(a/b)/b holds a/b and −grad besides their product (two more).

    Fused attention (FlashAttention-1/2's backward, Dao et al. 2022 Alg. 4; flash-attention's mha_bwd): the
    row statistics D = rowsum(dO∘O) (`softmax_d`, fp32, one per query row) and the fp32 accumulator of dQ
    (`dq_tmp` in FlashAttention-1, `dq_accum` in FlashAttention-2), which every key block adds its share into.
    FlashAttention-1 skips the accumulator where all keys fit one block (N ≤ 256 at d = 64); FlashAttention-2 and
    the engine always hold it. PyTorch's CPU kernel keeps these inside the kernel (the tracer does not see them).

    Fused chunk kernels of linear attention (flash-linear-attention's chunk_simple_gla backward): the states
    entering each chunk, recomputed by chunk_fwd_h, and their gradients dS from chunk_bwd_dh, both fp32 (its
    states_in_fp32=True), one d_k×d_v matrix per chunk each, alive while dQ, dK and dV are made; the delta rule's
    backward (chunk_delta_rule_bwd) also makes v_new again (chunk_gated_delta_rule_fwd_h). An op that reads its
    states from other ops (mamba's chunk_scan) has no scratch of its own: the states' gradient is a value's.

    A chunk product its library makes again in backward instead of keeping it (fla's W and U, mamba's chunk states
    and CB: `recompute`): the product, alive while its gradients are made."""
    if op.kind == "linear_chunk":
        if not op.attrs["makes_states"]:
            return ()
        states = op.attrs["also"][0].numel
        made = [Storage(next(ids), states, "fp32", -1, f"{what} ({op.output.name})")
                for what in ("recomputed chunk states", "chunk state gradients")]  # fmt: skip
        if op.attrs["delta"]:
            v_new = op.attrs["also"][1].storage
            made.append(Storage(next(ids), v_new.numel, v_new.dtype, -1, f"recomputed v_new ({op.output.name})"))
        return tuple(made)
    if op.kind == "chunk_matmul" and "backward" in op.attrs:
        out = op.output.storage
        return (Storage(next(ids), out.numel, out.dtype, -1, f"recomputed {out.name}"),)
    if op.kind in BROADCASTING:
        size = op.output.numel
        broadcast = [t for t, g in zip(op.inputs, grads, strict=False) if g and sp.expand(t.numel - size) != 0]
        temps = len(broadcast) + (2 if op.kind == "div" and len(grads) > 1 and grads[-1] else 0)
        return tuple(Storage(next(ids), size, op.output.storage.dtype, -1, f"∂ temporary {k + 1} of {op.label}")
                     for k in range(temps))  # fmt: skip
    if op.kind != "fused_attention":
        return ()
    q = op.inputs[0]
    rows = q.rows
    return (Storage(next(ids), rows, "fp32", -1, f"D({op.output.name})"),
            Storage(next(ids), q.numel, "fp32", -1, f"dQ accumulator ({q.name})"))  # fmt: skip


def nonneg_for_dims_at_least_one(expr: sp.Expr) -> bool:
    """True if expr >= 0 whenever every size in it is >= 1 (sufficient test, see polyterms)."""
    return nonneg_when_at_least_one(terms(sp.sympify(expr)))


def prune_dominated(branches: list[sp.Expr]) -> list[sp.Expr]:
    """Drop branches that another branch bounds from above for every size >= 1, in their order.

    One pass keeps the branches no other bounds so far (bounding is transitive): the work grows with the
    branches times the few that survive, not with the square of the branches (a graph of thousands of ops
    whose live set grows has thousands of distinct totals, each bounding the one before)."""
    front: list[tuple[sp.Expr, dict]] = []
    for e in branches:
        t = terms(e)
        if any(t == u or nonneg_when_at_least_one(subtract(u, t)) for _, u in reversed(front)):
            continue
        front = [(f, u) for f, u in front if not nonneg_when_at_least_one(subtract(t, u))]
        front.append((e, t))
    return [e for e, _ in front]


def dominant_for_large(branches: list[sp.Expr]) -> sp.Expr | None:
    """The branch that is the maximum once N is large enough, if that can be decided."""
    ts = [terms(e) for e in branches]
    for i, cand in enumerate(ts):
        if all(leads_for_large_n(subtract(cand, other)) for j, other in enumerate(ts) if j != i):
            return branches[i]
    return None


@dataclass(frozen=True)
class PeakMemory:
    """Peak live memory: the maximum over the op list of what is alive at each step."""

    steps: tuple[Step, ...]
    unit: str  # "elements" or a dtype name

    def per_step(self) -> list[sp.Expr]:
        """What is alive at each step (elements, or bytes of the unit's dtype), workspace included; in training
        the forward steps, then the backward walk's."""
        return list(self._totals)

    def forward(self) -> list[tuple[Step, sp.Expr]]:
        """The forward steps with what is alive at each (one per op, in order)."""
        return [(s, e) for s, e in zip(self.steps, self._totals, strict=True) if not s.backward]

    @cached_property
    def _totals(self) -> tuple[sp.Expr, ...]:
        """The per-step totals as a running sum: each step adds the storages that start and takes away the ones
        that ended (as `Step.elements` and `Step.nbytes` sum them), so that a graph whose live set grows to
        thousands of storages costs a few terms per step, not its whole live set."""
        dtype = None if self.unit == "elements" else self.unit
        width = 1 if dtype is None else dtype_bytes(dtype)
        out: list[sp.Expr] = []
        running: sp.Expr = sp.Integer(0)
        before: dict[int, sp.Expr] = {}
        for step in self.steps:
            now = {s.id: s for s in step.live}
            gone = [before.pop(i) for i in [i for i in before if i not in now]]
            new = {i: s for i, s in now.items() if i not in before}
            for i, s in new.items():
                before[i] = step.share(s, dtype)
            running = sp.expand(running + sp.Add(*(before[i] for i in new)) - sp.Add(*gone))
            out.append(sp.expand(running + step.standing_in(dtype) + step.workspace * width))
        return tuple(out)

    @cached_property
    def branches(self) -> list[sp.Expr]:
        """Distinct per-step totals that can be the maximum for some sizes."""
        return prune_dominated(self.per_step())

    @property
    def expr(self) -> sp.Expr:
        return sp.Max(*self.branches) if len(self.branches) > 1 else self.branches[0]

    @cached_property
    def dominant(self) -> sp.Expr | None:
        """The branch that attains the peak for large N (the papers' 'entries')."""
        return dominant_for_large(self.branches)

    def dominant_step(self) -> Step | None:
        dom = self.dominant
        if dom is None:
            return None
        return next(s for s, e in zip(self.steps, self.per_step(), strict=True) if sp.expand(e - dom) == 0)

    def at(self, values: dict[sp.Symbol, int]) -> tuple[sp.Expr, Step]:
        """The peak and the step that attains it, for concrete sizes."""
        totals = [sp.sympify(e).xreplace(values) for e in self.per_step()]
        best = max(range(len(totals)), key=lambda i: (totals[i], -i))
        return totals[best], self.steps[best]


class Derived:
    """Everything the engine derives from one variant's graph."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.steps = tuple(self._walk())

    @property
    def name(self) -> str:
        return self.graph.name

    @property
    def ops(self) -> list[Op]:
        return self.graph.ops

    def _passes(self, op: Op) -> sp.Expr:
        """How many times an op's cost is paid: its loop repeats, times forward + backward in training."""
        return op.repeat * (1 + backward_factor(op)) if self.graph.training else op.repeat

    @cached_property
    def causal(self) -> bool:
        """The graph masks its scores causally (its score ops carry the factor F_causal)."""
        return causal_graph(self.ops)

    def op_flops(self, op: Op, convention: Convention, counting: Counting | None = DEFAULT_COUNTING) -> sp.Expr:
        """FLOPs of one op of this graph, loops and backward included; counting=None keeps F_causal, F_bwd."""
        once = convention.op_flops(op) + (convention.backward(op) if self.graph.training else 0)
        expr = once * op.repeat * causal_factor(op, self.causal)
        return counting.apply(expr) if counting is not None else sp.expand(expr)

    def flops(self, convention: Convention, counting: Counting | None = DEFAULT_COUNTING) -> sp.Expr:
        """Total FLOPs under a convention and counting rules (None: the named factors stay symbols)."""
        total = sp.Add(*(self.op_flops(op, convention, None) for op in self.ops))
        return counting.apply(total) if counting is not None else sp.expand(total)

    def left_out(self, convention: Convention, counting: Counting | None = DEFAULT_COUNTING) -> sp.Expr:
        """FLOPs that `full` counts and this convention does not."""
        total = sp.Add(*(self.op_flops(op, FULL, None) - self.op_flops(op, convention, None) for op in self.ops))
        return counting.apply(total) if counting is not None else sp.expand(total)

    def peak(self, unit: str = "elements") -> PeakMemory:
        """Peak live memory in elements, or in bytes for a dtype name: in training, the maximum over the forward
        walk and the backward walk (`backward_steps`)."""
        if unit != "elements":
            dtype_bytes(unit)
        return PeakMemory(self.steps + self.backward_steps if self.graph.training else self.steps, unit)

    def traffic(self, dtype: str = "fp32", counting: Counting = DEFAULT_COUNTING) -> sp.Expr:
        """Bytes read plus bytes written when every op runs as its own kernel (backward passes as `counting` says)."""
        return counting.apply(sp.Add(*(self.op_traffic(op, dtype) * self._passes(op) for op in self.ops)))

    def op_traffic(self, op: Op, dtype: str) -> sp.Expr:
        """Bytes one run of an op reads and writes."""
        read = op.inputs[1:] if op.attrs.get("overwrite") else op.inputs
        once = op.attrs.get("read_once", ())  # overlapping windows of one storage: each element read once
        again = op.attrs.get("reread", ())  # what a second kernel of the op reads again (a chunk op's K, V, states)
        reads = sum(
            (_nbytes(t.storage.numel if t in once else t.numel, t.storage.dtype, dtype) for t in (*read, *again)),
            sp.Integer(0),
        )
        writes = sum((_nbytes(t.numel, t.storage.dtype, dtype) for t in (op.output, *op.attrs.get("also", ()))),
                     sp.Integer(0))  # fmt: skip
        return reads + writes + 2 * op.workspace * dtype_bytes(dtype)

    @cached_property
    def params(self) -> sp.Expr:
        """Number of learned parameters the variant owns."""
        return sp.expand(sum((t.numel * copies for t, copies in self.graph.params), sp.Integer(0)))

    def _walk(self) -> list[Step]:
        g = self.graph
        end = len(g.ops)
        span = self._loop_spans()
        storages: dict[int, Storage] = {}
        last_use: dict[int, int] = {}
        copies: dict[int, sp.Expr] = {}
        saved: set[int] = set()
        for t in g.inputs:
            storages[t.storage.id] = t.storage
            last_use[t.storage.id] = -1
        for op in g.ops:
            for t in (*op.inputs, *op.attrs.get("holds", ())):  # holds: alive through the op, not read by it
                last_use[t.storage.id] = max(last_use.get(t.storage.id, -1), self._reach(op, t.storage, span))
            for t in (op.output, *op.attrs.get("also", ())):  # also: results besides the output (a log-sum-exp)
                storages.setdefault(t.storage.id, t.storage)
                last_use[t.storage.id] = max(last_use.get(t.storage.id, op.index), op.index)
            for t in op.attrs.get("saved", ()):
                storages.setdefault(t.storage.id, t.storage)  # a clone of an overwritten input starts here
                saved.add(t.storage.id)
                if t.storage.producer >= 0:
                    copies[t.storage.id] = g.ops[t.storage.producer].repeat
        leaves = {t.storage.id for t in g.inputs} if g.training else set()  # the caller holds them for their grads
        for sid in g.kept | saved | leaves:
            last_use[sid] = end
        # a storage is live from its producer (an input: from the first op) to its last use; one sweep over the
        # ops, adding and dropping storages as they start and end, keeps this linear in the ops
        order = {sid: i for i, sid in enumerate(storages)}
        starts: dict[int, list[int]] = {}
        ends: dict[int, list[int]] = {}
        for sid, s in storages.items():
            if last_use[sid] >= max(s.producer, 0):
                starts.setdefault(max(s.producer, 0), []).append(sid)
                ends.setdefault(last_use[sid], []).append(sid)
        active: dict[int, Storage] = {}
        steps = []
        for op in g.ops:
            for sid in starts.get(op.index, ()):
                active[sid] = storages[sid]
            live = tuple(sorted(active.values(), key=lambda s: order[s.id]))
            ids = set(active)
            stand_ins = {s.stands_for.id: (s.stands_for, 1 - s.when) for s in live
                         if s.stands_for is not None and s.stands_for.id not in ids}  # fmt: skip
            live_copies = {s.id: copies[s.id] for s in live if s.id in copies}
            steps.append(Step(op, live, live_copies, tuple(stand_ins.values())))
            for sid in ends.get(op.index, ()):
                del active[sid]
        return steps

    def _reach(self, op: Op, s: Storage, span: dict[int, tuple[int, int]]) -> int:
        """The last op index for which op's read of storage s keeps it needed: the op itself, or the end of every
        loop around it that s was made outside of (and does not enter as the carried value)."""
        reach = op.index
        for lp in self._loops_of(op.index):
            first, last = span[lp]
            if s.producer < first and s.id not in self.graph.loops[lp].carried:
                reach = max(reach, last)
        return reach

    @cached_property
    def backward_steps(self) -> tuple[Step, ...]:
        """The backward walk of a training graph: one step per op, in reverse, each the live set while autograd
        computes that op's input gradients. The rules (PyTorch's autograd, what the tracer sees):

        - held throughout: the graph's inputs (leaves the caller holds), its outputs and kept tensors, and dO, the
          gradient of each output (the caller's);
        - a saved tensor (`SAVES`, with its loop copies) is alive until the backward of the first op that saves it
          has run, then freed;
        - a value (a storage as one op wrote it: an in-place op makes a new value) that needs a gradient gets it
          at the backward of its last reader (a reader in a loop it was made outside of: the loop's last op) and
          keeps it until the backward of the op that wrote it (a graph input's: to the end, its .grad);
          each further reader's contribution is a new tensor of the value's size while its backward runs (then
          added in); a value needs a gradient if it is a float input, or an op wrote it from one that does
          (`compare` makes a bool mask; fixed-dtype results and row statistics need none);
        - weights are frozen: their gradients, like the weights, are not activations;
        - fused attention's backward (FlashAttention) also holds its row statistics D = rowsum(dO∘O) and an fp32
          accumulator for dQ, both fp32 (`backward_scratch`).
        """
        g = self.graph
        end = len(g.ops)
        span = self._loop_spans()
        ids = itertools.count(-2, -1)
        # values: (storage id, index of the op that wrote it, -1 for an input)
        version: dict[int, int] = {t.storage.id: -1 for t in g.inputs}
        reads: list[list[tuple[int, int]]] = []
        floats = {t.storage.id for t in g.inputs if t.storage.dtype in FLOAT_DTYPES}
        needs: set[tuple[int, int]] = {(sid, -1) for sid in floats}
        first_save: dict[int, int] = {}
        storages: dict[int, Storage] = {t.storage.id: t.storage for t in g.inputs}
        for op in g.ops:
            seen: list[tuple[int, int]] = []
            for t in op.inputs:
                v = (t.storage.id, version.get(t.storage.id, t.storage.producer))
                if v not in seen:
                    seen.append(v)
            reads.append(seen)
            out = op.output.storage
            storages.setdefault(out.id, out)
            version[out.id] = op.index
            if out.dtype in FLOAT_DTYPES and op.kind not in NO_GRADIENT and any(v in needs for v in seen):
                needs.add((out.id, op.index))
            for t in op.attrs.get("saved", ()):
                storages.setdefault(t.storage.id, t.storage)
                first_save[t.storage.id] = min(first_save.get(t.storage.id, end), op.index)
        # the gradient of each value: born at the backward of its last reader, freed after its writer's
        outs = {(o.storage.id, version[o.storage.id]) for o in g.outputs} & needs
        born: dict[tuple[int, int], int] = dict.fromkeys(outs, end)
        for op in reversed(g.ops):
            if (op.output.storage.id, op.index) not in born:
                continue
            for sid, w in reads[op.index]:
                if (sid, w) in needs:
                    born[(sid, w)] = max(born.get((sid, w), -1), self._reach(op, storages[sid], span))
        grads = {v: Storage(next(ids), storages[v[0]].numel, storages[v[0]].dtype, -1, f"∂{storages[v[0]].name}")
                 for v in born}  # fmt: skip
        held = [storages[sid] for sid in dict.fromkeys([*(t.storage.id for t in g.inputs), *sorted(g.kept)])]
        copies = {sid: g.ops[storages[sid].producer].repeat for sid in first_save if storages[sid].producer >= 0}
        steps = []
        for op in reversed(g.ops):
            i = op.index
            live = {s.id: s for s in held}
            live.update({sid: storages[sid] for sid, first in first_save.items() if first <= i})
            live.update({gs.id: gs for v, gs in grads.items() if (v[1] <= i or v in outs) and i <= born[v]})
            if (op.output.storage.id, i) in born:
                for v in reads[i]:
                    if v in born and born[v] > i:  # a further reader's contribution, added in after
                        extra = grads[v]
                        part = Storage(next(ids), extra.numel, extra.dtype, -1, f"{extra.name} (contribution)")
                        live[part.id] = part
                for s in backward_scratch(op, [v in born for v in reads[i]], ids):
                    live[s.id] = s
                if op.kind in BROADCASTING:  # a broadcast operand's gradient exists once its temporary is summed
                    for v in reads[i]:
                        if born.get(v) == i and sp.expand(storages[v[0]].numel - op.output.numel) != 0:
                            live.pop(grads[v].id)
            stand_ins = {s.stands_for.id: (s.stands_for, 1 - s.when) for s in live.values()
                         if s.stands_for is not None and s.stands_for.id not in live}  # fmt: skip
            shown = tuple(live.values())
            steps.append(Step(op, shown, {k: c for k, c in copies.items() if k in live}, tuple(stand_ins.values()),
                              backward=True))  # fmt: skip
        return tuple(steps)

    def _loop_spans(self) -> dict[int, tuple[int, int]]:
        """First and last op index of every loop (nested loops included in their parents)."""
        span: dict[int, tuple[int, int]] = {}
        for op in self.ops:
            for lp in self._loops_of(op.index):
                first, last = span.get(lp, (op.index, op.index))
                span[lp] = (min(first, op.index), max(last, op.index))
        return span

    def _loops_of(self, index: int) -> list[int]:
        """The loops around op `index`, innermost first."""
        out = []
        lp = self.ops[index].loop
        while lp is not None:
            out.append(lp)
            lp = self.graph.loops[lp].parent
        return out


def multihead(expr: sp.Expr) -> sp.Expr:
    """Rewrite a per-head-dimension formula in terms of the embedding width: d = d_embed / h."""

    return sp.expand(expr.xreplace({d: d_embed / h}))
