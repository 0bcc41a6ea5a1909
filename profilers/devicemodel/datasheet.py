"""Datasheet GPUs: the figures of a GPU one does not own, as data (profilers/data/gpus.json, one row a GPU, each
with its source; a user adds one with a file of the same form in $ATTN_COST_HOME/gpus/).

A row is checked when it is read: every figure present and positive, and its tensor peak no more than the
architecture's dense rate per SM and clock allows (a 2:4-sparsity-doubled peak, the commonest error in such
tables, is refused). No torch: `crossover --device h100-sxm5-80gb` reads it on the analytic path.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from attn_cost.costmodel.errors import UserError, unknown
from attn_cost.profilers import DATA
from attn_cost.profilers.devicemodel.opmodel import user_dir as opmodels
from attn_cost.profilers.store.files import read_input, regular_files
from attn_cost.profilers.store.schema import SchemaError, check, rule

SHIPPED = DATA / "gpus.json"
KIND = "attn-cost datasheet GPUs"


@dataclass(frozen=True)
class Arch:
    """What a datasheet leaves out and the architecture fixes: per SM (CU) and clock."""

    tensor_flops_per_clock: int
    """Dense FP16/BF16 tensor (matrix) FLOPs per SM per clock: the most a datasheet peak can be."""
    sfu_per_clock: int
    """Exponentials per SM per clock (special-function units): softmax's other bound in fused attention."""


ARCHS: dict[str, Arch] = {
    "sm80": Arch(2048, 16),
    "sm86": Arch(1024, 16),
    "sm89": Arch(1024, 16),
    "sm90": Arch(4096, 16),
    "cdna3": Arch(2048, 16),
}
"""NVIDIA's Ampere, Ada and Hopper tuning guides and whitepapers (tensor FLOPs per SM per clock; 16 special-function
units per SM); AMD's CDNA3 instruction-set guide (MFMA rate per CU). The CDNA3 exponential rate is taken equal to
NVIDIA's, an assumption no published figure here checks."""


@dataclass(frozen=True)
class Peaks:
    fp32: float = field(metadata=rule(above=0))
    tf32: float = field(metadata=rule(above=0))
    bf16: float = field(metadata=rule(above=0))
    fp16: float = field(metadata=rule(above=0))


@dataclass(frozen=True)
class Datasheet:
    """One GPU as sold: dense peaks (TFLOP/s), bandwidth (GB/s), caches and SMs, and where the figures come from."""

    name: str
    title: str
    vendor: str = field(metadata=rule(choices=("nvidia", "amd")))
    arch: str = field(metadata=rule(choices=tuple(ARCHS)))
    peak_tflops: Peaks
    bandwidth_gbs: float = field(metadata=rule(above=0))
    memory_gb: float = field(metadata=rule(above=0))
    l2_mb: float = field(metadata=rule(above=0))
    sms: int = field(metadata=rule(minimum=1))
    smem_per_sm_kb: float = field(metadata=rule(above=0))
    smem_per_block_kb: float = field(metadata=rule(above=0))
    clock_mhz: float = field(metadata=rule(above=0))
    """The clock the tensor peak assumes."""
    source: str
    device_names: list[str] = field(default_factory=list)
    """The names PyTorch gives this GPU (`torch.cuda.get_device_name`): how a measured profile finds its datasheet."""

    def peak(self, dtype: str, tf32: bool = False) -> float:
        """FLOP/s of matrix products in `dtype` (fp32 on the CUDA cores unless TF32 is on, as PyTorch's default)."""
        p = self.peak_tflops
        tflops = {"fp32": p.tf32 if tf32 else p.fp32, "tf32": p.tf32, "bf16": p.bf16, "fp16": p.fp16}[dtype]
        return tflops * 1e12

    @property
    def bandwidth(self) -> float:
        return self.bandwidth_gbs * 1e9

    @property
    def exp_rate(self) -> float:
        """Exponentials per second over the whole GPU."""
        return ARCHS[self.arch].sfu_per_clock * self.sms * self.clock_mhz * 1e6

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gb * 1e9)


@dataclass(frozen=True)
class GpuTable:
    kind: str = field(metadata=rule(choices=(KIND,)))
    schema: int = field(metadata=rule(minimum=1, maximum=1))
    gpus: list[dict]


def _checked(row: object, where: str) -> Datasheet:
    try:
        check(row, Datasheet, root="the row")
    except SchemaError as e:
        raise UserError(f"{where}: {e}") from None
    assert isinstance(row, dict)
    sheet = Datasheet(**{**row, "peak_tflops": Peaks(**row["peak_tflops"])})
    tensor = max(sheet.peak_tflops.bf16, sheet.peak_tflops.fp16) * 1e12
    most = ARCHS[sheet.arch].tensor_flops_per_clock * sheet.sms * sheet.clock_mhz * 1e6
    if tensor > most * 1.02:
        raise UserError(
            f"{where}: {sheet.name}'s {tensor / 1e12:g} TFLOP/s tensor peak is more than {sheet.sms} SMs at "
            f"{sheet.clock_mhz:g} MHz can do densely on {sheet.arch} ({most / 1e12:.0f}): a 2:4-sparsity figure? "
            "Give the dense peak (half the sparse one)"
        )
    if not math.isfinite(tensor):
        raise UserError(f"{where}: {sheet.name}'s peaks must be finite")
    return sheet


def read_table(path: Path) -> list[Datasheet]:
    """The rows of one table file, each checked; one line naming the file and the row that does not fit."""

    try:
        data = json.loads(read_input(path, "a datasheet table").decode("utf-8"))
        check(data, GpuTable, root=str(path))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{path} is not an attn-cost datasheet table: {type(e).__name__}: {e}") from None
    except SchemaError as e:
        raise UserError(f"{path} is not an attn-cost datasheet table: {e}") from None
    return [_checked(row, f"{path}, row {i + 1}") for i, row in enumerate(data["gpus"])]


def user_dir() -> Path:

    return opmodels().parent / "gpus"


@cache
def _load(folder: str) -> dict[str, Datasheet]:
    out: dict[str, Datasheet] = {}

    paths = [SHIPPED, *regular_files(Path(folder), "*.json")]
    for path in paths:
        for sheet in read_table(path):
            if sheet.name in out and path != SHIPPED:
                raise UserError(f"{path}: a GPU named {sheet.name!r} is already known; give yours another name")
            out[sheet.name] = sheet
    return out


def datasheets() -> dict[str, Datasheet]:
    """Every datasheet GPU: the shipped table's and the user's ($ATTN_COST_HOME/gpus/*.json)."""
    return _load(str(user_dir()))


def for_device(device_name: str) -> Datasheet | None:
    """The datasheet of a measured GPU, by the name PyTorch gave it (None where no row names it)."""
    return next((s for s in datasheets().values() if device_name in s.device_names), None)


def is_datasheet(name: str) -> bool:
    return name in datasheets()


def get_datasheet(name: str) -> Datasheet:
    table = datasheets()
    if name not in table:
        raise UserError(unknown("datasheet GPU", name, table))
    return table[name]
