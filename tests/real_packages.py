"""Importing the attention packages the real-code tests and benchmarks/trace_table.py trace.

timm imports torchvision, and transformers imports it when it is installed. The torchvision on PyPI that pins
torch 2.13.0 (0.28.0) is built against CUDA torch: with the CPU build its C extension does not load and its
import fails on an unguarded `register_fake("torchvision::nms")`. Defining the two op schemas first lets the
import succeed (nothing here uses nms). A harness workaround, not part of attn-cost.
"""

from __future__ import annotations

import contextlib
import importlib
import warnings

import pytest


def _torchvision_shim() -> None:
    import torch

    if importlib.util.find_spec("torchvision") is None:
        return
    try:
        lib = torch.library.Library("torchvision", "DEF")
        lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        _KEEP.append(lib)
    except RuntimeError:  # already defined (torchvision's own extension loaded)
        pass
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with contextlib.suppress(Exception):
            import torchvision  # noqa: F401


_KEEP: list = []


def need(module: str):
    """Import a package's module for a test, skipping the test when the package is not installed."""
    _torchvision_shim()
    pytest.importorskip(module.split(".")[0])
    return importlib.import_module(module)
