"""What a CUDA time record says beside its device time, torch-free: the timing method's and the L2 policy's words,
and whether a point measures the host rather than the GPU (`launch_bound`).

The CUDA timer (`gpu_timing.py`, version 3) keeps in each time record `time` (the device time: graph replay), `eager`
(back-to-back eager calls), `host` ({"issue_s": the host's issue time per call, "kernels": kernels per call or null,
"launch_s": per kernel or null}), `method` (GRAPH, or EAGER_ONLY and why the call could not be captured) and `l2`
(L2_POLICY). Readers that never import torch (the store's checks, a campaign's labels, reports) read them here.
"""

from __future__ import annotations

from collections.abc import Mapping

GRAPH = "graph"
EAGER_ONLY = "eager-only: "
"""A record's `method`: GRAPH, or EAGER_ONLY followed by why the call could not be captured in a CUDA graph."""
L2_POLICY = (
    "warm: no flush; each block follows an identical block (the median of at least 3 blocks per run), as when a "
    "model's layer runs again"
)
"""The L2 state at every point of every curve, in words."""
LAUNCH_MARGIN = 0.10
"""A point is launch-bound when its eager time is within this share above the host's issue time."""


def is_method(text: object) -> bool:
    """Whether `text` is a timing method a record may hold."""
    return isinstance(text, str) and (text == GRAPH or (text.startswith(EAGER_ONLY) and bool(text[len(EAGER_ONLY) :])))


def launch_bound(
    eager_s: float,
    issue_s: float,
    *,
    margin: float = LAUNCH_MARGIN,
    blocks: int | None = None,
    sms: int | None = None,
) -> bool:
    """Whether a point measures the host rather than the GPU.

    The rule: its eager time (back-to-back eager calls, per call) is at most (1 + `margin`) times the host's issue
    time per call: the GPU waits for the host's launches, so the host's time is what the eager loop measures (the
    device time, by graph replay, is still the GPU's). Or, where the caller knows them, its kernel has fewer thread
    `blocks` than the GPU has `sms`: part of the GPU stays idle, whatever the host does."""
    if blocks is not None and sms is not None and blocks < sms:
        return True
    return eager_s <= (1 + margin) * issue_s


def record_launch_bound(record: Mapping, margin: float = LAUNCH_MARGIN) -> bool | None:
    """`launch_bound` of a stored time record; None where it holds no eager and issue times (a CPU record, an
    older timer's, an out-of-memory one)."""
    eager, host = record.get("eager"), record.get("host")
    if not eager or not host or host.get("issue_s") is None:
        return None
    return launch_bound(eager["median"], host["issue_s"], margin=margin)
