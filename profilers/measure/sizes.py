"""Concrete sizes of one measurement, torch-free: the commands that only read measurements (a device profile,
the op model's predictions, the report) use them without importing torch."""

from __future__ import annotations

from dataclasses import dataclass

from attn_cost.costmodel.symbols import BY_NAME, MEASURED_DEPTH, with_defaults

SIZE_FLAGS = {
    "N": "--n", "d": "--d", "h": "--h", "b": "--b", "L": "--L", "r": "--r", "D": "--depth", "h_kv": "--kv-heads",
    "w": "--window", "k": "--proj-len", "m": "--features", "c": "--landmarks", "C": "--chunk", "d_v": "--dv",
    "d_state": "--state", "G": "--groups",
}  # fmt: skip
"""The option that sets each of `Sizes`' fields, to name the user's own input in a refusal (the
measuring path's and the CLI's)."""


@dataclass(frozen=True)
class Sizes:
    """Concrete sizes; L defaults to d (latents per head), r and D to a small ViT-like encoder (D: the measured
    depth, `symbols.MEASURED_DEPTH`)."""

    N: int
    d: int
    h: int = 1
    b: int = 1
    L: int | None = None
    r: int = 4
    D: int = MEASURED_DEPTH
    h_kv: int | None = None
    """Key/value heads of grouped-query attention; the sizes below default to `symbols.DEFAULTS`."""
    w: int | None = None
    k: int | None = None
    m: int | None = None
    c: int | None = None
    C: int | None = None
    d_v: int | None = None
    """The value head dim where a variant has one of its own (retention, GLA, the delta rule): d unless given."""
    d_state: int | None = None
    G: int | None = None

    @property
    def latents(self) -> int:
        return self.L or self.d

    def _extra(self, name: str) -> int:
        value = getattr(self, name)
        return value if value is not None else with_defaults({BY_NAME["d"]: self.d})[BY_NAME[name]]

    @property
    def kv(self) -> int:
        """Key/value heads (grouped-query attention)."""
        return self._extra("h_kv")

    @property
    def window(self) -> int:
        return self._extra("w")

    @property
    def proj(self) -> int:
        """Linformer's projected length k."""
        return self._extra("k")

    @property
    def features(self) -> int:
        """Performer's random features m."""
        return self._extra("m")

    @property
    def landmarks(self) -> int:
        """Nyströmformer's landmarks c."""
        return self._extra("c")

    @property
    def chunk(self) -> int:
        """Chunked linear attention's chunk length C."""
        return self._extra("C")

    @property
    def value_dim(self) -> int:
        """The value head dim d_v (d unless given)."""
        return self._extra("d_v")

    @property
    def state(self) -> int:
        """Mamba-2's state expansion d_state."""
        return self._extra("d_state")

    @property
    def groups(self) -> int:
        """Mamba-2's groups G of B and C."""
        return self._extra("G")

    @property
    def width(self) -> int:
        return self.h * self.d

    def symbols(self) -> dict:
        """The same sizes keyed by the engine's sympy symbols."""
        extra = {n: self._extra(n) for n in EXTRA_SIZES}
        return {BY_NAME[k]: v for k, v in {**self.as_dict(), **extra}.items()}

    def as_dict(self) -> dict[str, int]:
        """The sizes, with the variant-specific ones (kv heads, window, ...) only when they were given."""
        base = {"N": self.N, "d": self.d, "h": self.h, "b": self.b, "L": self.latents, "r": self.r, "D": self.D}
        return {**base, **{n: getattr(self, n) for n in EXTRA_SIZES if getattr(self, n) is not None}}


EXTRA_SIZES = ("h_kv", "w", "k", "m", "c", "C", "d_v", "d_state", "G")
"""Sizes only some variants have (grouped-query heads, window, projected length, features, landmarks, chunk, value
head dim, Mamba-2's state expansion and groups)."""
