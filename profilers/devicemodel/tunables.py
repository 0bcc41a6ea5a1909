"""The op calibration's tunables: every number that shapes what `attn-cost calibrate` times, how it times it and
how it fits it, in one place, recorded in each calibration file (`tunables`), so that two calibrations can be
told apart by what they were made with as well as by what they measured. No torch."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace


@dataclass(frozen=True)
class Tunables:
    """One calibration's settings. `DEFAULT` is the full grid; `QUICK` a coarse smoke test."""

    quick: bool = False
    """The coarse grid: element counts every 16× instead of every 4× (denser around the cache)."""
    # -- timing
    sample_s: float = 2e-4
    """A timed sample runs a small kernel enough times in a row to last about this long."""
    max_calls_per_sample: int = 200
    """At most this many calls of a kernel make one timed sample."""
    slow_call_s: float = 0.02
    """A shape whose call takes longer than this is timed 3 times instead of `--repeats`."""
    host_repeat_factor: int = 3
    """The call and chain costs (one call per sample, a few µs each: the noisiest points) are timed this many
    times more often."""
    line_passes: int = 2
    """Times every exact shape is timed, each pass in its own random order, minutes apart; the fastest timing is
    kept. A slow spell of a shared machine slows a timing by a few per cent to 2×, often too little for the
    disturbance checks or the spike check to see, and never speeds one up."""
    spike: float = 1.25
    """A timing slower than its neighbours' trend along N by this factor is timed again (`trend.off_trend`)."""
    trend_reach: int = 4
    """How many timings on each side of a timing `trend.off_trend` judges it by."""
    # -- the grid
    cache_multiple: int = 8
    """The grid and the exact-shape lines reach this many times the last-level cache."""
    row_widths: tuple[int, ...] = (8, 64, 1024, 2000, 4096)
    """Row widths of the row-wise kernels: both stride classes (`forms.aliased`) up to d² at d = 64, so that a
    variant's rows of d² (Latte's, linear attention's running state) are priced within the grid of their class,
    never from the one page-aligned width (1,024) whose column scans ran 10× slower than their neighbours'."""
    product_small: tuple[int, ...] = (1, 8, 16, 32, 64)
    """The small dimension of a product (a head dim, 1)."""
    product_large: tuple[int, ...] = (32, 128, 512, 2048, 8192)
    """The other two dimensions of a product."""
    product_max_flops: int = 2**33
    """Largest product on the grid, in FLOPs."""
    square_d: tuple[int, ...] = (8, 16, 32, 64)
    """Head dims of the N×N products (QKᵀ and PV) timed where the N×N matrix leaves the cache."""
    batched_products: tuple[int, ...] = (16, 256, 4096)
    """Batch counts of the batched k×k products (a loop's per-token state update)."""
    batched_k: tuple[int, ...] = (8, 32, 64)
    chunk_lengths: tuple[int, ...] = (256, 1024, 4096)
    """Lengths of the gated and delta-rule chunk kernels on the grid (one head)."""
    chunk_d: tuple[int, ...] = (16, 32, 64)
    """Head dims (d_k = d_v) of the chunk kernels and of the per-chunk products on the grid."""
    chunk_sizes: tuple[int, ...] = (16, 64)
    """Chunk lengths C of the chunk kernels and of the per-chunk products on the grid."""
    sdpa_lengths: tuple[int, ...] = (64, 256, 1024, 4096)
    sdpa_d: tuple[int, ...] = (8, 16, 32, 64, 128)
    loop_iterations: tuple[int, ...] = (64, 256, 1024)
    """Loop lengths the per-iteration cost is timed at."""
    call_rows: tuple[int, ...] = (1, 2, 4, 8)
    """Input sizes the cost of a call is timed at."""
    chain_sizes: tuple[int, ...] = (8, 11, 16, 23, 32, 45, 64, 128, 256, 512)
    """Sides of the chains of different ops timed whole and op by op."""
    held_out_per_kernel: int = 2
    """Shapes off the grid per element-wise or row-wise kernel, for the held-out error."""
    held_out_lengths: tuple[int, ...] = (300, 1500, 3000)
    """N of the products off the grid (at d = 24 and 48), for the held-out error."""
    # -- exact shapes of the variants' ops
    line_d: tuple[int, ...] = (8, 16, 24, 32, 48, 64)
    """Head dims whose ops `calibrate` times at their exact shapes by default."""
    line_lengths: tuple[int, ...] = tuple(round(2 ** (j / 2)) for j in range(6, 29))
    """Lengths at which an op is timed along its line: every half octave from 8 to 16,384."""
    line_stride: int = 1
    """Every how many of `line_lengths` are timed."""
    glue_lengths: tuple[int, ...] = (8, 16, 32)
    """Lengths at which each variant is timed whole for its glue (`calibrated.fit.glue_points`): short enough that
    its ops take microseconds, so that what is left is the host's work between them."""
    line_max_s: float = 0.03
    """Longest estimated time of one op along a line (the kernel model extrapolates beyond it)."""
    # -- the fit
    residual_octaves: float = 1.0
    """Width (in octaves of each product dimension) of the residual correction's Gaussian weights."""
    residual_prior: float = 0.15
    """Weight of 'no correction' against the grid's residuals: the correction fades where the grid is far."""
    chain_span: float = 10.0
    """A chain's share of its ops' time is fitted only when the chains' ops alone span this factor in time."""

    @property
    def lengths(self) -> tuple[int, ...]:
        """The lengths an exact-shape line is timed at."""
        return self.line_lengths[:: self.line_stride]

    def as_json(self) -> dict:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


DEFAULT = Tunables()
QUICK = replace(
    DEFAULT,
    quick=True,
    row_widths=(16, 512),
    product_small=(1, 16, 64),
    product_large=(64, 1024),
    product_max_flops=2**28,
    square_d=(),
    batched_products=(64,),
    batched_k=(8, 32, 64),
    chunk_lengths=(256,),
    chunk_d=(16,),
    chunk_sizes=(16,),
    sdpa_lengths=(256,),
    sdpa_d=(16,),
    loop_iterations=(64, 128, 256),
    chain_sizes=(8, 128),
    held_out_per_kernel=1,
    held_out_lengths=(300,),
    line_d=(16,),
    line_stride=3,
)
"""A coarse grid, exact shapes at every third length and d = 16 only: a smoke test, not for predictions."""

GPU_CAMPAIGN = replace(
    DEFAULT,
    quick=True,
    row_widths=(64, 4096),
    product_small=(1, 16, 64),
    product_large=(128, 1024, 8192),
    square_d=(64,),
    batched_products=(64, 4096),
    chunk_lengths=(1024, 8192),
    chunk_d=(64, 128),
    chunk_sizes=(64,),
    sdpa_lengths=(256, 4096),
    sdpa_d=(64, 128),
    loop_iterations=(64, 1024),
    chain_sizes=(8, 64, 512),
    held_out_per_kernel=1,
    line_stride=2,
    line_passes=1,
)
"""A GPU campaign's calibration (about a thousand shapes): the variants' ops at their exact shapes at every other
length of the campaign's sizes, beside a coarser grid (element counts every 16×); one pass (a graph-replayed GPU
timing does not drift as a shared CPU's does)."""
