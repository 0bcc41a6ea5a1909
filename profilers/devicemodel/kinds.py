"""What a device name means: the registry of device kinds (`name → kind → load`) and one rule (`resolve`) from a
name to the model that answers for it, which every command taking --device and the workflow call.

A device is one of three kinds (`device.KINDS`), one folder each: measured (`measured/`: a device profile, shipped
or fitted here by `validate`), calibrated (`calibrated/`: an op calibration, `calibrate`, without a profile) or a
datasheet GPU (`datasheet/`). Each registers here (`register_kind`) which names it knows, how it recognises a file
no name lists, how it loads a name and how it makes its model of data already read; a new kind is a folder and one
registration. Measured and
calibrated devices are named by their fingerprint's slug (one device may have both: its profile and its op
calibration; a measured device is then answered by its profile for the variants it fitted at the setting it was
measured at, by the op model for the others: `MeasuredDevice`). A name means one device: where a profile or an op
calibration has a name, a datasheet row of that name is left out when the table is read (with a warning), and a
user's datasheet row cannot take a shipped GPU's name either. So the kinds never compete, `devices` lists each name
once, and `predict`, `crossover --device` and `report --device` resolve a name alike. An unknown name is one line
with the closest names of every kind.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attn_cost.costmodel.errors import UserError, unknown
from attn_cost.profilers.devicemodel.calibrated.data import load_opmodel
from attn_cost.profilers.devicemodel.calibrated.model import CalibratedDevice
from attn_cost.profilers.devicemodel.datasheet.data import Datasheet, datasheets, files_left_out, left_out
from attn_cost.profilers.devicemodel.datasheet.model import GpuModel
from attn_cost.profilers.devicemodel.device import CALIBRATED, DATASHEET, KINDS, MEASURED, DeviceModel
from attn_cost.profilers.devicemodel.measured.model import load_measured, measured_device
from attn_cost.profilers.devicemodel.names import known_opmodels, known_profiles


@dataclass(frozen=True)
class Kind:
    """One kind of device model, as the resolver sees it."""

    name: str
    """MEASURED, CALIBRATED or DATASHEET (`device.KINDS` says each in words)."""
    names: Callable[[], Iterable[str]]
    """Every name of the kind (shipped and the user's)."""
    load: Callable[[str], DeviceModel]
    """The model a name (or a file the kind recognises) means."""
    model_of: Callable[[Any], DeviceModel]
    """The model of data already read (an op calibration, a datasheet row, a device profile): what the workflow
    checks, without a name."""
    recognises: Callable[[str], bool] = lambda name: False
    """A path to a file of the kind, which no name lists (a device profile's JSON)."""


REGISTRY: dict[str, Kind] = {}
"""Every kind by name, in precedence order: a name two kinds know is the later one's (a profile's name is measured
even where the device has an op calibration; a datasheet row never shares a measured or calibrated name)."""


def register_kind(kind: Kind) -> Kind:
    """Adds a kind to the registry (after those already there: it takes the names they share)."""
    REGISTRY[kind.name] = kind
    return kind


def _profile_file(name: str) -> bool:
    return Path(name).suffix == ".json" and os.path.lexists(name)


register_kind(Kind(DATASHEET, datasheets, GpuModel.named, GpuModel.of))
register_kind(Kind(CALIBRATED, known_opmodels, lambda name: CalibratedDevice(load_opmodel(name)), CalibratedDevice))
register_kind(Kind(MEASURED, known_profiles, load_measured, measured_device, recognises=_profile_file))


def kinds() -> dict[str, str]:
    """Every device name once, with its kind (the later kind's where two know it: `REGISTRY`)."""
    out: dict[str, str] = {}
    for kind in REGISTRY.values():
        out.update(dict.fromkeys(kind.names(), kind.name))
    return out


def kind_of(name: str, flag: str = "--device") -> str:
    """The kind of device `name` names (a file a kind recognises is of that kind); an unknown name is one line
    naming the closest names of every kind and how to list them all."""
    table = kinds()
    if name in table:
        return table[name]
    for kind in reversed(REGISTRY.values()):
        if kind.recognises(name):
            return kind.name
    why = left_out(name)
    if why is not None:
        raise UserError(f"{flag} {name}: its datasheet row is left out ({why})")
    listed = unknown("device", name, sorted(table), where="`attn-cost devices` lists them all")
    raise UserError(f"{flag}: {listed}{files_left_out()}")


def resolve(name: str, flag: str = "--device", *, launch: str | None = None,
            launch_s: float | None = None) -> DeviceModel:  # fmt: skip
    """The model that answers for the device `name` names (or a file of a kind): a datasheet GPU's
    (`datasheet.model.GpuModel`), an op calibration's (`calibrated.model.CalibratedDevice`) or a measured device's
    (`measured.model.MeasuredDevice`: its profile, and its op calibration where it has one). `launch`, `launch_s`:
    a datasheet GPU's host (`GpuModel.with_host`); one line for a device of another kind, whose host was measured."""
    model = REGISTRY[kind_of(name, flag)].load(name)
    if launch is None and launch_s is None:
        return model
    if not isinstance(model, GpuModel):
        said = "--launch-us" if launch_s is not None else "--launch"
        raise UserError(f"{said} sets a datasheet GPU's launch cost; {model.name} is {model.kind}: its host was "
                        "measured")  # fmt: skip
    return model.with_host(launch or "eager", launch_s)


def model_of(kind: str, data: Any) -> DeviceModel:
    """The model of a kind made from its data already read (`Kind.model_of`)."""
    return REGISTRY[kind].model_of(data)


def datasheet_of(name: str, flag: str = "--device") -> Datasheet:
    """The datasheet GPU a name means (`io --gpu`: a GPU's shared memory and architecture, which only a datasheet
    gives); a device of another kind, or an unknown name, is one line."""
    table = kinds()
    if table.get(name, DATASHEET) != DATASHEET:
        raise UserError(f"{flag} {name} is {KINDS[table[name]]}, not a datasheet GPU: this option reads a GPU's "
                        "datasheet (`attn-cost devices` lists them)")  # fmt: skip
    why = left_out(name)
    if why is not None:
        raise UserError(f"{flag} {name}: its datasheet row is left out ({why})")
    sheets = datasheets()
    if name not in sheets:
        listed = unknown("datasheet GPU", name, sorted(sheets), where="`attn-cost devices`")
        raise UserError(f"{flag}: {listed}{files_left_out()}")
    return sheets[name]
