"""What a device name means: one rule, in one function (`resolve`) that every command taking --device calls.

A device is one of three kinds: measured (a device profile, shipped or fitted here by `validate`), calibrated
(an op calibration, `calibrate`, without a profile) or a datasheet GPU (`datasheet.py`). Measured and calibrated
devices are named by their fingerprint's slug (one device may have both: its profile and its op calibration).
A name means one device: where a profile or an op calibration has a name, a datasheet row of that name is left
out when the table is read (with a warning), and a user's datasheet row cannot take a shipped GPU's name either.
So the kinds never compete, `devices` lists each name once, and `predict`, `crossover --device` and
`report --device` resolve a name alike. An unknown name is one line with the closest names of every kind.
"""

from __future__ import annotations

import os
from pathlib import Path

from attn_cost.costmodel.errors import UserError, unknown
from attn_cost.profilers.devicemodel.datasheet import Datasheet, datasheets, left_out
from attn_cost.profilers.devicemodel.names import known_opmodels, known_profiles

MEASURED = "a measured device (a device profile)"
CALIBRATED = "a calibrated device (an op calibration, no device profile)"
DATASHEET = "a datasheet GPU"


def kinds() -> dict[str, str]:
    """Every device name once, with its kind (a profile's name is measured even where it has an op calibration)."""
    out = dict.fromkeys(datasheets(), DATASHEET)
    out.update(dict.fromkeys(known_opmodels(), CALIBRATED))
    out.update(dict.fromkeys(known_profiles(), MEASURED))
    return out


def resolve(name: str, flag: str = "--device") -> str:
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
    raise UserError(f"{flag}: " + unknown("device", name, sorted(table), where="`attn-cost devices` lists them all"))


def datasheet_of(name: str, flag: str = "--device") -> Datasheet:
    """The datasheet GPU a name means (`predict`); any other kind, or an unknown name, is one line (`resolve`)."""
    kind = resolve(name, flag)
    if kind != DATASHEET:
        raise UserError(f"{flag} {name} is {kind}, not a datasheet GPU: this command prices GPUs from their "
                        "datasheets (`attn-cost devices` lists them)")  # fmt: skip
    return datasheets()[name]
