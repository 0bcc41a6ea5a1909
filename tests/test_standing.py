"""Whether a measured crossover stands: the replicate rule, a verdict that changes on re-measurement, the timer's
switch inside a crossing, the launch-bound label, and fitting and judging from records alone (`validate --records`),
on synthetic timings whose crossings are known by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest
from attn_cost.costmodel.crossover import Setting
from attn_cost.profilers.measure.device import fingerprint
from attn_cost.profilers.measure.profile import Measurer, profile_pair, replicated
from attn_cost.profilers.measure.search import Probe, Transition, one_crossing, replicates_disagree, signs_of
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
    far = run(ns, lambda n: n * n, lambda n: 120 * n)  # crosses at 120: 20 % off
    near = run(ns, lambda n: n * n, lambda n: 100 * n)
    t = replicated(Transition("found", 100.0, 1.0, (99, 101)), ns, [near, far])
    assert t.verdict == "unsteady" and t.measured is None and len(t.replicates) == 3
    assert t.note.startswith("replicates disagree: crossings 100, ") and "10%" in t.note


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


def _records_file(tmp_path, monkeypatch, drop_replicates: bool = False):
    """A CPU's records of the TaylorShift pair at d = 8, 12, 16 with A = N², B = 300·N·d/8 (ns), as a results file:
    what `results export` writes. Memory: traced at two lengths per head dim (the fit needs two)."""
    import attn_cost.profilers.measure.profile as prof

    costs = {PAIR[0]: lambda n: float(n * n), PAIR[1]: None}
    store = ResultStore(fingerprint("cpu"), tmp_path / "gpu-store")
    found = {}
    for d in (8, 12, 16):
        costs[PAIR[1]] = lambda n, d=d: 300.0 * n * d / 8
        monkeypatch.setattr(prof, "time_cases", _fake_timer(dict(costs)))
        m = Measurer("cpu", store)
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
