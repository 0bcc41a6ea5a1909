"""Whether a measured crossover stands: the replicate rule, a verdict that changes on re-measurement, the timer's
switch inside a crossing, the launch-bound label, and fitting and judging from records alone (`validate --records`),
on synthetic timings whose crossings are known by hand."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from attn_cost.costmodel.crossover import Setting
from attn_cost.profilers.measure.machine import fingerprint
from attn_cost.profilers.measure.profile import Measurer, profile_pair, replicated
from attn_cost.profilers.measure.search import Probe, Transition, one_crossing, replicates_disagree, signs_of, tie_of
from attn_cost.profilers.measure.sizes import Sizes
from attn_cost.profilers.measure.standing import cell, judge, standing_words, tally
from attn_cost.profilers.store.store import ResultStore, write_jsonl

PAIR = ("taylorshift-direct", "taylorshift-efficient")


def run(ns: list[int], a, b) -> list[Probe]:
    return [Probe(n, float(a(n)), float(b(n))) for n in ns]


# -- the replicate rule ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("signs", "one"),
    [("AABB", True), ("AB", True), ("ABBB", True), ("ABAB", False), ("BABB", False), ("BBBB", False), ("AAAA", False)],
)
def test_one_crossing_is_a_run_of_a_then_a_run_of_b(signs: str, one: bool) -> None:
    points = [Probe(n, 1.0, 2.0 if s == "A" else 0.5) for n, s in zip(range(10, 10 + len(signs)), signs, strict=True)]
    assert one_crossing(points) is one and signs_of(points) == signs


def test_crossings_that_agree_within_a_tenth_of_their_median_are_found() -> None:
    aabb = run([90, 99, 101, 111], lambda n: n * n, lambda n: 100 * n)
    assert replicates_disagree([100.0, 104.0, 96.0], [aabb, aabb]) is None


@pytest.mark.parametrize(
    ("crossings", "says"),
    [
        ([100.0, 100.5], "2 crossings (100, 100) where a found crossover needs 3"),
        ([100.0, 111.0, 100.0], "not all within 10% of their median 100"),  # 111 is 11 % from the median
        ([100.0, 89.0, 100.0], "not all within 10% of their median 100"),
    ],
)
def test_too_few_or_scattered_crossings_disagree(crossings: list[float], says: str) -> None:
    aabb = run([90, 99, 101, 111], lambda n: n * n, lambda n: 100 * n)
    assert says in (replicates_disagree(crossings, [aabb, aabb]) or "")


def test_a_replicate_without_one_crossing_disagrees_even_where_the_crossings_agree() -> None:
    aabb = run([90, 99, 101, 111], lambda n: n * n, lambda n: 100 * n)
    babb = [Probe(90, 1.0, 0.5), *aabb[1:]]  # B cheaper at the shortest length, then A, then B again
    why = replicates_disagree([100.0, 100.0, 100.0], [aabb, babb])
    assert why is not None and "replicate 2: BABB" in why


def test_a_found_search_with_agreeing_replicates_is_found_at_their_median() -> None:
    """A = N², B = 100·N: every replicate's line through (N, 1 − 100/N) at 90, 99, 101, 111 crosses zero where numpy's
    least-squares line does; the search placed 100.0; the crossover is the median of the three."""
    ns = [90, 99, 101, 111]
    reps = [run(ns, lambda n, k=k: n * n * (1 + 0.002 * k), lambda n: 100 * n) for k in (1, 2)]
    expected = []
    for points in reps:
        slope, icpt = np.polyfit([p.n for p in points], [(p.a - p.b) / p.a for p in points], 1)
        expected.append(-icpt / slope)
    t = replicated(Transition("found", 100.0, 1.0, (99, 101)), ns, reps)
    assert t.verdict == "found" and t.measured == pytest.approx(sorted([100.0, *expected])[1], rel=1e-9)
    assert t.lengths == ns and len(t.replicates) == 3


def test_replicates_that_disagree_make_the_crossover_unsteady_with_its_crossings_in_the_note() -> None:
    ns = [90, 99, 101, 111]
    far = run(ns, lambda n: n * n, lambda n: 150 * n)  # crosses at 150: 50 % off, and tB/tA there 1.35 to 1.67
    near = run(ns, lambda n: n * n, lambda n: 100 * n)  # (no tie: the mean ratio at 90 is off 1 by more than 25 %)
    t = replicated(Transition("found", 100.0, 1.0, (99, 101)), ns, [near, far])
    assert t.verdict == "unsteady" and t.measured is None and len(t.replicates) == 3
    assert t.note.startswith("replicates disagree: crossings 100, ") and "10%" in t.note


# -- a tie: two curves within the noise over a stretch ----------------------------------------------------------


def _tie_world(discarded: int = 0) -> tuple[Transition, list[int], list[list[Probe]]]:
    """A found search (A faster at 80, B at 140 by 30 %; 99 and 101, its bracket, within 0.4 %) whose three
    replicates at 90, 99, 101 and 111 scatter by a few per cent around tB/tA = 1 at 99 to 111 (replicate 1 reads
    AABA: not one crossing, so the replicate rule fails); each timing's own noise (0.1 %) is far under that scatter,
    which is the device's noise between runs. By hand: the log ratios' spread about each length's mean,
    pooled over the lengths timed more than once, is 0.0187 (10 degrees of freedom, t = 2.228); the 95 % half-widths
    are 0.024 (3 timings), 0.021 (4) and 0.042 (1); the mean log ratio is 0.182 at 90 (A faster), 0.0034 at 99,
    -0.0037 at 101 and -0.00003 at 111 (neither), 0.262 at 80 (A) and -0.357 at 140 (B)."""
    one = {"runs": 7, "discarded": discarded, "noise": 0.001}  # each timing's own noise: under the spread between
    search = [Probe(n, 1.0, r, **one) for n, r in ((80, 1.3), (99, 1.004), (101, 0.996), (140, 0.7))]
    ns = [90, 99, 101, 111]
    ratios = [(1.20, 1.02, 0.99, 1.01), (1.22, 0.98, 1.03, 0.99), (1.18, 1.01, 0.97, 1.00)]
    runs = [[Probe(n, 1.0, r, **one) for n, r in zip(ns, rs, strict=True)] for rs in ratios]
    return Transition("found", 100.0, 1.0, (99, 101), search), ns, runs


def test_replicates_that_disagree_within_the_noise_over_a_stretch_are_a_tie() -> None:
    """The stretch is 99 to 111 (neither faster), N0 lies after 90 (A faster) up to 140 (B faster), and the regret is
    the largest |geometric mean of tB/tA − 1| over 99, 101 and 111."""
    t = replicated(*_tie_world())
    assert t.verdict == "tie" and t.measured is None and t.uncertainty is None
    assert t.tie == (99, 111) and t.n0_range == (91, 140)
    means = [(1.004 * 1.02 * 0.98 * 1.01) ** (1 / 4), (0.996 * 0.99 * 1.03 * 0.97) ** (1 / 4), (1.01 * 0.99) ** (1 / 3)]
    assert t.regret == pytest.approx(max(abs(m - 1) for m in means), rel=1e-9)  # 0.0037, at 101
    assert "as fast from N = 99 to 111" in t.note and "between 91 and 140" in t.note and len(t.replicates) == 4


@pytest.mark.parametrize(
    "case",
    [
        "a busy machine: as many rounds thrown away as kept",
        "B faster at 80, before A at 90",
        "B faster at 91, next to A at 90: no length between",
        "no replicates: one run's own noise does not show the spread between runs",
    ],
)
def test_replicates_that_disagree_without_a_quiet_stretch_stay_unsteady(case: str) -> None:
    t, ns, runs = _tie_world()
    if case.startswith("a busy"):
        t = replace(t, probes=[replace(p, discarded=p.runs) for p in t.probes])
        runs = [[replace(p, discarded=p.runs) for p in run] for run in runs]
    elif case.startswith("no replicates"):  # 99 and 101 within their own noise (1 %), 80 and 140 far outside it
        t, runs = replace(t, probes=[replace(p, noise=0.01) for p in t.probes]), []
    elif case.startswith("B faster at 80"):
        t = replace(t, probes=[replace(t.probes[0], b=0.7), *t.probes[1:]])
    else:
        t = replace(t, probes=[*t.probes[:3], replace(t.probes[3], n=91)])
    assert replicated(t, ns, runs).verdict == "unsteady"


def tie_timer(discarded: bool = False, wiggle: float = 0.01):
    """`time_cases` of a world where B = 1.3·N² ns and A jumps so that tB/tA is 1.3 below N = 250, 1 ± `wiggle`
    from 250 to 350 (+ on a length's even-numbered timings, − on its odd ones: the replicates disagree) and 0.7
    above: both times grow with N (no trend break). Each timing's runs spread by ±1.5 % about the median (its own
    noise); `discarded`: as many rounds thrown away as kept (a busy machine). Returns the timer and the lengths timed,
    with how often."""
    timed: dict[int, int] = {}

    def timer(cases, repeats, warmup, **kwargs):
        from attn_cost.profilers.measure.timing import TimeStats

        n = cases[0].sizes.N
        k = timed[n] = timed.get(n, 0) + 1
        a = n * n * (1.0 if n < 250 else 1.3 if n <= 350 else 1.3 / 0.7)
        b = 1.3 * n * n * ((1 + wiggle if k % 2 else 1 - wiggle) if 250 <= n <= 350 else 1.0)
        return [TimeStats(t, 0.985 * t, 1.015 * t, 0.98 * t, 1.02 * t, repeats, warmup, repeats * discarded)
                for t in (1e-9 * (a if c.variant == PAIR[0] else b) for c in cases)]  # fmt: skip

    return timer, timed


def test_a_quiet_machine_where_the_curves_are_within_the_noise_gets_a_tie(tmp_path, monkeypatch) -> None:
    """Through the whole search: the stretch runs from the first to the last length timed from 250 to 350 (every
    one within its noise of 1, each of the rest 30 % off), N0 from the length after the last timed below 250 to the
    first timed above 350 (else the stretch's end), and the regret is the wiggle: the search's own lengths there are
    timed once (a close call timed again replaces the first), at 1 ± 1 %."""
    import attn_cost.profilers.measure.profile as prof

    timer, timed = tie_timer()
    monkeypatch.setattr(prof, "time_cases", timer)
    m = Measurer("cpu", ResultStore(fingerprint("cpu"), tmp_path), repeats=3)
    row = profile_pair(*PAIR, Sizes(N=1, d=8), m, Setting(), costs=("time",)).as_json()
    inside = sorted(n for n in timed if 250 <= n <= 350)
    above = [n for n in timed if n > 350]
    assert row["n0_verdict"] == "tie" and row["measured_n0"] is None and row["n0_uncertainty"] is None
    assert row["n0_tie"] == [inside[0], inside[-1]] and row["n0_regret"] == pytest.approx(0.01, abs=1e-9)
    assert row["n0_range"] == [max(n for n in timed if n < 250) + 1, min(above) if above else inside[-1]]
    assert judge(row, lambda v, n: [], lambda v: [], None)["n0_standing"] == "stands"  # an answer, not a failure


def test_a_busy_machine_with_the_same_timings_still_declines(tmp_path, monkeypatch) -> None:
    import attn_cost.profilers.measure.profile as prof

    timer, _ = tie_timer(discarded=True)
    monkeypatch.setattr(prof, "time_cases", timer)
    m = Measurer("cpu", ResultStore(fingerprint("cpu"), tmp_path), repeats=3)
    row = profile_pair(*PAIR, Sizes(N=1, d=8), m, Setting(), costs=("time",)).as_json()
    assert row["n0_verdict"] in ("unsteady", "inconsistent") and row["measured_n0"] is None
    assert row["n0_tie"] is None and row["n0_range"] is None and row["n0_regret"] is None


def test_a_clear_crossing_is_found_as_before_and_is_no_tie(tmp_path, monkeypatch) -> None:
    """A = N², B = 300·N (no noise): B overtakes A at N = 300 (independent arithmetic)."""
    import attn_cost.profilers.measure.profile as prof

    monkeypatch.setattr(prof, "time_cases", _fake_timer({PAIR[0]: lambda n: n * n, PAIR[1]: lambda n: 300 * n}))
    m = Measurer("cpu", ResultStore(fingerprint("cpu"), tmp_path), repeats=3)
    row = profile_pair(*PAIR, Sizes(N=1, d=8), m, Setting(), costs=("time",)).as_json()
    assert row["n0_verdict"] == "found" and abs(row["measured_n0"] - 300) <= row["n0_uncertainty"] < 30
    assert row["n0_tie"] is None and row["n0_range"] is None and row["n0_regret"] is None


def test_a_tie_is_shown_and_agrees_with_a_crossing_inside_its_range() -> None:
    tie = {"a": "x", "b": "y", "n0_verdict": "tie", "measured_n0": None, "n0_tie": [250, 292], "n0_range": [247, 292]}
    assert cell(None, None, "tie", "stands", tie=tie["n0_tie"]) == "tie 250–292"
    assert cell(None, None, "tie", "stands", tie=tie["n0_tie"], compact=True) == "tie 250–292"
    split = "split by the timer's switch: timings from 186 to 291 µs"
    assert cell(None, None, "tie", split, tie=[3200, 3200]) == "tie 3,200 (not standing: split by the timer's switch)"
    inside = {"a": "x", "b": "y", "n0_verdict": "found", "measured_n0": 300.0, "n0_uncertainty": 10.0}  # 290-310
    outside = {**inside, "measured_n0": 320.0}  # 310-330
    assert judge(tie, lambda v, n: [], lambda v: [], None, [[tie, inside]])["n0_standing"] == "stands"
    said = judge(tie, lambda v, n: [], lambda v: [], None, [[tie, outside]])["n0_standing"]
    assert said == "verdict changed on re-measurement: tie 250–292 (N0 247–292), then found 320 ± 10"


# -- a unit measured twice through one store --------------------------------------------------------


def _fake_timer(costs: dict):
    """`time_cases` returning each variant's cost(N) in nanoseconds, no noise."""
    from attn_cost.profilers.measure.timing import TimeStats

    def timer(cases, repeats, warmup, **kwargs):
        return [TimeStats(*(costs[c.variant](c.sizes.N) * 1e-9,) * 5, repeats, warmup) for c in cases]

    return timer


def test_a_verdict_that_changes_on_re_measurement_says_so(tmp_path, monkeypatch) -> None:
    """First A = N², B = 300·N (found near 300), then B = 5,000·N (found near 5,000) through the same store: the
    second row carries the first verdict, and the unit does not stand."""
    import attn_cost.profilers.measure.profile as prof

    store = ResultStore(fingerprint("cpu"), tmp_path)
    monkeypatch.setattr(prof, "time_cases", _fake_timer({PAIR[0]: lambda n: n * n, PAIR[1]: lambda n: 300 * n}))
    first = profile_pair(*PAIR, Sizes(N=1, d=8), Measurer("cpu", store), Setting(), costs=("time",), replicates=2)
    assert first.speed.verdict == "found" and first.speed.earlier is None
    again = profile_pair(*PAIR, Sizes(N=1, d=8), Measurer("cpu", store), Setting(), costs=("time",), replicates=2)
    assert again.speed.earlier is None  # the same timings, the same verdict: nothing to say
    monkeypatch.setattr(prof, "time_cases", _fake_timer({PAIR[0]: lambda n: n * n, PAIR[1]: lambda n: 5000 * n}))
    store.reuse, store.session = False, {}  # time everything again
    second = profile_pair(*PAIR, Sizes(N=1, d=8), Measurer("cpu", store), Setting(), costs=("time",), replicates=2)
    row = second.as_json()
    assert row["n0_verdict"] == "found" and row["measured_n0"] == pytest.approx(5000, rel=0.02)
    assert row["n0_earlier"]["measured"] == pytest.approx(300, rel=0.02) and "this time found 5," in row["n0_earlier"][
        "note"]  # fmt: skip
    said = judge(row, lambda v, n: [], lambda v: [], None)
    assert said["n0_standing"].startswith("verdict changed on re-measurement: found 30") and ", then found 5," in said[
        "n0_standing"]  # fmt: skip
    other = profile_pair(*PAIR, Sizes(N=1, d=16), Measurer("cpu", store), Setting(), costs=("time",), replicates=2)
    assert other.speed.earlier is None  # another head dim is another unit


# -- the timer's switch and the launch-bound label --------------------------------------------------------


ROW = {"a": "x", "b": "y", "n0_verdict": "found", "measured_n0": 1000.0, "n0_uncertainty": 10.0,
       "n0_bracket": [990, 1010], "n0_lengths": [900, 990, 1010, 1111]}  # fmt: skip


def _times(table: dict[tuple[str, int], float]):
    return lambda v, n: [table[(v, n)]] if (v, n) in table else []


def test_timings_either_side_of_the_timer_switch_split_the_crossing() -> None:
    """Timer version 2 timed calls under 200 µs in blocks and longer ones one per event pair after a flush."""
    below = {(v, n): 150e-6 for v in "xy" for n in ROW["n0_lengths"]}
    assert judge(ROW, _times(below), lambda v: [], 2)["n0_standing"] == "stands"
    split = {**below, ("x", 1111): 205e-6}
    said = judge(ROW, _times(split), lambda v: [], 2)["n0_standing"]
    assert said.startswith("split by the timer's switch: timings from 150 to 205 µs, either side of 200 µs")
    assert judge(ROW, _times(split), lambda v: [], 3)["n0_standing"] == "stands"  # a timer without a switch


@pytest.mark.parametrize(("at_bracket", "bound"), [(180e-6, ["y"]), (250e-6, [])])
def test_a_variant_under_twice_its_floor_at_the_crossing_is_launch_bound(at_bracket: float, bound: list) -> None:
    """y's floor is its time at N = 100 (at most a quarter of the bracket's 990): 100 µs; at the bracket it takes
    180 µs (under twice the floor: launch-bound) or 250 µs (not); x grows from 10 µs to 500 µs."""
    table = {("x", 100): 10e-6, ("y", 100): 100e-6, ("x", 400): 20e-6, ("y", 400): 110e-6}
    table |= {("x", n): 500e-6 for n in (990, 1010)} | {("y", n): at_bracket for n in (990, 1010)}
    timed = lambda v: [100, 400, 990, 1010]  # noqa: E731
    said = judge(ROW, _times(table), timed, None)
    assert said == {"n0_standing": "stands", "n0_launch_bound": bound}
    nearer = lambda v: [400, 990, 1010]  # noqa: E731  only 400 is not a quarter of the bracket: no floor to judge by
    assert judge(ROW, _times(table), nearer, None)["n0_launch_bound"] == []


def test_the_cells_and_counts_say_the_standing() -> None:
    rows = [{"n0_standing": "stands", "n0_launch_bound": ["y"]}, {"n0_standing": "stands", "n0_launch_bound": []},
            {"n0_standing": "replicates disagree: crossings 1, 2; split by the timer's switch: timings from 1 to 2"},
            {"n0_standing": "replicates disagree: 1 crossing (5)"}]  # fmt: skip
    assert tally(rows) == (
        "2 of 4 units stand (1 of them launch-bound); 2 do not (replicates disagree in 2, split by the timer's "
        "switch in 1)"
    )
    assert standing_words(rows[2]["n0_standing"]) == "no: replicates disagree, split by the timer's switch"
    assert standing_words("stands", ["linear"]) == "yes, launch-bound (linear)"
    assert cell(2677.0, 995.0, "unsteady", rows[3]["n0_standing"]) == "2,677 ± 995 (not standing: replicates disagree)"
    assert cell(2677.0, 995.0, "unsteady", rows[3]["n0_standing"], ["y"], compact=True) == "2,677 ± 995 (✗, lb)"
    assert cell(None, None, "b-cheaper-throughout", "stands") == "B cheaper throughout"


# -- fitting and judging from records alone ----------------------------------------------------------------


def _records_file(tmp_path, monkeypatch, drop_replicates: bool = False, tie: bool = False):
    """A CPU's records of the TaylorShift pair at d = 8, 12, 16 with A = N², B = 300·N·d/8 (ns), as a results file:
    what `results export` writes. Memory: traced at two lengths per head dim (the fit needs two). `tie`: timed in the
    tie world of `tie_timer` instead (the same at every head dim)."""
    import attn_cost.profilers.measure.profile as prof

    costs = {PAIR[0]: lambda n: float(n * n), PAIR[1]: None}
    store = ResultStore(fingerprint("cpu"), tmp_path / "gpu-store")
    found = {}
    for d in (8, 12, 16):
        costs[PAIR[1]] = lambda n, d=d: 300.0 * n * d / 8
        monkeypatch.setattr(prof, "time_cases", tie_timer()[0] if tie else _fake_timer(dict(costs)))
        m = Measurer("cpu", store, repeats=3 if tie else 7)
        found[d] = profile_pair(*PAIR, Sizes(N=1, d=d), m, Setting(), costs=("time",), replicates=2)
        for n in (64, 128):
            for v in PAIR:
                m.memory(v, Sizes(N=n, d=d))
    records = [r for r in store.every().values() if not (drop_replicates and r.get("replicate"))]
    path = tmp_path / "measurements.jsonl"
    with path.open("w", encoding="utf-8") as out:
        write_jsonl(records, out)
    return path, found


def _forbid_timing(monkeypatch) -> None:
    import attn_cost.profilers.measure.profile as prof

    def no(*args, **kwargs):
        raise AssertionError("validate --records timed something")

    monkeypatch.setattr(prof, "time_cases", no)
    monkeypatch.setattr(prof, "traced_peak", no)


def test_validate_from_records_fits_and_judges_without_timing(cli, tmp_path, monkeypatch) -> None:
    path, found = _records_file(tmp_path, monkeypatch)
    _forbid_timing(monkeypatch)
    r = cli("validate", "--records", str(path), "--pair", ":".join(PAIR), "--fit-d", "8", "--fit-d", "16", "--d", "12",
            "--json")  # fmt: skip
    assert r.code == 0, r.err
    data = r.json()
    rows = {x["d"]: x for x in data["results"]}
    for d in (8, 12, 16):  # the stored search's bracket and replicates give the crossing it found
        assert rows[d]["n0_verdict"] == "found" and rows[d]["n0_standing"] == "stands"
        assert rows[d]["measured_n0"] == round(found[d].speed.measured, 1)
    assert rows[12]["measured_n0"] == pytest.approx(300 * 12 / 8, rel=0.02)  # A = B at N = 300·d/8
    assert "nothing timed" in data["made"] and data["saved_to"] and data["left_out"] == []
    shown = cli("crossover", "--pair", ":".join(PAIR), "--d", "12", "--device", data["slug"], "--json")
    assert shown.code == 0, shown.err
    (row,) = shown.json()["results"]
    assert row["measured_n0"] == rows[12]["measured_n0"] and row["n0_standing"] == "stands"


def test_validate_and_crossover_device_show_a_tie_read_from_records(cli, tmp_path, monkeypatch) -> None:
    """Records taken in the tie world: `validate --records` judges the stored search and replicates a tie that
    stands, keeps it in the device profile, and `crossover --device` and the report show it in their measured N0
    columns."""
    path, found = _records_file(tmp_path, monkeypatch, tie=True)
    _forbid_timing(monkeypatch)
    r = cli("validate", "--records", str(path), "--pair", ":".join(PAIR), "--fit-d", "8", "--fit-d", "16", "--d", "12",
            "--json")  # fmt: skip
    assert r.code == 0, r.err
    data = r.json()
    row = next(x for x in data["results"] if x["d"] == 12)
    live = found[12].speed
    assert live.verdict == "tie" and row["n0_verdict"] == "tie" and row["n0_standing"] == "stands"
    assert row["n0_tie"] == list(live.tie) and row["n0_range"] == list(live.n0_range) and row["measured_n0"] is None
    table = cli("validate", "--records", str(path), "--pair", ":".join(PAIR), "--fit-d", "8", "--fit-d", "16", "--d",
                "12", "--no-save")  # fmt: skip
    assert table.code == 0 and f"tie {live.tie[0]}–{live.tie[1]}" in table.out
    shown = cli("crossover", "--pair", ":".join(PAIR), "--d", "12", "--device", data["slug"], "--json")
    (crossing,) = shown.json()["results"]
    assert crossing["n0_verdict"] == "tie" and crossing["n0_tie"] == row["n0_tie"] and crossing["n0_regret"] > 0
    terminal = cli("crossover", "--pair", ":".join(PAIR), "--d", "12", "--device", data["slug"], env={"COLUMNS": "80"})
    assert f"tie {live.tie[0]}–{live.tie[1]}" in terminal.out and "either as fast" in " ".join(terminal.out.split())
    page = tmp_path / "report.html"
    made = cli("report", "--html", str(page), "--pair", ":".join(PAIR), "--d", "12", "--device", data["slug"])
    assert made.code == 0, made.err
    assert page.read_text(encoding="utf-8").count(f"<td>tie {live.tie[0]}–{live.tie[1]}</td>") == 2  # both tables


def test_validate_from_records_without_replicates_says_the_crossover_is_unsteady(cli, tmp_path, monkeypatch) -> None:
    path, _ = _records_file(tmp_path, monkeypatch, drop_replicates=True)
    _forbid_timing(monkeypatch)
    r = cli("validate", "--records", str(path), "--pair", ":".join(PAIR), "--pair", "softmax:linear", "--fit-d", "8",
            "--fit-d", "16", "--d", "12", "--json", "--no-save")  # fmt: skip
    assert r.code == 0, r.err
    data = r.json()
    for row in data["results"]:
        assert row["n0_verdict"] == "unsteady" and "1 crossing" in row["n0_standing"]
    assert [line for line in data["left_out"] if line.startswith("softmax vs linear at d = 8: no stored timings")]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--records", "X", "--from-store"], "give one"),
        (["--records", "X", "--gpu"], "--gpu asks for a measurement"),
        (["--device", "cpu-x"], "give them with --records FILE or --from-store"),
        (["--from-store"], "give --device"),
        (["--from-store", "--device", "cuda-nowhere-000000"], "no records of the device cuda-nowhere-000000"),
    ],
)
def test_records_options_that_do_not_fit_are_one_line(cli, args: list[str], says: str) -> None:
    r = cli("validate", *args)
    assert r.code == 2 and says in r.err and len(r.err.strip().splitlines()) == 1


def test_a_records_file_of_several_devices_needs_a_device(cli, tmp_path, monkeypatch) -> None:
    path, _ = _records_file(tmp_path, monkeypatch)
    lines = path.read_text().splitlines()
    other = json.loads(lines[0])
    other["device"] = {**other["device"], "name": "Another CPU"}
    path.write_text("\n".join([*lines, json.dumps(other)]) + "\n")
    r = cli("validate", "--records", str(path), "--no-save")
    assert r.code == 2 and "holds records of 2 devices: give --device" in r.err


def test_a_campaign_row_that_was_measured_before_makes_the_re_read_not_stand() -> None:
    """The next GPU run's summary rows carry `n0_earlier` where `profile_pair` saw the unit changed; the re-read of
    its records (found 100 ± 5) then does not stand, and two rows of one run that disagree likewise."""
    row = {"a": "x", "b": "y", "n0_verdict": "found", "measured_n0": 100.0, "n0_uncertainty": 5.0}
    changed = {**row, "n0_earlier": {"verdict": "b-cheaper-throughout", "measured": None, "uncertainty": None}}
    said = judge(row, lambda v, n: [], lambda v: [], None, [[changed]])["n0_standing"]
    assert said == "verdict changed on re-measurement: b-cheaper-throughout, then found 100 ± 5"
    apart = {**row, "measured_n0": 120.0}  # 20 apart, intervals of 5 each: they do not overlap
    assert judge(row, lambda v, n: [], lambda v: [], None, [[row, apart]])["n0_standing"].startswith("verdict changed")
    near = {**row, "measured_n0": 108.0}  # within 5 + 5
    assert judge(row, lambda v, n: [], lambda v: [], None, [[row, near]])["n0_standing"] == "stands"


def test_lengths_near_the_crossing_that_lean_either_way_by_a_few_per_cent_are_a_tie() -> None:
    """Near a crossing a length can come out A or B against the order of N: replicates re-timed at 99, 101 and 111
    agree so closely (by hand: the means of tB/tA there are 0.98, 1.02 and 1.01, pooled spread of the log ratios
    about 0.003 over 6 degrees of freedom, half-widths about 0.004) that each is significant: B at 99 before A at 101
    and 111. A leads up to 90, B from 140, so the stretch is 99 to 111 with a regret of 2 %: either is as fast
    there. The same lengths off by 30 % are no tie (`TIE_REGRET`, a quarter)."""
    one = {"runs": 7, "discarded": 0, "noise": 0.001}

    def world(lean: float) -> list[Probe]:
        search = [Probe(n, 1.0, r, **one) for n, r in ((80, 1.3), (90, 1.2), (140, 0.7))]
        centre = {99: 1 - lean, 101: 1 + lean, 111: 1 + lean / 2}
        wiggles = (0.997, 1.003, 1.0)
        return search + [Probe(n, 1.0, c * w, **one) for n, c in centre.items() for w in wiggles]

    tie = tie_of(world(0.02))
    assert tie is not None and tie.stretch == (99, 111) and tie.n0_range == (91, 140)
    assert tie.regret == pytest.approx(0.02, abs=1e-4)
    assert tie_of(world(0.3)) is None
