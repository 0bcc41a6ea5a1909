"""Which device a measurement runs on, and the fingerprint that names its results.

torch is imported inside the functions that need it: device names are read on the analytic path too.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import re
from pathlib import Path

from attn_cost.costmodel.errors import UserError


def select_device(gpu: bool, cpu: bool) -> str:
    """'cuda' for --gpu (which requires CUDA), 'cpu' for --cpu, CUDA if present otherwise."""
    import torch

    if gpu and cpu:
        raise UserError("give --gpu or --cpu, not both")
    if gpu and not torch.cuda.is_available():
        build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
        raise UserError(f"--gpu needs CUDA, and torch {torch.__version__} ({build}) sees no CUDA device; use --cpu")
    if cpu:
        return "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


def steady_cpu_allocator() -> str:
    """Pin glibc's malloc so large tensors reuse warm heap memory on every call.

    By default glibc moves its mmap threshold as blocks are freed, so a tensor of a few MB is
    sometimes served from the heap (fast) and sometimes from freshly mapped pages (a page fault
    per 4 KB): the same call then takes one time or twice it, and measured crossovers jump around.
    A fixed threshold of 1 GiB and no trimming make every call after the warm-up reuse memory,
    as PyTorch's CUDA caching allocator does on a GPU.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return "system default (not glibc)"
    m_trim_threshold, m_mmap_threshold = -1, -3
    if libc.mallopt(m_mmap_threshold, 1 << 30) == 1 and libc.mallopt(m_trim_threshold, 2**31 - 1) == 1:
        return "glibc, mmap threshold pinned at 1 GiB, no trim"
    return "glibc default (mallopt refused)"


def prepare(device: str) -> dict:
    """Make measurements on `device` repeatable and return its fingerprint."""
    info = fingerprint(device)
    if device == "cpu":
        from attn_cost.profilers.measure.timing import SETTLE_S

        info["allocator"] = steady_cpu_allocator()
        info[CPU_TIMER] = f"calls under {1e3 * SETTLE_S:g} ms timed after an untimed call"
        info[TIMER_VERSION] = CPU_TIMER_VERSION
    return info


def cpu_info() -> dict[str, str]:
    """The CPU's model name and the fields that tell models with the same name apart."""
    fields = {
        "model name": "name",
        "cpu family": "family",
        "model": "model",
        "stepping": "stepping",
        "cache size": "cache",
    }
    info: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key in fields and fields[key] not in info:
                info[fields[key]] = value.strip()
    except OSError:
        pass
    info.setdefault("name", platform.processor() or platform.machine() or "unknown cpu")
    return info


def fingerprint(device: str) -> dict:
    """What identifies the hardware and software a measurement ran on."""
    import torch

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
        from attn_cost.profilers.measure import gpu_timing

        info[TIMER_VERSION] = gpu_timing.TIMER_VERSION
        info.update(gpu_timing.device_properties())  # SM count, L2, clocks, timer's meaning, TF32 and cuDNN
    else:

        cpu = cpu_info()
        info.update(name=cpu.pop("name"), machine=platform.machine(), cpus=os.cpu_count(), **cpu)
    return info


IDENTITY = ("family", "model", "stepping", "cache", "cpus", "allocator", "capability", "memory_bytes")
"""Fingerprint fields besides the name that must match for two measurements to share a device."""
CPU_TIMER = "cpu_timer"
"""How CPU calls are timed, in words (`timing._timer`): recorded for people; the identity uses TIMER_VERSION."""
TIMER_VERSION = "timer_version"
"""Which version of the device's timer took the times (CPU: CPU_TIMER_VERSION; CUDA: gpu_timing.TIMER_VERSION):
part of the identity, so that timings of an older timer are never reused for a newer one."""
CPU_TIMER_VERSION = 1
LEGACY_CPU_TIMER = {1: "calls under 5 ms timed after an untimed call"}
"""The words that CPU fingerprints hashed before the timer had a version number: version 1 hashes them still,
so that devices named then (cpu-amd-epyc-5155e7) keep their names."""


def _timer_identity(info: dict) -> str:
    """The timer's part of the identity: '' for fingerprints that recorded no timer (they keep their names)."""
    version = info.get(TIMER_VERSION)
    if version is None:
        return str(info.get(CPU_TIMER) or "")
    if info.get("kind") == "cpu" and version in LEGACY_CPU_TIMER:
        return LEGACY_CPU_TIMER[version]
    timer = f"{info.get('kind')} timer v{version}"
    if info.get("kind") == "cuda":
        timer += f", {precision_key(info)}"
    return timer


def precision_key(info: dict) -> str:
    """The precision settings that are part of a CUDA device's identity, as one short string (torch-free: a CUDA
    device's name is read on the analytic path, `crossover --device cuda-...`)."""
    matmul, cudnn = ("on" if info.get(k) else "off" for k in ("tf32_matmul", "tf32_cudnn"))
    return f"tf32 matmul {matmul}, cudnn {cudnn}"


def slug(info: dict) -> str:
    """A file-name-safe device name plus a short hash of what else identifies it (model, cache, core count,
    torch major.minor, timer version; on CUDA TF32): cpu-amd-epyc-3f9a1c, cuda-nvidia-h100-80gb-hbm3-7be2d0."""
    name = re.sub(r"\(r\)|\(tm\)|cpu @.*|@.*", "", info["name"].lower())
    name = re.sub(r"[^a-z0-9]+", "-", name).strip("-")
    torch_minor = ".".join(str(info.get("torch", "")).split("+")[0].split(".")[:2])
    identity = "|".join(str(info.get(k, "")) for k in IDENTITY) + "|" + torch_minor
    timer = _timer_identity(info)
    if timer:
        identity += "|" + timer
    return f"{info['kind']}-{name}-{hashlib.sha1(identity.encode()).hexdigest()[:6]}"
