"""The op-graph IR: a variant is a short list of tensor ops over symbolic shapes.

A `Graph` is written once per variant, in the order of the paper's algorithm box. Every op
records its kind, its inputs, the tensor it produces and the scratch memory it needs while it
runs. Nothing here knows about costs: FLOPs come from a convention's rule table
(`conventions.py`), memory and traffic from a walk over the op list (`derive.py`).

Memory model (what a tensor costs, and for how long):
- an op's output is a new allocation unless the op is in place or the tensor is a view;
- a storage is freed after the last op that reads it, unless it is a graph output or marked
  kept (saved for backward); inputs are owned by the graph and freed the same way;
- `workspace` is scratch that lives only while its op runs (e.g. the row sums of a normalisation).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import sympy as sp
from attn_cost.costmodel.counting import N_kv
from attn_cost.costmodel.errors import ModelError, unknown
from attn_cost.costmodel.opkinds import KINDS, SAVES
from attn_cost.costmodel.symbols import N, Pads, padded

Shape = tuple[sp.Expr, ...]
ONE = sp.Integer(1)


def _prod(shape: Shape) -> sp.Expr:
    return sp.Mul(*shape) if shape else sp.Integer(1)


def _same(x: sp.Expr, y: sp.Expr) -> bool:
    return sp.expand(x - y) == 0


@dataclass(eq=False)
class Storage:
    """One allocation. Several tensors (views, in-place results) may share it."""

    id: int
    numel: sp.Expr
    dtype: str | None
    """None: the activation dtype chosen at evaluation time; otherwise a fixed dtype name."""
    producer: int
    """Index of the op that allocates it; -1 for graph inputs."""
    name: str
    stands_for: Storage | None = None
    """A padded copy (`Graph.pad`) that exists only where the length is not already a multiple: there its
    numel carries the bracket [m ∤ n]; elsewhere the code uses the tensor it pads (this storage), which the
    walk keeps alive wherever the copy would be."""
    when: sp.Expr = ONE
    """The bracket [m ∤ n] of a padded copy (1 for every other storage)."""


@dataclass(frozen=True, eq=False)
class Tensor:
    """A symbolic tensor: a name, a shape and the storage it lives in."""

    name: str
    shape: Shape
    storage: Storage
    transposed: bool = False
    """A view whose last two dimensions are swapped against its storage's layout (`.T`, a transpose or permute
    of the last two axes): what makes a product `matmul-NT` rather than `matmul-NN`, read as data, never from
    the name."""

    @property
    def numel(self) -> sp.Expr:
        return _prod(self.shape)

    @property
    def rows(self) -> sp.Expr:
        """Number of rows when the last dimension is read as a vector."""
        return _prod(self.shape[:-1])

    @property
    def T(self) -> Tensor:  # noqa: N802 - mirrors the maths
        """Transposed view of the last two dimensions (no copy); transposing it again gives the plain layout."""
        shape = (*self.shape[:-2], self.shape[-1], self.shape[-2])
        name = self.name[:-1] if self.transposed and self.name.endswith("ᵀ") else f"{self.name}ᵀ"
        return Tensor(name, shape, self.storage, not self.transposed)

    def swap(self, i: int, j: int) -> Tensor:
        """View with dimensions i and j exchanged (no copy); exchanging the last two transposes it."""
        shape = list(self.shape)
        shape[i], shape[j] = shape[j], shape[i]
        n = len(shape)
        last_two = i % n != j % n and {i % n, j % n} == {n - 2, n - 1}
        return Tensor(self.name, tuple(shape), self.storage, self.transposed != last_two)

    def select(self, axis: int, name: str | None = None) -> Tensor:
        """View of one index along `axis` (the axis disappears): the token t of a loop over N."""
        shape = tuple(s for k, s in enumerate(self.shape) if k != axis % len(self.shape))
        return Tensor(name or f"{self.name}ₜ", shape, self.storage)

    def cols(self, start: int, stop: int | None = None) -> Tensor:
        """View of columns [start, stop) of the last dimension (no copy)."""
        last = self.shape[-1]
        width = (stop if stop is not None else last) - start
        label = f"{self.name}[:, {start}:{'' if stop is None else stop}]"
        return Tensor(label, (*self.shape[:-1], sp.sympify(width)), self.storage)

    def narrow(self, axis: int, length: sp.Expr, name: str | None = None) -> Tensor:
        """View of the first `length` entries along `axis` (no copy): the unpadded rows of a padded result."""
        shape = list(self.shape)
        shape[axis] = sp.sympify(length)
        return Tensor(name or self.name, tuple(shape), self.storage, self.transposed)

    def view(self, *shape: sp.Expr | int, name: str | None = None) -> Tensor:
        """Reshape without copying; the element count must not change."""
        new = tuple(sp.sympify(s) for s in shape)
        if not _same(_prod(new), self.numel):
            raise ModelError(f"cannot view {self.name}{self.shape} as {new}")
        return Tensor(name or self.name, new, self.storage)


@dataclass(frozen=True)
class Loop:
    """A loop around part of the op list."""

    index: int
    count: sp.Expr
    label: str
    parent: int | None
    carried: frozenset[int] = frozenset()
    """Storages that enter as the loop's running value (the residual stream): each iteration
    reads the previous one's result, so the loop does not hold them for its whole length."""


@dataclass(eq=False)
class Op:
    """One step of a variant: what it computes, from what, into what."""

    index: int
    kind: str
    inputs: tuple[Tensor, ...]
    output: Tensor
    inplace: bool
    workspace: sp.Expr
    attrs: dict[str, Any]
    label: str
    repeat: sp.Expr = ONE
    """How many times the op runs: the product of the counts of the loops around it."""
    loop: int | None = None
    """Index of the innermost loop the op belongs to (None outside loops)."""

    @property
    def out_numel(self) -> sp.Expr:
        return self.output.numel

    def in_numel(self, i: int = 0) -> sp.Expr:
        return self.inputs[i].numel


@dataclass
class Graph:
    """Builder for a variant's op list. Methods return the tensors they produce."""

    name: str
    ops: list[Op] = field(default_factory=list)
    inputs: list[Tensor] = field(default_factory=list)
    params: list[tuple[Tensor, sp.Expr]] = field(default_factory=list)
    """Weights and how many copies exist (a weight inside the layer loop exists once per layer)."""
    outputs: list[Tensor] = field(default_factory=list)
    kept: set[int] = field(default_factory=set)
    loops: list[Loop] = field(default_factory=list)
    training: bool = False
    """Build for training: tensors that backward needs are kept (see `conventions.SAVES`)."""
    dropout: sp.Expr | None = None
    """Attention dropout probability p (`--dropout`): `attention_dropout` and `sdpa` apply it in training."""
    key_padding_mask: bool = False
    """Build with a key padding mask (`--padding-mask`): `key_padding` makes it, the variants' ops read it."""
    feature_map: str = "elu1"
    """The feature map φ of a linear attention (`--feature-map`, `counting.FEATURE_MAPS`): `feature` applies it."""
    normalize: bool = True
    """Whether a linear attention divides by its normaliser (`--normalize`): the variants ask `normalising`."""
    applied: set[str] = field(default_factory=set)
    """The options above the variant's ops took ("dropout", "padding", "feature_map", "normalize"): a variant without
    attention probabilities (linear attention) takes no dropout, one without a feature map (softmax) no φ, and the
    command says so."""
    _ids: Any = field(default_factory=itertools.count)
    _open: list[Loop] = field(default_factory=list)
    _mask: Tensor | None = None

    @contextmanager
    def loop(self, count: sp.Expr | int, label: str, carried: tuple[Tensor, ...] = ()) -> Iterator[Loop]:
        """Ops written inside run `count` times (tokens of a recurrence, layers of an encoder).

        Memory is walked over one iteration: a tensor from outside that the body reads stays
        alive for the whole loop (unless it is `carried`: the running value the first iteration
        starts from); a tensor made inside is freed within the iteration unless it is the loop's
        result or kept.
        """
        parent = self._open[-1].index if self._open else None
        lp = Loop(len(self.loops), sp.sympify(count), label, parent, frozenset(t.storage.id for t in carried))
        self.loops.append(lp)
        self._open.append(lp)
        try:
            yield lp
        finally:
            self._open.pop()

    def _repeat(self) -> sp.Expr:
        return sp.Mul(*(lp.count for lp in self._open)) if self._open else sp.Integer(1)

    # -- tensors that are not produced by an op -------------------------------------------

    def input(self, name: str, *shape: sp.Expr | int, dtype: str | None = None) -> Tensor:
        """An activation handed to the variant (owned by it: freed after its last use)."""
        t = self._new(name, shape, producer=-1, dtype=dtype)
        self.inputs.append(t)
        return t

    def param(self, name: str, *shape: sp.Expr | int) -> Tensor:
        """A learned weight: counted in parameters, never in the activation live set."""
        t = Tensor(name, tuple(sp.sympify(s) for s in shape), Storage(-1, sp.Integer(0), None, -1, name))
        self.params.append((t, self._repeat()))
        return t

    def output(self, *tensors: Tensor) -> None:
        """Mark results: they stay live to the end of the graph."""
        self.outputs.extend(tensors)
        self.kept.update(t.storage.id for t in tensors)

    def keep(self, *tensors: Tensor) -> None:
        """Keep tensors alive to the end (saved for backward)."""
        self.kept.update(t.storage.id for t in tensors)

    # -- ops ---------------------------------------------------------------------------------

    def matmul(
        self,
        name: str,
        a: Tensor,
        b: Tensor,
        *,
        into: Tensor | None = None,
        gain: str | None = None,
        label: str = "",
    ) -> Tensor:
        """a @ b over broadcast batch dims; `into` accumulates in place (out += gain·a@b)."""
        *ba, m, k = a.shape
        *bb, k2, n = b.shape
        if not _same(k, k2):
            raise ModelError(f"{self.name}: matmul {a.name}{a.shape} @ {b.name}{b.shape}: inner dims differ")
        shape = (*self._broadcast(tuple(ba), tuple(bb)), m, n)
        attrs = {"m": m, "k": k, "n": n, "batch": _prod(shape[:-2]), "gain": gain, "accumulate": into is not None}
        default = f"{name} ← {a.name}·{b.name}"
        if into is not None:
            if not all(_same(x, y) for x, y in zip(into.shape, shape, strict=True)):
                raise ModelError(f"{self.name}: cannot accumulate {shape} into {into.name}{into.shape}")
            default = f"{name} ← {name} + {gain + '·' if gain else ''}{a.name}·{b.name}"
            return self._inplace("matmul", name, into, (a, b), attrs, label or default)
        return self._emit("matmul", name, shape, (a, b), attrs=attrs, label=label or default)

    def linear(self, name: str, x: Tensor, w: Tensor, bias: Tensor | None = None, *, label: str = "") -> Tensor:
        """x @ w (+ bias): a projection whose weights are parameters."""
        *bx, k = x.shape
        k2, n = w.shape
        if not _same(k, k2):
            raise ModelError(f"{self.name}: linear {x.name}{x.shape} @ {w.name}{w.shape}: inner dims differ")
        attrs = {"m": _prod(tuple(bx)), "k": k, "n": n, "batch": sp.Integer(1), "bias": bias is not None}
        return self._emit("linear", name, (*bx, n), (x,), attrs=attrs, label=label or f"{name} ← {x.name}·{w.name}")

    def outer(self, name: str, a: Tensor, b: Tensor, *, label: str = "") -> Tensor:
        """Row-wise tensor product a ⊠ b: row n is vec(a_n ⊗ b_n)."""
        shape = (*a.shape[:-1], a.shape[-1] * b.shape[-1])
        return self._emit("outer", name, shape, (a, b), label=label or f"{name} ← {a.name}⊠{b.name}")

    def map(
        self,
        kind: str,
        name: str,
        x: Tensor,
        *,
        inplace: bool = False,
        workspace: sp.Expr | int = 0,
        gain: str | None = None,
        label: str = "",
        dtype: str | None = None,
        **attrs: Any,
    ) -> Tensor:
        """An element-wise (or row-wise) op that keeps the shape: poly2, softmax, exp, scale, ...; `dtype`: a result
        of a fixed dtype (a kernel that writes fp32 whatever its input's, as a gate's cumulative sum)."""
        attrs["gain"] = gain
        lbl = label or f"{name} ← {kind}({x.name})"
        workspace = workspace or (_ROW_SCRATCH[kind](x) if kind in _ROW_SCRATCH else 0)
        if inplace:
            return self._inplace(kind, name, x, (), attrs, lbl, workspace=workspace)
        return self._emit(kind, name, x.shape, (x,), attrs=attrs, workspace=workspace, label=lbl, dtype=dtype)

    def binary(
        self,
        kind: str,
        name: str,
        a: Tensor,
        b: Tensor,
        *,
        inplace: bool = False,
        gain: str | None = None,
        label: str = "",
    ) -> Tensor:
        """Broadcast element-wise a (op) b: add, mul, div. In place writes into a."""
        shape = self._broadcast(a.shape, b.shape)
        attrs = {"gain": gain}
        lbl = label or f"{name} ← {a.name} {_SYMBOL.get(kind, kind)} {b.name}"
        if inplace:
            if not all(_same(x, y) for x, y in zip(a.shape, shape, strict=True)):
                raise ModelError(f"{self.name}: in-place {kind} would change the shape of {a.name}")
            return self._inplace(kind, name, a, (b,), attrs, lbl)
        return self._emit(kind, name, shape, (a, b), attrs=attrs, label=lbl)

    def reduce(self, kind: str, name: str, x: Tensor, axis: int, *, gain: str | None = None, label: str = "") -> Tensor:
        """Reduce over one axis (kept as size 1): sum."""
        shape = list(x.shape)
        shape[axis] = sp.Integer(1)
        return self._emit(
            kind,
            name,
            tuple(shape),
            (x,),
            attrs={"gain": gain, "axis": axis},
            label=label or f"{name} ← {kind}({x.name})",
        )

    def augment(self, name: str, x: Tensor, *, gain: str | None = None, label: str = "") -> Tensor:
        """[c·1, x]: prepend a constant column (TaylorShift's V ← [1, V])."""
        shape = (*x.shape[:-1], x.shape[-1] + 1)
        return self._emit("augment", name, shape, (x,), attrs={"gain": gain}, label=label or f"{name} ← [1, {x.name}]")

    def copy(self, name: str, x: Tensor, *, label: str = "") -> Tensor:
        """Materialise a view as a new contiguous tensor."""
        return self._emit("copy", name, x.shape, (x,), label=label or f"{name} ← contiguous({x.name})")

    def pad(
        self, name: str, x: Tensor, axis: int, multiple: sp.Expr | int, *, holds: tuple[Tensor, ...] = (),
        label: str = "",
    ) -> Tensor:  # fmt: skip
        """x with zero rows appended along `axis` up to a multiple of `multiple` (m·⌈n/m⌉ rows), as code that
        pads to whole chunks does: a new tensor where n is not a multiple of m (the op runs [m ∤ n] times and
        its storage holds [m ∤ n]·m⌈n/m⌉ rows), x itself where it is (the walk then keeps x alive in its place).
        `holds`: tensors the code keeps alive through the padding (a tuple of the originals)."""
        n, m = x.shape[axis], _multiple(multiple, f"{self.name}: pad {x.name}")
        when = Pads(n, m)
        shape = list(x.shape)
        shape[axis] = padded(n, m)
        label = label or f"{name} ← pad({x.name}) to a multiple of {m}"
        out = self._emit("copy", name, tuple(shape), (x,), label=label)
        self.padding(out, x, when)
        if holds:
            self.ops[-1].attrs["holds"] = list(holds)
        return out

    def padding(self, out: Tensor, x: Tensor, when: sp.Expr) -> None:
        """`out` holds x padded: the op that made it and the last op (which wrote x into it, where that is
        another op) run only where `when` (a bracket [m ∤ n], 0 or 1) is 1: their cost and its storage carry
        the bracket, and where it is 0 the code goes on with x itself, which the walk then keeps alive wherever
        `out` is."""
        out.storage.numel = when * out.storage.numel
        out.storage.stands_for, out.storage.when = x.storage, when
        for i in {out.storage.producer, len(self.ops) - 1}:
            self.ops[i].repeat = self.ops[i].repeat * when

    def store(self, target: Tensor, x: Tensor, *, label: str = "") -> Tensor:
        """Write x into a view of an existing tensor (e.g. row t of the output)."""
        if not _same(target.numel, x.numel):
            raise ModelError(f"{self.name}: cannot store {x.name}{x.shape} into {target.name}{target.shape}")
        return self._inplace(
            "copy", target.name, target, (x,), {"overwrite": True}, label or f"{target.name} ← {x.name}"
        )

    def zeros(self, name: str, *shape: sp.Expr | int, label: str = "") -> Tensor:
        """A new tensor filled with zeros or left empty to be written (an accumulator, an output buffer)."""
        return self._emit("fill", name, shape, (), label=label or f"{name} ← 0")

    # -- attention dropout and a key padding mask (--dropout, --padding-mask) ---------------------------------------

    def key_padding(self, batch: sp.Expr, keys: sp.Expr) -> Tensor | None:
        """The key padding mask where the graph is built with one (None otherwise): an input of batch×keys booleans,
        True for a real token, made on first use. It is what flash-attention's benchmark passes its reference
        attention (attn_mask, (batch, seqlen) bool) and, True for padding, what PyTorch's MultiheadAttention takes
        (key_padding_mask, (N, S) bool); one byte per key, broadcast over heads and queries by a view."""
        if not self.key_padding_mask:
            return None
        if self._mask is None:
            self._mask = self.input("mask", batch, keys, dtype="bool")
        self.applied.add("padding")
        return self._mask

    def pad_scores(self, S: Tensor) -> Tensor:
        """Materialised scores with the padded keys' columns set to −∞ where the graph has a padding mask, as
        flash-attention's reference attention does: `S.masked_fill_(~mask[:, None, None, :], -inf)`, the inverted
        mask a b×N bool tensor (kept for backward, which zeroes the same entries of the gradient), the fill in
        place. S itself without a mask."""
        mask = self.key_padding(S.shape[0], S.shape[-1])
        if mask is None:
            return S
        inverted = self.traced("compare", "¬mask", mask.shape, (mask,), attrs={"gain": None, "backward": sp.Integer(0)},
                               label="¬mask ← padded keys", dtype="bool")  # fmt: skip
        out = self.traced("mask", S.name, S.shape, (inverted,), into=S, attrs={"gain": None, "padding": True},
                          label=f"{S.name} ← −∞ at padded keys")  # fmt: skip
        if self.training:
            self.ops[-1].attrs["saved"].append(inverted)  # masked_fill's backward zeroes the same entries
        return out

    def zero_padded(self, x: Tensor) -> Tensor:
        """x (keys or values, b×h×N×d) with the rows of padded tokens zeroed, x ⊙ mask, where the graph has a
        padding mask: for a variant that mixes the keys along the sequence before any score sees them (Linformer's
        E·K and F·V, as the Nyströmformer authors' Linformer multiplies K and V by the mask). Only x has a
        gradient (backward: one product per element)."""
        mask = self.key_padding(x.shape[0], x.shape[-2])
        if mask is None:
            return x
        return self.traced("mul", x.name, x.shape, (x, mask), attrs={"gain": None, "backward": sp.Integer(1)},
                           label=f"{x.name} ← {x.name} ⊙ mask (padded rows zeroed)")  # fmt: skip

    def padding_bias(self, k: Tensor) -> Tensor | None:
        """The additive mask a fused kernel reads for keys k (batch×heads×keys×d) where the graph has a padding
        mask: SDPA converts a bool attn_mask to one of the activation dtype, where(mask, 0, −∞), batch×keys elements
        (then broadcast by a view)."""
        mask = self.key_padding(k.shape[0], k.shape[-2])
        if mask is None:
            return None
        return self.traced("mask", "bias", mask.shape, (mask,), attrs={"gain": None, "padding": True},
                           label="bias ← where(mask, 0, −∞) (SDPA's bool attn_mask, converted)")  # fmt: skip

    # -- a linear attention's feature map and normaliser (--feature-map, --normalize) -------------------------------

    def feature(self, name: str, x: Tensor) -> Tensor:
        """φ(x), the feature map the graph is built with (`feature_map`): elu + 1 (`elu1`: F.elu then + 1, two
        element-wise kernels), relu (one element-wise op), or the identity (no op: x itself)."""
        self.applied.add("feature_map")
        if self.feature_map == "identity":
            return x
        if self.feature_map == "relu":
            return self.map("pointwise", name, x, label=f"{name} ← relu({x.name})")
        return self.map("elu1", name, x, label=f"{name} ← elu({x.name}) + 1")

    def normalising(self) -> bool:
        """Whether the linear attention being written divides by its normaliser φ(q)·Σφ(k) (`normalize`)."""
        self.applied.add("normalize")
        return self.normalize

    def attention_dropout(self, P: Tensor) -> Tensor:
        """Attention probabilities with dropout where the graph is built with it, in training (in inference a
        model's dropout returns its input: P itself). As PyTorch's native_dropout (what F.dropout runs on a GPU):
        a keep mask, one bool per probability, from a uniform draw compared with 1 − p (kept for backward), and
        P ⊙ M/(1 − p) (its backward, dP ⊙ M/(1 − p), one product and the scale per element; the draw is not redone).
        The counts are those of any p: every probability is drawn for."""
        if self.dropout is None or not self.training:
            return P
        self.applied.add("dropout")
        keep = self.traced("compare", f"M({P.name})", P.shape, (), attrs={"gain": None, "backward": sp.Integer(0)},
                           label=f"M ← uniform draw < 1 − p (keep mask of {P.name})", dtype="bool")  # fmt: skip
        return self.traced("mul", P.name, P.shape, (P, keep), attrs={"gain": "1/(1−p)", "backward": sp.Integer(1)},
                           label=f"{P.name} ← {P.name} ⊙ M/(1 − p) (dropout)")  # fmt: skip

    def sdpa(self, name: str, q: Tensor, k: Tensor, v: Tensor, *, causal: bool = False, label: str = "") -> Tensor:
        """F.scaled_dot_product_attention as a fused variant calls it, with the options the graph is built with:
        the key padding mask as its attn_mask (`padding_bias`) and dropout_p in training (the kernel draws each
        probability's keep bit from a counter-based generator, Philox, and draws it again in backward: no mask in
        memory, the draw's arithmetic per score). With is_causal PyTorch takes no attn_mask: code that pads a causal
        fused kernel unpads the batch (flash_attn_varlen_func) or builds a combined N×N mask, neither modelled
        here, so a causal call takes no padding mask."""
        bias = None if causal else self.padding_bias(k)
        drop = self.dropout is not None and self.training
        if drop:
            self.applied.add("dropout")
        out = self.fused_attention(name, q, k, v, causal=causal, mask=bias, dropout=drop, label=label)
        if bias is not None:  # the bool mask is the call's argument (converted inside it): alive through the call
            self.ops[-1].attrs["holds"] = [self._mask]
        return out

    def fused_attention(
        self,
        name: str,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        *,
        causal: bool = False,
        mask: Tensor | None = None,
        dropout: bool = False,
        label: str = "",
    ) -> Tensor:
        """softmax(q kᵀ/√d) v without materialising the N×N matrix; also writes the row log-sum-exp (fp32).
        A `mask` (an additive attn_mask, traced code's or `padding_bias`) is read by the kernel, added to every
        score, and kept for backward; `dropout`: the kernel drops probabilities (`sdpa`)."""
        *bq, nq, dq = q.shape
        nk = k.shape[-2]
        dv = v.shape[-1]
        shape = (*bq, nq, dv)
        attrs = {"batch": _prod(tuple(bq)), "nq": nq, "nk": nk, "dqk": dq, "dv": dv, "causal": causal,
                 "masked": mask is not None, "dropout": dropout}  # fmt: skip
        out = self._emit(
            "fused_attention",
            name,
            shape,
            (q, k, v) if mask is None else (q, k, v, mask),
            attrs=attrs,
            label=label or f"{name} ← SDPA({q.name}, {k.name}, {v.name})",
        )
        lse = self._new(f"lse({name})", (*bq, nq), producer=len(self.ops) - 1, dtype="fp32")
        self.ops[-1].attrs["lse"] = lse
        self.ops[-1].attrs["also"] = [lse]
        if self.training:
            self.ops[-1].attrs["saved"].append(lse)  # backward needs the row log-sum-exp
        return out

    def linear_chunk(
        self,
        name: str,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        *,
        chunk: sp.Expr | int,
        gate: str = "none",
        gates: tuple[Tensor, ...] = (),
        w: Tensor | None = None,
        states: Tensor | None = None,
        scores: Tensor | None = None,
        states_dtype: str | None = None,
        skip: bool = False,
        gain: str | None = None,
        saves: tuple[Tensor, ...] | None = None,
        label: str = "",
    ) -> Tensor:
        """Causal linear attention Yᵢ = Σⱼ≤ᵢ (qᵢ·kⱼ)·decay(i, j)·vⱼ by chunk kernels, as flash-linear-attention (and
        mamba_ssm's SSD) run it. The length is cut into ⌈n/C⌉ chunks of C tokens, the last one masked where C does
        not divide n (no padded copy: its FLOPs are those of whole chunks). Two kernels:

        - the state kernel (fla's chunk_fwd_h; the delta rule's chunk_gated_delta_rule_fwd_h) walks the chunks in
          order, carrying the d_k×d_v state S on chip and writing the state entering each chunk to memory (an extra
          result of the op, `attrs["also"]`, of `states_dtype`: None is the activation dtype); with the delta rule
          (`w`: the WY representation's W, v then being its U) it also writes v_new = U − W·S (N×d_v);
        - the output kernel (chunk_fwd_o) makes each chunk's output from Q_c·S_c and its C×C block of scores
          (Q_cK_cᵀ, masked, times V_c), which never leaves the chip.

        `states`: the states entering each chunk made by other ops (mamba_ssm's chunk_state and state_passing): the
        op is then the output kernel alone (mamba's chunk_scan). `scores`: the C×C blocks made by another op (GLA's
        A, mamba's CB), read instead of computed. `gate`: the decay, none (linear attention), head (fixed per head:
        retention's γ, no tensor), token (a scalar per token: Mamba-2, Gated DeltaNet) or vector (one per key
        dimension: GLA), read from `gates` (its cumulative sum inside each chunk, and mamba's Δ); `skip`: the output
        adds D·x (Mamba-2). `saves`: what the library's autograd function keeps for backward (default q, k, v)."""
        *lead, n, dk = q.shape
        dv = v.shape[-1]
        if not (_same(k.shape[-2], n) and _same(v.shape[-2], n) and _same(k.shape[-1], dk)):
            raise ModelError(f"{self.name}: the chunk kernel takes q, k, v of one length and q, k of one width")
        if gate not in CHUNK_GATES:
            raise ModelError(f"{self.name}: {unknown('chunk gate', gate, CHUNK_GATES)}")
        if (gate in ("none", "head")) != (not gates):
            raise ModelError(f"{self.name}: a {gate} gate {'needs its' if not gates else 'reads no'} gate tensors")
        if w is not None and (states is not None or not all(map(_same, w.shape, k.shape))):
            raise ModelError(f"{self.name}: the delta rule's W is the keys' shape, and its states are the kernel's own")
        delta = w is not None
        if (states is None, delta, scores is not None) not in CHUNK_KERNELS:
            given = "given" if scores is not None else "its own"
            raise ModelError(f"{self.name}: no chunk kernel makes {'its' if states is None else 'no'} states with"
                             f"{'' if delta else 'out'} delta-rule updates and {given} scores (modelled: "
                             f"{'; '.join(CHUNK_KERNELS.values())})")  # fmt: skip
        c = sp.sympify(chunk)
        chunks = sp.ceiling(n / c)
        batch = _prod(self._broadcast(tuple(lead), tuple(v.shape[:-2])))
        extra = tuple(t for t in (w, *gates, states, scores) if t is not None)
        attrs: dict[str, Any] = {"batch": batch, "n": n, "chunk": c, "chunks": chunks, "dk": dk, "dv": dv,
                                 "gate": gate, "delta": delta, "makes_states": states is None,
                                 "scores_in": scores is not None, "skip": skip, "gain": gain}  # fmt: skip
        out = self._emit("linear_chunk", name, (*v.shape[:-2], n, dv), (q, k, v, *extra), attrs=attrs,
                         label=label or f"{name} ← chunk kernels({q.name}, {k.name}, {v.name})")  # fmt: skip
        op = self.ops[-1]
        if states is None:  # the state kernel writes them, the output kernel reads them back, and both the decay,
            # the keys (unless the scores are made elsewhere) and the values (the delta rule's: v_new instead)
            made = self._new(f"S({name})", (batch, chunks, dk, dv), producer=op.index, dtype=states_dtype)
            also = [made]
            if delta:
                also.append(self._new(f"v_new({name})", (*v.shape[:-2], n, dv), producer=op.index))
            op.attrs["also"] = also
            op.attrs["reread"] = [*gates, *also, *([] if scores is not None else [k]), *([] if delta else [v])]
        if self.training:
            op.attrs["saved"] = list(saves if saves is not None else (q, k, v))
        return out

    def chunk_matmul(
        self,
        name: str,
        a: Tensor,
        b: Tensor,
        *,
        chunk: sp.Expr | int,
        form: str,
        rowscale: Tensor | None = None,
        gate: str = "none",
        gates: tuple[Tensor, ...] = (),
        rows: sp.Expr | None = None,
        dtype: str | None = None,
        recompute: bool = False,
        attention: bool = False,
        saves: tuple[Tensor | str, ...] | None = None,
        label: str = "",
    ) -> Tensor:
        """A product inside each chunk of C tokens, one kernel over the ⌈n/C⌉ chunks (the last masked, computed
        whole), written to memory in fla's [B, T, H, ·] layout (per head, n rows; `rows` where the library pads to
        whole chunks, as mamba_ssm does):

        - `scores`: A_c = a_c·b_cᵀ, the C×C block of each chunk (the delta rule's βKKᵀ, GLA's gated QKᵀ, Mamba-2's
          CB): out (…, n, C);
        - `apply`: a's C×C block of each chunk times b_c (the delta rule's W = T·βK and U = T·βV): out (…, n, w);
        - `states`: a_cᵀ·b_c, each chunk's own d_k×d_v state (mamba_ssm's chunk_state): out (…, ⌈n/C⌉, d_k, d_v).

        `rowscale`: a factor per row of the first operand (β); `gate`: the decay applied inside (none, token,
        vector; `gates` its tensors); `recompute`: the library's backward makes the result again instead of keeping
        it (fla's W and U, mamba's chunk states and CB); `attention`: a product over attention scores (GLA's QKᵀ,
        Mamba-2's CB), what the FlashAttention benchmark counts; `saves`: what its autograd function keeps (default
        a, b; "out": the product itself)."""
        if form not in CHUNK_FORMS:
            raise ModelError(f"{self.name}: {unknown('chunk product form', form, CHUNK_FORMS)}")
        c = sp.sympify(chunk)
        *la, n, ka = a.shape
        *lb, nb, kb = b.shape
        if not _same(n, nb):
            raise ModelError(f"{self.name}: chunk product {a.name}{a.shape} and {b.name}{b.shape}: lengths differ")
        chunks = sp.ceiling(n / c)
        lead = self._broadcast(tuple(la), tuple(lb))
        if form == "scores":
            if not _same(ka, kb):
                raise ModelError(f"{self.name}: chunk scores {a.name}{a.shape}·{b.name}ᵀ: widths differ")
            shape, inner, width = (*lead, rows if rows is not None else n, c), ka, c
        elif form == "apply":
            if not _same(ka, c):
                raise ModelError(f"{self.name}: chunk product {a.name}{a.shape}: its rows are not C×C blocks")
            shape, inner, width = (*lead, rows if rows is not None else n, kb), c, kb
        else:
            shape, inner, width = (*lead, chunks, ka, kb), c, kb
        attrs: dict[str, Any] = {"batch": _prod(lead), "chunk": c, "chunks": chunks, "form": form, "m": ka if form
                                 == "states" else c, "k": inner, "n": width, "gate": gate, "rowscale": rowscale
                                 is not None, "attention": attention, "gain": None}  # fmt: skip
        if recompute:
            attrs["backward"] = sp.Integer(3)  # made again, then a gradient for each operand
        inputs = tuple(t for t in (a, b, rowscale, *gates) if t is not None)
        out = self._emit("chunk_matmul", name, shape, inputs, attrs=attrs, dtype=dtype,
                         label=label or f"{name} ← per chunk {a.name}, {b.name} ({form})")  # fmt: skip
        if self.training:
            self.ops[-1].attrs["saved"] = [out if t == "out" else t for t in (saves if saves is not None else (a, b))]
        return out

    def tri_solve(self, name: str, a: Tensor, *, chunk: sp.Expr | int, dtype: str | None = None,
                  label: str = "") -> Tensor:  # fmt: skip
        """T = (I + A)⁻¹ for each chunk's strictly lower triangular C×C block A (fla's solve_tril: the delta rule's
        WY representation), in fla's [B, T, H, C] layout. Forward substitution: C(C−1)(C−2)/6 multiply-adds a
        chunk; no product FlopCounterMode counts. Its backward, −Tᵀ·dT·Tᵀ, is two C×C×C products a chunk
        (`backward_products`), which no multiple of its forward count gives."""
        c = sp.sympify(chunk)
        *lead, n, width = a.shape
        if not _same(width, c):
            raise ModelError(f"{self.name}: solve_tril {a.name}{a.shape}: its rows are not C×C blocks")
        chunks = sp.ceiling(n / c)
        batch = _prod(tuple(lead))
        attrs = {"batch": batch, "chunk": c, "chunks": chunks, "gain": None,
                 "backward_products": 2 * 2 * batch * chunks * c**3}  # fmt: skip
        return self._emit("tri_solve", name, a.shape, (a,), attrs=attrs, dtype=dtype,
                          label=label or f"{name} ← (I + {a.name})⁻¹ per chunk")  # fmt: skip

    def traced(
        self,
        kind: str,
        name: str,
        shape: Shape,
        inputs: tuple[Tensor, ...],
        *,
        into: Tensor | None = None,
        attrs: dict[str, Any] | None = None,
        label: str = "",
        dtype: str | None = None,
    ) -> Tensor:
        """An op whose output shape is known from elsewhere (a graph exported from PyTorch code): a new
        tensor (dtype None: the activation dtype), or, with `into`, written into an existing storage (an
        in-place op or `out=`)."""
        if into is not None:
            return self._inplace(kind, name, into, inputs, dict(attrs or {}), label)
        return self._emit(kind, name, shape, inputs, attrs=dict(attrs or {}), label=label, dtype=dtype)

    # -- internals ---------------------------------------------------------------------------

    def _new(self, name: str, shape: tuple, producer: int, dtype: str | None = None) -> Tensor:
        shp = tuple(sp.sympify(s) for s in shape)
        return Tensor(name, shp, Storage(next(self._ids), _prod(shp), dtype, producer, name))

    def _emit(
        self,
        kind: str,
        name: str,
        shape: tuple,
        inputs: tuple[Tensor, ...],
        *,
        attrs: dict[str, Any] | None = None,
        workspace: sp.Expr | int = 0,
        label: str = "",
        dtype: str | None = None,
    ) -> Tensor:
        out = self._new(name, shape, producer=len(self.ops), dtype=dtype)
        self.ops.append(self._op(kind, inputs, out, False, workspace, attrs or {}, label))
        return out

    def _op(self, kind, inputs, out, inplace, workspace, attrs, label) -> Op:
        if kind not in KINDS:
            raise ModelError(f"{self.name}: {unknown('op kind', kind, KINDS)}")
        loop = self._open[-1].index if self._open else None
        if self.training:
            saved = SAVES.get(kind, ())
            attrs["saved"] = [t for i, t in enumerate(inputs) if i in saved] + ([out] if "out" in saved else [])
        return Op(len(self.ops), kind, inputs, out, inplace, sp.sympify(workspace), attrs, label, self._repeat(), loop)

    def _inplace(
        self,
        kind: str,
        name: str,
        target: Tensor,
        others: tuple[Tensor, ...],
        attrs: dict[str, Any],
        label: str,
        *,
        workspace: sp.Expr | int = 0,
    ) -> Tensor:
        out = Tensor(name, target.shape, target.storage)
        op = self._op(kind, (target, *others), out, True, workspace, attrs, label)
        if target in attrs.get("saved", ()) and not attrs.get("accumulate"):
            # backward reads the value it overwrites: autograd keeps a clone (an accumulation out += a·b needs none)
            clone = self._new(f"{target.name} (saved)", target.shape, len(self.ops), target.storage.dtype)
            attrs["saved"] = [clone if t is target else t for t in attrs["saved"]]
        self.ops.append(op)
        return out

    def _broadcast(self, a: Shape, b: Shape) -> Shape:
        n = max(len(a), len(b))
        a = (sp.Integer(1),) * (n - len(a)) + tuple(a)
        b = (sp.Integer(1),) * (n - len(b)) + tuple(b)
        out = []
        for x, y in zip(a, b, strict=True):
            if x == 1:
                out.append(y)
            elif y == 1 or _same(x, y):
                out.append(x)
            else:
                raise ModelError(f"{self.name}: shapes {a} and {b} do not broadcast")
        return tuple(out)


_SYMBOL = {"add": "+", "mul": "⊙", "div": "/"}

CHUNK_GATES: dict[str, str] = {
    "none": "no decay (linear attention, DeltaNet)",
    "head": "a fixed decay per head, no tensor (retention's γ)",
    "token": "a scalar decay per token and head (Mamba-2, Gated DeltaNet): its cumulative sum inside each chunk",
    "vector": "a decay per token, head and key dimension (GLA): its cumulative sum inside each chunk",
}
"""The decays a chunk kernel applies (`Graph.linear_chunk`, `Graph.chunk_matmul`)."""
CHUNK_KERNELS: dict[tuple[bool, bool, bool], str] = {
    (True, False, False): "chunk_fwd_h and chunk_fwd_o (fla's chunk_simple_gla: linear attention, retention, "
    "Mamba-2-style scalar gates)",
    (True, False, True): "chunk_fwd_h and an output kernel reading the scores (fla's chunk_gla)",
    (True, True, False): "chunk_gated_delta_rule_fwd_h and chunk_fwd_o (fla's delta-rule kernels)",
    (False, False, True): "an output kernel reading states and scores (mamba_ssm's chunk_scan)",
}
"""The chunk kernels `Graph.linear_chunk` models, by (it makes its states, the delta rule, the scores are given)."""
CHUNK_FORMS: dict[str, str] = {
    "scores": "A_c = a_c·b_cᵀ, each chunk's C×C block",
    "apply": "a's C×C block of each chunk times b_c",
    "states": "a_cᵀ·b_c, each chunk's own state",
}
"""The products `Graph.chunk_matmul` makes inside each chunk."""

_ROW_SCRATCH = {
    # kinds that hold values per row while they run: a norm, a row sum, LayerNorm's mean and 1/std
    "l2normalize": lambda t: t.rows,
    "normalize_rows": lambda t: t.rows,
    "layernorm": lambda t: 2 * t.rows,
}


MAX_MULTIPLE = 1 << 32
"""The largest whole number of rows `Graph.pad` pads to (as --chunk and --n: beyond it no attention layer exists)."""


def _multiple(value: object, what: str) -> sp.Expr:
    """What `Graph.pad` pads to, checked: a whole number of rows from 1 to MAX_MULTIPLE, or a size other than N
    (C, w, ...), or a sum or product of sizes with positive whole coefficients; anything else (2.5, N, C/2, a
    negative number) is a ModelError naming it."""
    try:
        m = sp.sympify(value, strict=True)
    except (sp.SympifyError, TypeError):
        m = None
    why = "a whole number of rows (from 1 to 2^32), a size such as C or w, or a product of them"
    if not isinstance(m, sp.Expr) or m.has(sp.Float) or not m.is_commutative:
        raise ModelError(f"{what} to a multiple of {value!r}: the multiple must be {why}")
    if m.free_symbols & {N, N_kv}:
        raise ModelError(f"{what} to a multiple of {m}: the multiple cannot depend on the sequence length")
    if m.is_Integer or not m.free_symbols:
        if not (m.is_Integer and 1 <= int(m) <= MAX_MULTIPLE):
            raise ModelError(f"{what} to a multiple of {m}: the multiple must be {why}")
        return m
    sizes = sorted(m.free_symbols, key=str)
    try:
        coeffs = sp.Poly(m, *sizes).coeffs()
    except sp.PolynomialError:
        coeffs = []
    if not coeffs or not all(c.is_Integer and c > 0 for c in coeffs):
        raise ModelError(f"{what} to a multiple of {m}: the multiple must be {why}")
    return m
