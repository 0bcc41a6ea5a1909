"""What a command's device options mean, resolved once before the command runs: `Settings.resolve`.

--device names a model (measured, calibrated or a datasheet GPU), --launch and --launch-us set a datasheet GPU's host,
--dtype defaults to what the device prices, and a counting option the device models cannot price is refused with
--device. Every command that takes --device (crossover, decode, predict, report) resolves them here, in one order:
the device's name, then its host, then the dtype and the counting options (the command's `Setting`), then what the
device cannot price. Each refusal is one line and exit 2.

The device layer is imported only here and only when a --device is given (`_device_layer`), so that the analytic
commands (`crossover --d 64`) never load the device models, the store or the report.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from attn_cost.cli.app import fail, typed
from attn_cost.costmodel.crossover import Setting

if TYPE_CHECKING:
    from attn_cost.costmodel.crossover import TransitionRow
    from attn_cost.profilers.devicemodel.device import DeviceModel

DATASHEET = "datasheet"
"""`DeviceModel.kind` of a datasheet GPU (`profilers.devicemodel.device.DATASHEET`, checked by tests/test_layers.py):
the only kind whose host --launch sets."""


def _device_layer() -> SimpleNamespace:
    """What the CLI uses of the device layer (the resolver, `name → kind → model`, and what a datasheet GPU's host
    may be), imported when a device is named: the one place the CLI reaches it."""
    from attn_cost.profilers.devicemodel import columns, device, kinds
    from attn_cost.profilers.devicemodel.datasheet import kernels, model

    return SimpleNamespace(resolve=kinds.resolve, add_device_columns=columns.add_device_columns,
                           datasheet_of=kinds.datasheet_of, launches=model.LAUNCHES, labels=device.LABELS,
                           kernels=kernels.CHOICES)  # fmt: skip


def datasheet(name: str, flag: str) -> Any:
    """The datasheet GPU `name` names (`io --gpu`: its shared memory and architecture); another kind of device, or
    an unknown name, is one line."""
    return _device_layer().datasheet_of(name, flag)


@dataclass(frozen=True)
class Settings:
    """A command's device, the dtype it prices at, the host of a datasheet GPU, and the kernel (None: the device's
    own choice), resolved once (`resolve`)."""

    model: DeviceModel | None
    """The model answering for --device (None without one), with the host --launch and --launch-us asked for."""
    setting: Setting
    """The counting setting, at the dtype the device prices (`dtype`)."""
    launch_us: float | None = None
    """The launch cost the user gave, µs (--launch-us), None where the setting's own is used."""
    default_launch_us: float | None = None
    """A datasheet GPU's launch cost before --launch and --launch-us, µs (None for other devices)."""
    kernel: str | None = None

    @property
    def dtype(self) -> str:
        return self.setting.dtype

    @property
    def datasheet(self) -> bool:
        """Whether the device is a datasheet GPU (its tables and JSON say what priced its launches)."""
        return self.model is not None and self.model.kind == DATASHEET

    @classmethod
    def resolve(
        cls,
        device: str | None,
        dtype: str | None,
        setting: Callable[[str], Setting],
        launch: str | None = None,
        launch_us: float | None = None,
        kernel: str | None = None,
        pytorch: str | None = None,
    ) -> Settings:
        """The settings a command's options mean, checked in one order: --device (an unknown name: one line naming
        the closest), --launch and --launch-us (a datasheet GPU's host: refused without --device or for a device
        whose host was measured), --dtype (as given, else the device's own: bf16 on a datasheet GPU, what a measured
        device was measured in, else fp32) with the counting options (`setting`, called with the dtype), then
        --dropout and --padding-mask, which no device model prices, then --kernel (a datasheet GPU's, one it can run
        in that dtype; a head dim it does not take is refused where a variant is priced), then --pytorch (a datasheet
        GPU's SDPA release)."""
        model = _device_layer().resolve(device) if device is not None else None
        default_us = model.launch.launch_s * 1e6 if model is not None and model.kind == DATASHEET else None
        model = _with_launch(model, launch, launch_us)
        st = setting(dtype or (model.dtype if model is not None else "fp32"))
        _priced(st, model)
        model = _with_pytorch(_with_kernel(model, kernel, st.dtype), pytorch)
        return cls(model, st, launch_us, default_us, kernel)

    def kernels(self, variant: str, dims: dict) -> dict[str, dict]:
        """Which kernel prices each of the variant's kernel families a --kernel chooses, and why (empty off a
        datasheet GPU, whose kernels are the ones that ran)."""
        if not self.datasheet:
            return {}
        return self.model.kernels_of(variant, dims, self.setting)  # type: ignore[union-attr]

    def check_kernel(self, variants: list[str], dims: dict) -> None:
        """Refuse, in one line, a --kernel that prices none of the variants (a fused attention kernel for a pair of
        unfused and linear variants)."""
        if self.kernel is None:
            return
        family = _device_layer().kernels[self.kernel].family
        if not any(family in self.kernels(v, dims) for v in variants):
            fail(f"--kernel {self.kernel} prices {family}, which none of {', '.join(variants)} runs")

    def kernel_caption(self, variants: list[str], dims: dict) -> str:
        """One sentence naming the kernels that priced the variants, where a datasheet GPU priced them."""
        seen: dict[str, str] = {}
        for v in variants:
            for family, k in self.kernels(v, dims).items():
                seen.setdefault(family, f"{family}: {k['title']} — {k['reason']}")
        return ("Kernels: " + "; ".join(seen.values()) + ".") if seen else ""

    def add_columns(self, rows: list[TransitionRow]) -> None:
        """The device's points on each crossover row (a profile's corrected and measured N0/N1, a model's
        predicted N0)."""
        if self.model is not None:
            _device_layer().add_device_columns(rows, self.model)

    @staticmethod
    def label(kind: str) -> str:
        """What a table calls the predictions of a kind of device model (JSON names the kind itself)."""
        return _device_layer().labels[kind]

    @property
    def title(self) -> str:
        """The device as a table's title names it: a datasheet GPU by its full name, another by its name."""
        if self.model is None:
            return ""
        return self.model.sheet.title if self.datasheet else self.model.name  # type: ignore[attr-defined]

    def launch_json(self) -> dict[str, Any]:
        """What priced a datasheet GPU's launches, for --json (empty for other devices)."""
        if not self.datasheet:
            return {}
        h = self.model.launch  # type: ignore[union-attr]
        return {"launch": {"setting": h.name, "launch_us": h.launch_s * 1e6, "call_us": h.call_s * 1e6,
                           "triton_launch_us": h.triton_s * 1e6, "source": h.source}}  # fmt: skip


def _with_launch(model: DeviceModel | None, launch: str | None, launch_us: float | None) -> DeviceModel | None:
    """A datasheet GPU's model with the host `--launch` and `--launch-us` ask for (one line and exit 2 for a device
    whose host was measured, an unknown setting or a launch cost that is no positive number of µs)."""
    if launch is None and launch_us is None:
        return model
    flag = "--launch-us" if launch_us is not None else "--launch"
    if model is None:
        fail(f"{flag} prices a datasheet GPU's launches: give --device NAME")
    if model.kind != DATASHEET:
        fail(f"{flag} sets a datasheet GPU's launch cost; {model.name} is {model.kind}: its host was measured")
    launches = _device_layer().launches
    if launch is not None and launch not in launches:
        fail(f"--launch must be one of {', '.join(launches)}, got {launch!r}")
    if launch_us is not None and not 0 < launch_us <= 1e6:  # NaN fails too
        said = typed("--launch-us", launch_us)
        fail(f"--launch-us must be a positive number of microseconds (at most 10^6), got {said}")
    return model.with_host(launch or "eager", None if launch_us is None else launch_us * 1e-6)  # type: ignore[attr-defined]


def _with_kernel(model: DeviceModel | None, kernel: str | None, dtype: str) -> DeviceModel | None:
    """A datasheet GPU's model pricing with the kernel --kernel names (one line: without --device, an unknown name,
    another kind of device, a kernel the GPU or dtype cannot run)."""
    if kernel is None:
        return model
    if model is None:
        fail("--kernel prices a datasheet GPU's kernels: give --device NAME")
    if model.kind != DATASHEET:
        fail(f"--kernel chooses a datasheet GPU's kernel; {model.name} is {model.kind}: its kernels are the ones "
             "that ran when it was measured")  # fmt: skip
    return model.with_kernel(kernel, dtype)  # type: ignore[attr-defined]


def _with_pytorch(model: DeviceModel | None, release: str | None) -> DeviceModel | None:
    """A datasheet GPU's model pricing SDPA as the PyTorch release --pytorch names, X.Y or X.Y.Z (one line: without
    --device, another kind of device, not a release, before 2.0, which had no SDPA)."""
    if release is None:
        return model
    found = re.fullmatch(r"\s*(\d{1,2})\.(\d{1,3})(?:\.\d{1,3})?\s*", release)
    if found is None:
        fail(f"--pytorch takes a PyTorch release as X.Y (2.4, 2.8.0), got {release!r}")
    major, minor = int(found[1]), int(found[2])
    if major < 2:
        fail(f"--pytorch {release}: SDPA came with PyTorch 2.0; give 2.0 or later")
    if model is None:
        fail("--pytorch prices a datasheet GPU's SDPA: give --device NAME")
    if model.kind != DATASHEET:
        fail(f"--pytorch chooses the release a datasheet GPU's SDPA is priced as; {model.name} is {model.kind}: its "
             "kernels are the ones that ran when it was measured")  # fmt: skip
    return model.with_pytorch((major, minor))  # type: ignore[attr-defined]


def _priced(st: Setting, model: DeviceModel | None) -> None:
    """Refuse --dropout and --padding-mask with --device: the device models (profilers/devicemodel) build the op
    lists they price without them, so their times and crossovers would be of attention without dropout or mask
    under a heading that says otherwise."""
    given = [flag for flag, on in (("--dropout", st.counting.dropout), ("--padding-mask", st.counting.padding_mask))
             if on]  # fmt: skip
    if model is not None and given:
        fail(f"{' and '.join(given)} {'is' if len(given) == 1 else 'are'} not priced on a device yet (the device "
             "models build their op lists without them): leave --device out for the counts, or the option out for "
             "the device's times")  # fmt: skip
