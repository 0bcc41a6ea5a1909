"""Crossover search on synthetic costs, and the result store's resume and corruption handling."""

from __future__ import annotations

import json
import random

import pytest
from attn_cost.costmodel.crossover import Setting
from attn_cost.costmodel.errors import UserError
from attn_cost.profilers.measure.machine import fingerprint, slug
from attn_cost.profilers.measure.profile import Measurer, profile_pair
from attn_cost.profilers.measure.search import Probe, find_transition
from attn_cost.profilers.measure.sizes import Sizes
from attn_cost.profilers.store.store import ResultStore, read_records

# -- search ----------------------------------------------------------------------------------


def _exact(a, b):
    return lambda n: Probe(n, float(a(n)), float(b(n)))


def test_exact_search_finds_the_integer_crossing_with_few_probes() -> None:
    # a = N², b = 100N + 7: b <= a from N = 101
    t = find_transition(
        _exact(lambda n: n * n, lambda n: 100 * n + 7), 90, n_max=10**6, max_probes=60, rel_tol=0, exact=True
    )
    assert t.verdict == "found" and t.measured == 101 and t.uncertainty == 0
    assert len(t.probes) <= 10


def test_exact_search_from_a_correct_prediction_needs_two_probes() -> None:
    t = find_transition(
        _exact(lambda n: n * n, lambda n: 100 * n + 7), 101, n_max=10**6, max_probes=60, rel_tol=0, exact=True
    )
    assert t.measured == 101 and len(t.probes) == 2


def test_a_scan_finds_the_last_of_two_crossings_whatever_the_start() -> None:
    """B is cheaper on [30, 60) and from 1,000 on: a search from N = 40 that assumed one crossing would stop at
    30; the scan over every octave bisects the last sign change, so N0 is 1,000."""
    b_cost = lambda n: 1.0 if 30 <= n < 60 or n >= 1000 else 3.0  # noqa: E731
    t = find_transition(_exact(lambda n: 2.0, b_cost), 40, n_min=2, n_max=16384, max_probes=30, rel_tol=0.01,
                        scan=True)  # fmt: skip
    assert t.verdict == "found" and t.bracket[1] - t.bracket[0] <= 10 and 990 <= t.bracket[1] <= 1010
    assert {2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384} <= {p.n for p in t.probes}


@pytest.mark.parametrize(("b", "verdict"), [(1.0, "b-cheaper-throughout"), (3.0, "a-cheaper-throughout")])
def test_always_and_never_are_measured_at_every_octave(b: float, verdict: str) -> None:
    t = find_transition(_exact(lambda n: 2.0, lambda n: b), 100, n_min=2, n_max=3000, max_probes=30, rel_tol=0.01,
                        scan=True)  # fmt: skip
    assert t.verdict == verdict
    assert [p.n for p in t.probes] == [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 3000]


def test_validate_scans_the_whole_range_it_judges(monkeypatch) -> None:
    """`validate` scores "always" and "never" verdicts: its searches scan every octave (profile's need not)."""
    from attn_cost.profilers.workflow import validating as val

    seen: list[dict] = []

    class StopError(Exception):
        pass

    def fake(*args, **kwargs):
        seen.append(kwargs)
        raise StopError

    monkeypatch.setattr(val, "profile_pair", fake)
    measurer = Measurer("cpu", None)  # never used: the search is replaced
    with pytest.raises(StopError):
        val.validate([("softmax", "linear")], [32], [8, 16], Sizes(N=1, d=1), measurer, Setting())
    assert seen[0]["scan"] is True


def test_noisy_search_brackets_the_true_crossing() -> None:
    rng = random.Random(1)
    true = 1234.0

    def compare(n: int) -> Probe:
        a = n * n * (1 + rng.gauss(0, 0.01))
        b = true * n * (1 + rng.gauss(0, 0.01))
        return Probe(n, a, b, noise=0.014)

    t = find_transition(compare, 300, n_max=10**6, max_probes=15, rel_tol=0.02)
    assert t.verdict == "found" and len(t.probes) <= 15
    lo, hi = t.bracket
    assert hi - lo <= 0.02 * lo + 1
    assert abs(t.measured - true) <= 3 * t.uncertainty + 1


def test_search_verdicts_when_there_is_no_crossing() -> None:
    cheaper = find_transition(_exact(lambda n: 2 * n, lambda n: n), 64, n_max=4096, max_probes=30, rel_tol=0.02)
    assert cheaper.verdict == "b-cheaper-throughout" and cheaper.measured is None
    dearer = find_transition(_exact(lambda n: n, lambda n: 2 * n), 64, n_max=4096, max_probes=30, rel_tol=0.02)
    assert dearer.verdict == "a-cheaper-throughout"
    budget = find_transition(_exact(lambda n: n, lambda n: 2 * n), 64, n_max=10**9, max_probes=5, rel_tol=0.02)
    assert budget.verdict == "budget" and len(budget.probes) == 5


def test_running_out_of_memory_counts_against_the_variant_that_did() -> None:
    # A runs out of memory from N = 500 on: B wins there
    t = find_transition(
        lambda n: Probe(n, None if n >= 500 else 1.0, 2.0), 64, n_max=10**5, max_probes=40, rel_tol=0, exact=True
    )
    assert t.verdict == "found" and t.measured == 500


# -- store -----------------------------------------------------------------------------------


@pytest.fixture
def store_dir(tmp_path):
    return tmp_path / "results"


def _key(tag: str, n: int = 16) -> str:
    """A record key as `record_key` makes it (kind|variant|scope|dtype|sizes), written out, with a tag after it."""
    return f"memory|softmax|core|fp32|N={n},d=8|{tag}"


def _record(tag: str, n: int = 16) -> dict:
    return {
        "kind": "memory",
        "key": _key(tag, n),
        "variant": "softmax",
        "scope": "core",
        "dtype": "fp32",
        "sizes": {"N": n, "d": 8},
        "memory": {"peak_bytes": 1},
        "status": "ok",
    }


def _legacy_line(device: dict, key: str) -> str:
    return json.dumps({**_record(key), "schema": 1, "device": device, "at": "2026-01-01T00:00:00+00:00"})


def test_records_survive_a_new_store_and_writes_leave_no_other_files(store_dir) -> None:
    device = fingerprint("cpu")
    store = ResultStore(device, store_dir)
    store.add(_record("k1"))
    store.add(_record("k2"))
    store.close()
    again = ResultStore(device, store_dir)
    assert set(again.records) >= {_key("k1"), _key("k2")} and again.get(_key("k1"))["sizes"] == {"N": 16, "d": 8}
    again.close()
    assert [p.name for p in store_dir.iterdir()] == ["results.db"]  # WAL and shared-memory files gone


def test_earlier_json_lines_files_are_migrated_once_and_torn_lines_reported(store_dir) -> None:
    device = fingerprint("cpu")
    store_dir.mkdir(parents=True)
    legacy = store_dir / f"{slug(device)}.jsonl"  # where an earlier version kept this device's results
    legacy.write_text(_legacy_line(device, "k1") + '\n{"schema": 1, "kind": "time", "key": "torn", "varia\n')
    first = ResultStore(device, store_dir)
    assert first.get(_key("k1")) is not None
    assert any("1 line skipped (not valid JSON" in w and "line 2" in w for w in first.warnings)
    assert any("imported 1 records" in w for w in first.warnings)
    first.close()
    legacy.write_text(legacy.read_text() + _legacy_line(device, "k2") + "\n")  # edited after the migration
    second = ResultStore(device, store_dir)
    assert second.warnings == [] and second.get(_key("k2")) is None  # read once only
    assert "torn" in legacy.read_text()  # the file itself is left as it was


def test_a_store_reads_only_the_files_it_is_told_to_and_its_own_earlier_files_once(tmp_path, cli) -> None:
    """`results import a.jsonl --store DIR/s.db` imports a.jsonl alone: a colleague's export and a JSON-lines file
    that is not attn-cost's lying in DIR are never read. `--store DIR` (DIR/results.db, the folder an earlier
    version kept `<device slug>.jsonl` in) imports such a file once, on its first open, and reads no other; a later
    open reads nothing in the folder, so a file it could not import is named once, not on every open."""
    device = fingerprint("cpu")
    folder = tmp_path / "DIR"
    folder.mkdir()
    asked = tmp_path / "a.jsonl"
    asked.write_text(_legacy_line(device, "asked") + "\n")
    colleague = "".join(_legacy_line(device, f"theirs{i}") + "\n" for i in range(5))
    (folder / "colleague.jsonl").write_text(colleague)
    (folder / "events.jsonl").write_text('{"event": "not attn-cost"}\n' * 50)

    def stored(store) -> set[str]:
        out = cli("results", "export", "--store", str(store))
        assert out.code == 0, out.err
        return {json.loads(line)["key"] for line in out.out.splitlines()}

    first = cli("results", "import", str(asked), "--store", str(folder / "s.db"))
    assert first.code == 0 and "colleague" not in first.err and "events" not in first.err, first.err
    assert stored(folder / "s.db") == {_key("asked")}

    (folder / f"{slug(device)}.jsonl").write_text(colleague.replace("theirs", "earlier"))  # an earlier version's
    (folder / "cpu-unreadable-0a1b2c.jsonl").write_text("named like one, not one\n")
    opened = cli("results", "import", str(asked), "--store", str(folder))
    assert opened.code == 0 and opened.err.count("cpu-unreadable-0a1b2c.jsonl") == 1, opened.err
    assert "colleague" not in opened.err and "events" not in opened.err
    assert stored(folder) == {_key("asked")} | {_key(f"earlier{i}") for i in range(5)}
    again = cli("results", "import", str(asked), "--store", str(folder))
    assert again.code == 0 and "cpu-unreadable" not in again.err and "imported 5" not in again.err, again.err


def test_a_file_that_is_not_a_results_file_is_an_error(tmp_path) -> None:
    bad = tmp_path / "x.jsonl"
    bad.write_text("hello\nworld\n")
    with pytest.raises(UserError, match="not an attn-cost results file"):
        read_records(bad)
    bad.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(UserError, match="not UTF-8"):
        read_records(bad)


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"device": None}, "'device'"),
        ({"status": None}, "'status'"),
        ({"time": None, "kind": "time"}, "'time'"),
        ({"sizes": "N=16,d=8"}, "'sizes'"),
        ({"status": "fine"}, "status 'fine'"),
    ],
)
def test_records_that_are_json_but_not_records_are_named_by_reason(tmp_path, change, reason) -> None:
    device = fingerprint("cpu")
    good = json.loads(_legacy_line(device, "k1"))
    bad = {k: v for k, v in {**good, **change}.items() if v is not None}
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    records, warnings = read_records(path)
    assert len(records) == 1 and len(warnings) == 1 and reason in warnings[0] and "line 2" in warnings[0]


def test_hundreds_of_bad_lines_make_one_warning_with_counts_and_line_numbers(tmp_path) -> None:
    device = fingerprint("cpu")
    path = tmp_path / "x.jsonl"
    bad = json.dumps({"schema": 1, "kind": "time"})
    path.write_text("\n".join([_legacy_line(device, "k1")] + [bad] * 300 + [_legacy_line(device, "k2")]) + "\n")
    records, warnings = read_records(path)
    assert len(records) == 2
    (warning,) = warnings
    assert "300 lines skipped" in warning and "lines 2-301" in warning


def test_records_of_another_device_stay_with_that_device(store_dir) -> None:
    device = fingerprint("cpu")
    other = {**device, "name": "Some Other CPU"}
    store_dir.mkdir(parents=True)
    lines = _legacy_line(other, "k9") + "\n" + _legacy_line(device, "k1") + "\n"
    (store_dir / f"{slug(device)}.jsonl").write_text(lines)
    mine = ResultStore(device, store_dir)
    assert _key("k9") not in mine.records and _key("k1") in mine.records
    assert ResultStore(other, store_dir).get(_key("k9")) is not None


def test_an_interrupted_profile_resumes_without_repeating_measurements(store_dir, monkeypatch) -> None:
    """Timings are synthetic (A = N², B = 300N, no noise) so the count of measurements is exact."""
    import attn_cost.profilers.measure.profile as prof
    from attn_cost.profilers.measure.timing import TimeStats

    calls = {"n": 0, "limit": 3}

    def fake_timer(cases, repeats, warmup, **kwargs):
        calls["n"] += 1
        if calls["n"] > calls["limit"]:
            raise KeyboardInterrupt
        n = cases[0].sizes.N
        cost = {"taylorshift-direct": n * n, "taylorshift-efficient": 300 * n}
        return [TimeStats(*(cost[c.variant] * 1e-9,) * 5, repeats, warmup) for c in cases]

    monkeypatch.setattr(prof, "time_cases", fake_timer)
    sizes = Sizes(N=1, d=8)
    pair = ("taylorshift-direct", "taylorshift-efficient")

    def run() -> tuple[Measurer, object]:
        m = Measurer("cpu", ResultStore(fingerprint("cpu"), store_dir), repeats=3)
        return m, profile_pair(*pair, sizes, m, Setting(), costs=("time",), replicates=2)

    with pytest.raises(KeyboardInterrupt):
        run()
    assert len(ResultStore(fingerprint("cpu"), store_dir).records) == 6  # three lengths, both variants, on disk

    calls.update(n=0, limit=10**9)
    _, result = run()
    assert result.speed.verdict == "found" and result.speed.bracket[0] < 300 <= result.speed.bracket[1]
    bracket_and_outside = 4  # re-timed twice at the end (the two replicates)
    assert calls["n"] == len(result.speed.probes) - 3 + 2 * bracket_and_outside  # nothing measured twice
    calls["n"] = 0
    third, again = run()
    assert calls["n"] == 0 and third.measured == 0 and again.speed.measured == result.speed.measured


def test_a_shipped_file_with_hundreds_of_foreign_records_warns_once(tmp_path, monkeypatch) -> None:
    import attn_cost.profilers.store.store as store_module
    from attn_cost.profilers.measure.machine import slug

    device = fingerprint("cpu")
    other = {**device, "name": "Some Other CPU"}
    lines = [_legacy_line(device, "k1")] + [_legacy_line(other, f"o{i}") for i in range(556)]
    (tmp_path / f"{slug(device)}.jsonl").write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(store_module, "SHIPPED", tmp_path)
    store = ResultStore(device, tmp_path / "results")
    assert store.get(_key("k1")) is not None and store.get(_key("o1")) is None
    assert store.warnings == [f"{tmp_path / slug(device)}.jsonl: 556 records of other devices ignored: lines 2-557"]
