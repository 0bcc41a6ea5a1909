"""Whether a measured speed crossover stands: the rules a unit's records are judged by, for every GPU run.

A unit (a pair at one head dim, dtype and shape) stands where:

1. its search found a crossing and the crossings agree by the replicate rule (`search.replicates_disagree`:
   verdict `found`, not `unsteady`, `inconsistent` or `disturbed`), or its timings on a quiet machine tie
   (`search.tie_of`: verdict `tie`, A and B within the noise over a stretch, with the N0 range it implies);
2. the timer did not change method inside the crossing: every timing of A and B at the bracket's lengths and at
   the replicates' lengths lies on one side of the duration at which the timer that took them switched method
   (`TIMER_SWITCH_S`; version 2 timed calls under 200 µs in back-to-back blocks without an L2 flush and longer ones
   one per event pair after a flush, a step of up to 2× made by the method, not the kernel);
3. every measurement of it in one run reached the same verdict (a campaign's profile step and a validation's
   re-measurement; `n0_earlier` where `profile_pair` saw it measured before through the same store), and where
   both placed N0 (a found crossing's interval, a tie's N0 range; a found and a tie agree so), the two overlap.

A verdict that holds over the whole range (A or B cheaper throughout) stands under rule 3 alone.

Launch-bound is a label, not a reason: a crossing lies in the launch-bound range where, at the bracket's lengths,
one variant's time is under LAUNCH_FLOOR times its floor (its shortest time at that head dim, dtype and shape at
lengths FLOOR_BELOW times shorter or more): at least half of its time is then a fixed cost (launches, the host, a
GPU left mostly idle: at b·h = 32 heads on 132 SMs a grid of one block per head fills a quarter of the SMs), and
the crossing moves with the shape and the host, not with the kernels' work.

No scipy or torch here: `crossover --device` shows a standing on the analytic path (`cell`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

TIMER_SWITCH_S = {2: 200e-6}
"""Per CUDA timer version, the call duration at which it changed method (version 2's BLOCK_BELOW_S); a version
that never changes method has no entry."""
LAUNCH_FLOOR = 2.0
"""A variant is launch-bound at a length where its time is under this multiple of its floor: at least half of it is
the fixed cost."""
FLOOR_BELOW = 4
"""A variant's floor is its shortest time at lengths at least this many times shorter than the crossing's."""
STANDS = "stands"
VERDICT_WORDS = {
    "tie": "tie",
    "a-cheaper-throughout": "A cheaper throughout",
    "b-cheaper-throughout": "B cheaper throughout",
    "unsteady": "replicates disagree",
    "inconsistent": "inconsistent",
    "disturbed": "disturbed",
    "memory-limit": "memory limit",
    "out-of-memory": "out of memory",
    "budget": "out of lengths",
}
"""A verdict without a crossing, as a table cell."""

Times = Callable[[str, int], list[float]]
"""(variant, N) -> every stored time of the variant at that length and the unit's other sizes (search and
replicates), in seconds."""


PLACED = ("found", "tie")
"""The verdicts that place N0: a crossing with its interval, a tie with the N0 range it implies."""


def span(value: object) -> tuple[float, float] | None:
    """A [low, high] pair of a row (`n0_tie`, `n0_range`), or None where it is not one."""
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(x, (int, float)) for x in value):
        return float(value[0]), float(value[1])
    return None


def lengths(pair: tuple[float, float]) -> str:
    """A stretch of lengths in words: `1,306–1,598`, or `3,200` where it is one length."""
    return f"{pair[0]:,.0f}" if pair[0] == pair[1] else f"{pair[0]:,.0f}–{pair[1]:,.0f}"


def placed(row: dict) -> tuple[float, float] | None:
    """Where a measurement puts N0 (a row with n0_verdict, measured_n0, n0_uncertainty, n0_range): a found
    crossing's interval, a tie's N0 range; None for the other verdicts."""
    if row.get("n0_verdict") == "tie":
        return span(row.get("n0_range"))
    m = row.get("measured_n0")
    if row.get("n0_verdict") != "found" or m is None:
        return None
    u = row.get("n0_uncertainty") or 0.0
    return m - u, m + u


def agree(one: dict, other: dict) -> bool:
    """Whether two measurements of a unit agree: the same verdict, or where both place N0 (`placed`: found or tie),
    intervals that overlap (two found crossings each within the other's interval)."""
    v1, v2 = one.get("n0_verdict"), other.get("n0_verdict")
    if v1 in PLACED and v2 in PLACED:
        p1, p2 = placed(one), placed(other)
        if p1 is None or p2 is None:
            return v1 == v2
        return p1[0] <= p2[1] and p2[0] <= p1[1]
    return v1 == v2


def said(row: dict) -> str:
    """A measurement in a few words: `found 6,511 ± 776`, `tie 1,306–1,598 (N0 1,281–2,048)`,
    `b-cheaper-throughout`."""
    if row.get("n0_verdict") == "found" and row.get("measured_n0") is not None:
        return f"found {row['measured_n0']:,.0f} ± {row.get('n0_uncertainty') or 0:,.0f}"
    tie, n0 = span(row.get("n0_tie")), span(row.get("n0_range"))
    if row.get("n0_verdict") == "tie" and tie and n0:
        return f"tie {lengths(tie)} (N0 {lengths(n0)})"
    return str(row.get("n0_verdict"))


def _remeasured(row: dict, runs: Iterable[list[dict]]) -> str | None:
    """Rule 3: the measurements of one run that disagree, in one line (None where they all agree)."""
    series = [list(rows) for rows in runs]
    for r in [row, *(r for rows in series for r in rows)]:  # a row that says it was measured before (`n0_earlier`)
        if r.get("n0_earlier"):
            earlier = r["n0_earlier"]
            first = {"n0_verdict": earlier.get("verdict"), "measured_n0": earlier.get("measured"),
                     "n0_uncertainty": earlier.get("uncertainty"), "n0_tie": earlier.get("tie"),
                     "n0_range": earlier.get("n0_range")}  # fmt: skip
            series.append([first, r])
    for rows in series:
        if any(not agree(rows[0], r) for r in rows[1:]):
            return "verdict changed on re-measurement: " + ", then ".join(said(r) for r in rows)
    return None


def _split(lengths: list[int], a: str, b: str, times: Times, switch: float) -> str | None:
    """Rule 2: where the timings at the crossing's lengths lie on both sides of the timer's switch."""
    seen = [t for n in lengths for v in (a, b) for t in times(v, n)]
    if not seen or min(seen) >= switch or max(seen) < switch:
        return None
    return (
        f"split by the timer's switch: timings from {min(seen) * 1e6:,.0f} to {max(seen) * 1e6:,.0f} µs, either side "
        f"of {switch * 1e6:,.0f} µs, at N = {lengths[0]:,} to {lengths[-1]:,}"
    )


def launch_bound(row: dict, times: Times, timed: Callable[[str], Iterable[int]]) -> list[str]:
    """The variants of a unit that are launch-bound at its crossing: at the bracket's lengths, a median time under
    LAUNCH_FLOOR times the variant's floor, its shortest time at lengths FLOOR_BELOW times shorter than the bracket
    or more ([] where the unit has no crossing; a variant not timed that short is not judged)."""
    bracket = row.get("n0_bracket")
    if not bracket:
        return []
    out = []
    for v in (row["a"], row["b"]):
        at = sorted(t for n in bracket for t in times(v, n))
        below = [t for n in timed(v) if n * FLOOR_BELOW <= bracket[0] for t in times(v, n)]
        if at and below and at[len(at) // 2] < LAUNCH_FLOOR * min(below):
            out.append(v)
    return out


def judge(
    row: dict,
    times: Times,
    timed: Callable[[str], Iterable[int]],
    timer_version: int | None,
    runs: Iterable[list[dict]] = (),
) -> dict:
    """A unit's standing from its row (`profile.PairProfile.as_json` or a profile's measured row: verdict, bracket,
    replicate lengths, earlier measurement), the stored times at each length (`times`), the lengths each variant was
    timed at (`timed`), the version of the timer that took them and the rows of other measurements of it in one run
    (`runs`, one list per run). Returns {n0_standing: "stands" or the reasons, n0_launch_bound: the launch-bound
    variants}."""
    reasons = []
    verdict = row.get("n0_verdict")
    if verdict not in (*PLACED, "a-cheaper-throughout", "b-cheaper-throughout"):
        words = "replicates disagree" if verdict == "unsteady" else VERDICT_WORDS.get(str(verdict), str(verdict))
        note = str(row.get("n0_note") or "").removeprefix("replicates disagree: ")
        reasons.append(f"{words}: {note}" if note else words)
    lengths = sorted({*(row.get("n0_bracket") or []), *(row.get("n0_lengths") or [])})
    switch = TIMER_SWITCH_S.get(timer_version or 0)
    if lengths and switch is not None:
        split = _split(lengths, row["a"], row["b"], times, switch)
        if split:
            reasons.append(split)
    changed = _remeasured(row, runs)
    if changed:
        reasons.append(changed)
    return {"n0_standing": "; ".join(reasons) or STANDS, "n0_launch_bound": launch_bound(row, times, timed)}


def stands(row: dict) -> bool:
    return row.get("n0_standing") == STANDS


def shown_n0(row: dict) -> float | None:
    """A unit's measured N0 where it may be drawn as the measured crossing (a line or a marker labelled "N0
    measured"): where it stands, or was measured before these rules and never judged; None where it does not stand
    (a table shows it with its reason beside it: `cell`)."""
    if row.get("n0_standing") not in (None, STANDS):
        return None
    return row.get("measured_n0")


def short(standing: str | None) -> str:
    """The first reason of a standing in a few words (each reason is `words: detail`), for a table cell; '' where
    it stands or was not judged."""
    if not standing or standing == STANDS:
        return ""
    return standing.split(";")[0].split(":")[0]


def reasons(standing: str | None) -> list[str]:
    """Every reason of a standing in a few words."""
    if not standing or standing == STANDS:
        return []
    return [part.split(":")[0].strip() for part in standing.split("; ") if ":" in part or part]


def cell(value: float | None, spread: float | None, verdict: str | None, standing: str | None = None,
         launch: list[str] | None = None, compact: bool = False, tie: object = None) -> str:  # fmt: skip
    """A measured N0 as a table shows it, its standing beside it: `4,038 ± 346`, `5,584 ± 323 (launch-bound)`,
    `2,677 ± 995 (not standing: replicates disagree)`, `B cheaper throughout`, `tie 1,306–1,598` (a tie's stretch,
    `tie`: where either is as fast). `compact` (a terminal's 80 columns): `2,677 ± 995 (✗, lb)`: ✗ not standing, lb
    launch-bound (`crossover --device` says so under its table)."""
    stretch = span(tie) if verdict == "tie" else None
    if stretch is not None:
        text = f"tie {lengths(stretch)}"
    elif value is None:
        text = VERDICT_WORDS.get(verdict or "", verdict or "—")
    else:
        text = f"{value:,.0f} ± {spread:,.0f}" if spread else f"{value:,.0f}"
    marks = []
    if standing and standing != STANDS:
        reason = short(standing)
        if compact:
            marks.append("✗")
        elif value is not None or stretch is not None:
            marks.append(f"not standing: {reason}")
        elif reason != text:
            marks.append(reason)
    if launch:
        marks.append("lb" if compact else "launch-bound")
    return f"{text} ({', '.join(marks) if compact else '; '.join(marks)})" if marks else text


def standing_words(standing: str | None, launch: list[str] | None = None) -> str:
    """A standing as a table's `stands` column says it: `yes`, `yes, launch-bound (linear)`, `no: replicates
    disagree, split by the timer's switch`, `—` where not judged."""
    if not standing:
        return "—"
    if standing == STANDS:
        return f"yes, launch-bound ({', '.join(launch)})" if launch else "yes"
    return "no: " + ", ".join(reasons(standing))


def tally(rows: list[dict]) -> str:
    """How many units stand, and why the others do not (a unit can break several rules): `12 of 41 units stand (5
    of them launch-bound); 29 do not (replicates disagree in 17, split by the timer's switch in 9, ...)`."""
    judged = [r for r in rows if r.get("n0_standing")]
    standing = [r for r in judged if stands(r)]
    launch = sum(bool(r.get("n0_launch_bound")) for r in standing)
    counts: dict[str, int] = {}
    for r in judged:
        for reason in reasons(r["n0_standing"]):
            counts[reason] = counts.get(reason, 0) + 1
    text = f"{len(standing)} of {len(judged)} units stand"
    text += f" ({launch} of them launch-bound)" if launch else ""
    rest = len(judged) - len(standing)
    if rest:
        why = ", ".join(f"{reason} in {n}" for reason, n in sorted(counts.items(), key=lambda kv: -kv[1]))
        text += f"; {rest} {'does' if rest == 1 else 'do'} not ({why})"
    return text


def op_model_n0(n0: int | None, low: int | None, high: int | None) -> str:
    """The op model's N0 with its bootstrap interval: 1,162 [681–1,448]."""
    if n0 is None:
        return "—"
    return f"{n0:,} {interval(low, high)}" if low is not None or high is not None else f"{n0:,}"


OPEN_EDGE = "…"
"""An interval's edge that runs past the lengths searched: below the first, or beyond n_max."""
OPEN_MEANS = ("the interval runs past the lengths searched: within the model's error, B is as fast as A from the "
              "shortest length (a lower edge), or never as fast up to the longest (an upper one)")


def open_edges_said(cells: Iterable[str]) -> str:
    """The caption sentence that says what `OPEN_EDGE` means, where any of these cells shows one; else ''."""
    return f"{OPEN_EDGE} in [95 %]: {OPEN_MEANS}." if any(OPEN_EDGE in cell for cell in cells) else ""


def interval(low: int | None, high: int | None) -> str:
    """A predicted N0's 95 % interval, `[681–1,448]`; an edge past the lengths searched is `OPEN_EDGE`."""
    return f"[{_edge(low)}–{_edge(high)}]"


def _edge(value: int | None) -> str:
    return OPEN_EDGE if value is None else f"{value:,.0f}"

