"""Errors with messages meant for the person at the terminal."""

from __future__ import annotations


class UserError(ValueError):
    """Bad input from the user (an unknown name, a size out of range). The CLI prints it and exits 2."""


class ModelError(RuntimeError):
    """A variant description that does not type-check (shapes that do not fit)."""


class PricingWarning(UserWarning):
    """A prediction priced part of a variant by a stand-in (an op kernel its calibration never timed). The CLI
    prints it as one `warning:` line after the command's output."""
