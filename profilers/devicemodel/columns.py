"""The columns a device adds to a crossover row (`crossover --device`, the report): the N0 its predicting model
gives, and, where the device has a profile, its corrected N0/N1 and the measured points."""

from __future__ import annotations

import numpy as np
from attn_cost.costmodel.crossover import DeviceColumns, TransitionRow
from attn_cost.profilers.devicemodel.calibrated.model import CalibratedDevice
from attn_cost.profilers.devicemodel.datasheet.model import GpuModel
from attn_cost.profilers.devicemodel.device import DeviceModel, Prediction, crossing, row_dims
from attn_cost.profilers.devicemodel.measured.data import measured_points
from attn_cost.profilers.devicemodel.measured.model import MeasuredDevice, corrected_points


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
        predicted_by=predictor.kind if predictor is not None else CalibratedDevice.kind,
        predicted=prediction.as_json() if prediction.n0 is not None else None,
        memory_bytes=memory, fits_in_memory=fits,
        kernels=({v: k for v in (a, b) if (k := device.kernels_of(v, dims, s))} if isinstance(device, GpuModel)
                 else None),
    )  # fmt: skip
