"""Which device a measurement runs on, and the fingerprint that names its results."""

from __future__ import annotations

import platform
import re
from pathlib import Path

import torch

from costmodel.errors import UserError


def select_device(gpu: bool, cpu: bool) -> str:
    """'cuda' for --gpu (which requires CUDA), 'cpu' for --cpu, CUDA if present otherwise."""
    if gpu and cpu:
        raise UserError("give --gpu or --cpu, not both")
    if gpu and not torch.cuda.is_available():
        build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
        raise UserError(f"--gpu needs CUDA, and torch {torch.__version__} ({build}) sees no CUDA device; use --cpu")
    if cpu:
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown cpu"


def fingerprint(device: str) -> dict:
    """What identifies the hardware and software a measurement ran on."""
    info = {
        "kind": device,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
    }
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        info.update(
            name=props.name,
            capability=f"{props.major}.{props.minor}",
            memory_bytes=props.total_memory,
            cuda=torch.version.cuda,
        )
    else:
        info.update(name=cpu_name(), machine=platform.machine())
    return info


def slug(info: dict) -> str:
    """A file-name-safe device name: cpu-intel-xeon-platinum-8481c, cuda-nvidia-h100-80gb-hbm3."""
    name = re.sub(r"\(r\)|\(tm\)|cpu @.*|@.*", "", info["name"].lower())
    name = re.sub(r"[^a-z0-9]+", "-", name).strip("-")
    return f"{info['kind']}-{name}"
