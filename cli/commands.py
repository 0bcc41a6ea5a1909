"""Imports every command module so that they register on the typer app."""

from attn_cost.cli import (  # noqa: F401
    analytic,
    calibrate,
    campaign,
    claims,
    doctor,
    iotraffic,
    measure,
    predict,
    report,
    results,
    trace,
)
