"""What a device name means: one rule (`resolve`) from a name to the model that answers for it, which every command
taking --device calls, and the columns a device adds to a crossover row (`add_device_columns`).

A device is one of three kinds (`device.KINDS`): measured (a device profile, shipped or fitted here by `validate`),
calibrated (an op calibration, `calibrate`, without a profile) or a datasheet GPU (`datasheet.py`). Measured and
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
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
from attn_cost.costmodel.crossover import DeviceColumns, Setting, TransitionRow
from attn_cost.costmodel.errors import UserError, unknown
from attn_cost.profilers.devicemodel.calibrated.data import load_opmodel, opmodel_for
from attn_cost.profilers.devicemodel.calibrated.model import CalibratedDevice
from attn_cost.profilers.devicemodel.datasheet.data import Datasheet, datasheets, files_left_out, left_out
from attn_cost.profilers.devicemodel.datasheet.model import GpuModel
from attn_cost.profilers.devicemodel.device import (
    CALIBRATED,
    DATASHEET,
    KINDS,
    MEASURED,
    DeviceModel,
    Draws,
    KernelTime,
    Prediction,
    Times,
    crossing,
    row_dims,
)
from attn_cost.profilers.devicemodel.measured.data import ProfileDevice, corrected_points, load_profile, measured_points
from attn_cost.profilers.devicemodel.names import known_opmodels, known_profiles


def kinds() -> dict[str, str]:
    """Every device name once, with its kind (a profile's name is measured even where it has an op calibration)."""
    out = dict.fromkeys(datasheets(), DATASHEET)
    out.update(dict.fromkeys(known_opmodels(), CALIBRATED))
    out.update(dict.fromkeys(known_profiles(), MEASURED))
    return out


def kind_of(name: str, flag: str = "--device") -> str:
    """The kind of device `name` names (a path to a device profile's JSON is a measured device); an unknown name
    is one line naming the closest names of every kind and how to list them all."""
    table = kinds()
    if name in table:
        return table[name]
    if Path(name).suffix == ".json" and os.path.lexists(name):
        return MEASURED
    why = left_out(name)
    if why is not None:
        raise UserError(f"{flag} {name}: its datasheet row is left out ({why})")
    listed = unknown("device", name, sorted(table), where="`attn-cost devices` lists them all")
    raise UserError(f"{flag}: {listed}{files_left_out()}")


def resolve(name: str, flag: str = "--device") -> DeviceModel:
    """The model that answers for the device `name` names: a datasheet GPU's (`gpumodel.GpuModel`), an op
    calibration's (`oppredict.CalibratedDevice`) or a measured device's (`MeasuredDevice`: its profile, and its op
    calibration where it has one)."""
    kind = kind_of(name, flag)
    if kind == DATASHEET:
        return GpuModel.named(name)
    if kind == CALIBRATED:
        return CalibratedDevice(load_opmodel(name))
    profile = load_profile(name)
    opmodel = opmodel_for(profile.slug)
    return MeasuredDevice(ProfileDevice(profile), CalibratedDevice(opmodel) if opmodel is not None else None)


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


@dataclass
class MeasuredDevice(DeviceModel):
    """A measured device: its profile answers for the variants it fitted, at the setting it was measured at; its op
    calibration, where it has one, for the others (`answering`)."""

    kind: ClassVar[str] = MEASURED
    label: ClassVar[str] = "profile"

    profile: ProfileDevice
    calibration: CalibratedDevice | None

    @property
    def name(self) -> str:
        return self.profile.name

    @property
    def slug(self) -> str:
        return self.profile.slug

    @property
    def dtype(self) -> str:
        return self.profile.dtype

    @property
    def answered_by(self) -> str:
        fitted = ", ".join(sorted(self.profile.profile.time)) or "none"
        if self.calibration is None:
            return f"{self.profile.answered_by}; it fitted {fitted}, and the device has no op calibration"
        return (f"{self.profile.answered_by}, for the variants it fitted ({fitted}); for the others, "
                f"{self.calibration.answered_by}")  # fmt: skip

    def answering(self, variant: str, setting: Setting, cost: str = "time") -> DeviceModel:
        """The profile where it answers for `variant` at `setting`, else the op calibration; one line saying why
        neither does."""
        reasons = []
        for model in (self.profile, self.calibration):
            if model is None:
                continue
            why = model.applies(variant, setting, cost)
            if why is None:
                return model
            reasons.append(why)
        if self.calibration is None:
            reasons.append(f"{self.slug} has no op calibration (`attn-cost calibrate` makes one)")
        raise UserError("; ".join(reasons))

    def applies(self, variant: str, setting: Setting, cost: str = "time") -> str | None:
        try:
            self.answering(variant, setting, cost)
        except UserError as e:
            return str(e)
        return None

    def seconds(
        self, variant: str, dims: dict, ns: np.ndarray, setting: Setting, replicates: int | None = None
    ) -> Times:
        return self.answering(variant, setting).seconds(variant, dims, ns, setting, replicates)

    def peak_bytes(self, variant: str, dims: dict, ns: np.ndarray, setting: Setting) -> np.ndarray:
        return self.profile.peak_bytes(variant, dims, ns, setting)

    def kernel_times(self, variant: str, dims: dict, ns: np.ndarray, setting: Setting) -> list[KernelTime] | None:
        return self.answering(variant, setting).kernel_times(variant, dims, ns, setting)

    def draws(self, a: str, b: str, dims: dict, setting: Setting, replicates: int | None = None) -> Draws:
        """The curves of the model that answers for both variants, the profile first (one model prices both sides
        of a crossing)."""
        for model in (self.profile, self.calibration):
            if model is not None and all(model.applies(v, setting) is None for v in (a, b)):
                return model.draws(a, b, dims, setting, replicates)
        raise UserError(f"{self.name}: no one model of the device answers for both {a} and {b} at this setting")

    def memory_curves(self, variant: str, dims: dict, setting: Setting) -> list:
        return self.profile.memory_curves(variant, dims, setting)


def add_device_columns(rows: list[TransitionRow], device: DeviceModel, replicates: int | None = None) -> None:
    """Give crossover rows a device's columns (`crossover --device`, the report): the N0 its predicting model gives
    (a datasheet's, an op calibration's: `crossing`, with its interval from `replicates` bootstrap replicates where
    the model draws them; default its own) and, where the device has a profile, its corrected N0/N1 and the
    measured points; a GPU's memory and whether both variants fit in it at the predicted N0."""
    for row in rows:
        row.device = device_columns(device, row, replicates)


def device_columns(device: DeviceModel, row: TransitionRow, replicates: int | None = None) -> DeviceColumns:
    """One row's device columns (`add_device_columns`): None where a model does not answer at the row's setting."""
    dims, s, a, b = row_dims(row.sizes), row.setting, row.a, row.b
    profile, predictor = (device.profile, device.calibration) if isinstance(device, MeasuredDevice) else (None, device)
    prediction = Prediction(None, None, None, 0)
    if predictor is not None and all(predictor.applies(v, s) is None for v in (a, b)):
        prediction = crossing(predictor, a, b, dims, s, replicates=replicates)
    memory = predictor.memory_bytes if predictor is not None else None
    fits = None
    if predictor is not None and memory is not None and prediction.n0 is not None:
        fits = all(predictor.peak_bytes(v, dims, np.array([prediction.n0]), s)[0] <= memory for v in (a, b))
    columns = None
    if profile is not None:
        columns = measured_points(profile.profile, row)
        columns.corrected_n0, columns.corrected_n1 = corrected_points(profile.profile, a, b, dims, s)
    return DeviceColumns(
        device.slug, columns, prediction.n0, prediction.low, prediction.high,
        predicted_by=predictor.label if predictor is not None else CalibratedDevice.label,
        predicted=prediction.as_json() if prediction.n0 is not None else None,
        memory_bytes=memory, fits_in_memory=fits,
    )  # fmt: skip
