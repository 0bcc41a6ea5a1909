"""Datasheet GPUs: the figures of a GPU one does not own, as data (profilers/data/gpus.json, one row a GPU, each
with its source; a user adds one with a file of the same form in $ATTN_COST_HOME/gpus/).

A row is checked when it is read: every figure present and within what a GPU can have (`Datasheet`'s bounds:
no 10^30 SMs, no bandwidth of 10^-300 GB/s), and its tensor peak no more than the architecture's dense rate per
SM and clock allows (a 2:4-sparsity-doubled peak, the commonest error in such tables, is refused), and its shared
memory per block enough for the fused attention kernel every command tiles by (`iotraffic.unfit`): the one check
of a row, made once when it is read, so a row one command refuses every command refuses. In a user's
table a row that does not fit costs that row only: it is left out with a warning naming the file and the row,
and every other device works; so is a row named like a measured device or a GPU already known (`kinds.py`:
one name, one device). Keys a row has that attn-cost does not read (a "comment", the peak of a dtype it does not
price, such as fp8) are ignored, and a note says which. No torch: `crossover --device h100-sxm5-80gb` reads it on
the analytic path.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import NamedTuple

from attn_cost.costmodel.errors import InputWarning, UserError, unknown
from attn_cost.costmodel.iotraffic import Gpu, unfit
from attn_cost.profilers import DATA
from attn_cost.profilers.devicemodel.names import measured_names
from attn_cost.profilers.store.files import read_json, regular_files
from attn_cost.profilers.store.schema import SchemaError, check, rule
from attn_cost.profilers.store.store import user_data_dir

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
    "sm70": Arch(1024, 16),
    "sm75": Arch(1024, 16),
    "sm80": Arch(2048, 16),
    "sm86": Arch(1024, 16),
    "sm89": Arch(1024, 16),
    "sm90": Arch(4096, 16),
    "sm100": Arch(8192, 16),
    "sm120": Arch(1024, 16),
    "cdna2": Arch(1024, 16),
    "cdna3": Arch(2048, 16),
}
"""NVIDIA's Volta, Turing, Ampere, Ada, Hopper and Blackwell whitepapers and tuning guides (tensor FLOPs per SM per
clock: V100 125 = 80 SMs x 1,024 x 1,530 MHz, T4 65 = 40 x 1,024 x 1,590 MHz, B200 2,250 = 148 x 8,192 x 1,856 MHz,
the RTX 5090's 209.5 = 170 x 512 x 2,407 MHz at FP32 accumulate under sm120's 1,024; 16 special-function units per
SM); AMD's CDNA2/CDNA3 instruction-set guides (MFMA rate per CU: MI250X 383 = 220 CUs x 1,024 x 1,700 MHz). The
AMD exponential rate is taken equal to NVIDIA's, an assumption no published figure here checks."""


PEAK = rule(above=0, maximum=1e5)
"""A dense peak in TFLOP/s: at most 100 PFLOP/s (the tensor peak is bounded by SMs and clock besides)."""


@dataclass(frozen=True)
class Peaks:
    fp32: float = field(metadata=PEAK)
    tf32: float = field(metadata=PEAK)
    bf16: float = field(metadata=PEAK)
    fp16: float = field(metadata=PEAK)


@dataclass(frozen=True)
class Datasheet:
    """One GPU as sold: dense peaks (TFLOP/s), bandwidth (GB/s), caches and SMs, and where the figures come from."""

    name: str
    title: str
    vendor: str = field(metadata=rule(choices=("nvidia", "amd")))
    arch: str = field(metadata=rule(choices=tuple(ARCHS)))
    peak_tflops: Peaks
    bandwidth_gbs: float = field(metadata=rule(minimum=1, maximum=1e5))
    memory_gb: float = field(metadata=rule(minimum=0.1, maximum=1e5))
    l2_mb: float = field(metadata=rule(above=0, maximum=1e5))
    sms: int = field(metadata=rule(minimum=1, maximum=10_000))
    smem_per_sm_kb: float = field(metadata=rule(above=0, maximum=1e5))
    smem_per_block_kb: float = field(metadata=rule(above=0, maximum=1e5))
    clock_mhz: float = field(metadata=rule(minimum=100, maximum=10_000))
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

    @property
    def gpu(self) -> Gpu:
        """What FlashAttention's tiles see of it (`iotraffic`: `attn-cost io --gpu`, the datasheet model's SDPA)."""
        return Gpu(self.name, self.arch, int(self.smem_per_block_kb * 1024), int(self.smem_per_sm_kb * 1024))


@dataclass(frozen=True)
class GpuTable:
    kind: str = field(metadata=rule(choices=(KIND,)))
    schema: int = field(metadata=rule(minimum=1, maximum=1))
    gpus: list


def _checked(row: object, where: str) -> Datasheet:
    """One row as a Datasheet, or UserError saying in one line why it does not fit (the keys attn-cost does not
    read are left out: `_unread`)."""
    try:
        check(row, Datasheet, root="the row")
    except SchemaError as e:
        raise UserError(f"{where}: {e}") from None
    assert isinstance(row, dict)
    own = {k: v for k, v in row.items() if k in Datasheet.__dataclass_fields__}
    sheet = Datasheet(**{**own, "peak_tflops": Peaks(**{k: row["peak_tflops"][k] for k in Peaks.__dataclass_fields__})})
    if sheet.smem_per_block_kb > sheet.smem_per_sm_kb:
        raise UserError(f"{where}: {sheet.name}'s shared memory per block is more than per SM")
    cannot = unfit(sheet.gpu)
    if cannot is not None:
        raise UserError(f"{where}: {sheet.name}: {cannot}, the fused attention kernel attn-cost prices")
    tensor = max(sheet.peak_tflops.bf16, sheet.peak_tflops.fp16) * 1e12
    most = ARCHS[sheet.arch].tensor_flops_per_clock * sheet.sms * sheet.clock_mhz * 1e6
    if tensor > most * 1.02:
        raise UserError(
            f"{where}: {sheet.name}'s {tensor / 1e12:g} TFLOP/s tensor peak is more than {sheet.sms} SMs at "
            f"{sheet.clock_mhz:g} MHz can do densely on {sheet.arch} ({most / 1e12:.0f}): a 2:4-sparsity figure? "
            "Give the dense peak (half the sparse one)"
        )
    return sheet


def _unread(row: object) -> list[str]:
    """The keys of a row attn-cost does not read (`peak_tflops.fp8` for a peak of a dtype it does not price)."""
    if not isinstance(row, dict):
        return []
    out = [k for k in row if k not in Datasheet.__dataclass_fields__]
    peaks = row.get("peak_tflops")
    if isinstance(peaks, dict):
        out += [f"peak_tflops.{k}" for k in peaks if k not in Peaks.__dataclass_fields__]
    return out


class Table(NamedTuple):
    """What one table file gives: its rows that fit, its warnings, and why each row left out was, by its name."""

    rows: list[Datasheet]
    warnings: list[str]
    left_out: dict[str, str]
    files_left_out: tuple[str, ...] = ()
    """Why each file that is not a table was left out whole (its rows' names unread): what an unknown name says."""


def read_table(path: Path, taken: dict[str, str] | None = None) -> Table:
    """The rows of one table file that fit, and a warning for each that does not (one line naming the file and
    the row) and for keys left unread (one line for the file). `taken`: names already meaning a device (their
    kind): a row with one of them is left out too. A file that is not a table is one UserError line."""
    try:
        data = read_json(path, "an attn-cost datasheet table")
        check(data, GpuTable, root=str(path))
    except SchemaError as e:
        raise UserError(f"{path} is not an attn-cost datasheet table: {e}") from None
    assert isinstance(data, dict)
    taken = dict(taken or {})
    rows: list[Datasheet] = []
    left_out: list[str] = []
    named: dict[str, str] = {}
    unread: dict[str, int] = {}
    for i, row in enumerate(data["gpus"]):
        where = f"{path}, row {i + 1}"
        try:
            sheet = _checked(row, where)
        except UserError as e:
            left_out.append(str(e))
            if isinstance(row, dict) and isinstance(row.get("name"), str):
                named.setdefault(row["name"], str(e))
            continue
        if sheet.name in taken:
            left_out.append(f"{where}: {sheet.name!r} already names {taken[sheet.name]}; give this GPU another name")
            continue
        taken[sheet.name] = f"a datasheet GPU ({path.name})"
        rows.append(sheet)
        for key in _unread(row):
            unread[key] = unread.get(key, 0) + 1
    warnings = [f"{line}: the row is left out" for line in left_out[:LEFT_OUT_SHOWN]]
    if len(left_out) > LEFT_OUT_SHOWN:
        rest = len(left_out) - LEFT_OUT_SHOWN
        warnings.append(f"{path}: {rest:,} more rows are left out, for reasons such as those above")
    if unread:
        keys = ", ".join(f"{k} ({n:,} row{'s' if n > 1 else ''})" for k, n in list(unread.items())[:LEFT_OUT_SHOWN])
        more = f" and {len(unread) - LEFT_OUT_SHOWN:,} more" if len(unread) > LEFT_OUT_SHOWN else ""
        warnings.append(f"note: {path}: keys attn-cost does not read are ignored: {keys}{more}")
    return Table(rows, warnings, named)


LEFT_OUT_SHOWN = 3
"""The most rows of one file whose reason a warning gives; the rest are counted."""


def user_dir() -> Path:
    """The user's own datasheet tables ($ATTN_COST_HOME/gpus/)."""
    return user_data_dir("gpus")


@cache
def _load(folder: str, measured: tuple[str, ...]) -> Table:
    """The shipped rows and the user's (each file's rows that fit), every name once, with the warnings and why each
    row left out was: a user's row that does not fit, or is named like a measured device (`measured`) or a GPU
    already known, is left out."""
    taken = dict.fromkeys(measured, "a measured device")
    shipped, problems, *_ = read_table(SHIPPED)
    if problems:
        raise UserError(f"{SHIPPED}: {problems[0]} (the shipped GPU table: reinstall attn-cost)")
    out = {sheet.name: sheet for sheet in shipped if sheet.name not in taken}
    said = [f"note: the shipped datasheet GPU {sheet.name!r} is left out: a measured device of yours has its name"
            for sheet in shipped if sheet.name in taken]  # fmt: skip
    taken.update(dict.fromkeys(out, "a shipped datasheet GPU"))
    why: dict[str, str] = {}
    whole: list[str] = []
    for path in regular_files(Path(folder), "*.json"):
        try:
            rows, problems, left_out, _ = read_table(path, taken)
        except UserError as e:
            rows, problems, left_out = [], [f"{e}: the file is left out"], {}
            whole.append(str(e))
        said += problems
        why = {**left_out, **why}
        for sheet in rows:
            out[sheet.name] = sheet
            taken[sheet.name] = f"a datasheet GPU ({path.name})"
    return Table(list(out.values()), said, why, tuple(whole))


def _table() -> Table:
    return _load(str(user_dir()), tuple(measured_names()))


def datasheets() -> dict[str, Datasheet]:
    """Every datasheet GPU: the shipped table's and the user's ($ATTN_COST_HOME/gpus/*.json), each name once and
    none named like a measured device."""
    table = _table()
    for text in table.warnings:  # each time: the CLI prints each once per command (`InputWarning`)
        warnings.warn_explicit(text, InputWarning, str(user_dir()), 0, registry={})
    return {sheet.name: sheet for sheet in table.rows}


def for_device(device_name: str) -> Datasheet | None:
    """The datasheet of a measured GPU, by the name PyTorch gave it (None where no row names it): the first row that
    names it, the shipped rows before a user's, so a user's row that calls itself by a shipped GPU's name never
    becomes that GPU (the report's "same GPU measured" compares the row this finds with its own by name)."""
    return next((s for s in datasheets().values() if device_name in s.device_names), None)


def left_out(name: str) -> str | None:
    """Why a user's row of this name was left out of the tables read (None where none was)."""
    return _table().left_out.get(name)


def files_left_out() -> str:
    """'' or, for a name no device has, the user's GPU tables left out whole, which may have meant it: `; FILE is
    not an attn-cost datasheet table: ... (left out whole)`, the first and how many more."""
    whole = _table().files_left_out
    if not whole:
        return ""
    more = f", and {len(whole) - 1:,} more such file{'s' if len(whole) > 2 else ''}" if len(whole) > 1 else ""
    return f"; {whole[0]} (left out whole{more})"


def get_datasheet(name: str) -> Datasheet:
    """The datasheet GPU of this name (a command resolves a name the user gave with `kinds.datasheet_of`)."""
    table = datasheets()
    if name not in table:
        raise UserError(unknown("datasheet GPU", name, sorted(table), where="`attn-cost devices` lists them all")
                        + files_left_out())  # fmt: skip
    return table[name]
