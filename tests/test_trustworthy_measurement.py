"""Disturbance detection on fed clock samples, the checks before a crossover is called found, and the
SQLite store under concurrent writers and kills (real processes, no real load)."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from attn_cost.costmodel.crossover import Setting
from attn_cost.costmodel.errors import UserError
from attn_cost.profilers.measure.search import Probe, crossing_of, replicate_interval, trend_breaks
from attn_cost.profilers.measure.sizes import Sizes
from attn_cost.profilers.measure.timing import Clocks, Detector, DisturbedError, Seen, TimeStats, time_cases
from attn_cost.profilers.store.store import ResultStore, open_database

# -- the detector, fed samples -------------------------------------------------------------------


def _pair(wall: float, cpu: float, wait: float = 0.0, steal: float = 0.0) -> tuple[Clocks, Clocks]:
    """Two readings `wall` apart in which the process's threads ran `cpu`."""
    return Clocks(100.0, 9.0, 1.0, 20.0), Clocks(100.0 + wall, 9.0 + cpu, 1.0 + wait, 20.0 + steal)


def test_a_quiet_call_is_not_disturbed() -> None:
    assert not Detector().judge(*_pair(0.010, 0.0099, wait=0.0001)).disturbed
    assert not Detector().judge(*_pair(0.0001, 0.00009, wait=0.0001)).disturbed  # wake-up latency of workers


@pytest.mark.parametrize(
    "sample, reason",
    [
        (_pair(0.010, 0.010, wait=0.004), "run-queue wait"),  # a 4 ms scheduler tick spent waiting
        (_pair(0.012, 0.002), "CPU time below wall time"),  # descheduled, without schedstat
        (_pair(0.100, 0.099, steal=0.05), "steal"),  # five 10 ms ticks stolen by the hypervisor
    ],
)
def test_each_sign_of_disturbance_is_seen(sample, reason) -> None:
    v = Detector().judge(*sample)
    assert v.disturbed and reason in v.reasons


def test_a_timing_thread_waiting_on_a_worker_thread_is_not_a_disturbance() -> None:
    # A parallel reduction on this 2-core VM, quiet: the worker did the work while the timing thread slept
    # at the barrier (44 ms wall, 7.6 ms of the timing thread's CPU, 44 ms of the process's, which is judged).
    assert not Detector().judge(*_pair(0.044, 0.0438, wait=0.0002)).disturbed


def test_one_steal_tick_in_a_long_call_is_not_a_disturbance() -> None:
    assert not Detector().judge(*_pair(1.0, 0.99, steal=0.01)).disturbed


class _Case:
    """A stand-in for profilers.measure.cases.Case: runs nothing."""

    device = "cpu"
    variant = "fake"

    def make_inputs(self) -> list:
        return []

    def run(self, inputs: list) -> None:
        return None


def _fed(disturbed_calls: int) -> tuple[Detector, list[float]]:
    """A detector whose first `disturbed_calls` calls see a 4 ms run-queue wait, the rest quiet."""
    state = {"calls": 0, "t": 0.0}
    slept: list[float] = []

    def clock() -> Clocks:
        call, half = divmod(state["calls"], 2)
        state["calls"] += 1
        if half:  # the reading after a call: 1 ms later
            wait = 0.004 if call < disturbed_calls else 0.0
            return Clocks(state["t"] + 0.001, state["t"] + 0.001, state["t"] + wait)
        state["t"] += 1.0
        return Clocks(state["t"], state["t"], state["t"])

    return Detector(clock=clock, sleep=slept.append), slept


def test_disturbed_rounds_are_thrown_away_and_timed_again_after_a_back_off() -> None:
    detector, slept = _fed(disturbed_calls=5)  # rounds 1-2 fully, round 3 half disturbed
    seen = Seen()
    a, b = time_cases([_Case(), _Case()], repeats=5, warmup=1, detector=detector, seen=seen)
    assert a.runs == b.runs == 5 and a.discarded == 3
    assert slept == [0.05, 0.1, 0.2]  # doubling back-off
    assert seen.calls == 16 and seen.disturbed == 5 and seen.reasons == {"run-queue wait": 5}


def test_a_device_that_stays_disturbed_raises_with_what_was_seen() -> None:
    detector, slept = _fed(disturbed_calls=10**6)
    with pytest.raises(DisturbedError) as stop:
        time_cases([_Case(), _Case()], repeats=3, warmup=0, detector=detector)
    message = str(stop.value)
    assert "stayed disturbed" in message and "\n" not in message and "run-queue wait" in message
    assert stop.value.seen["disturbed"] == stop.value.seen["calls"] == 2 * (3 * 3 + 1)
    assert max(slept) == detector.max_backoff_s


def test_a_batch_timed_by_a_harness_is_watched_as_a_whole() -> None:
    from attn_cost.profilers.measure.timing import watched_batch

    detector, slept = _fed(disturbed_calls=1)  # the first batch waited 4 ms for a CPU in 1 ms of wall time
    batches = []

    def harness() -> list[TimeStats]:
        batches.append(1)
        return [TimeStats(1e-3, 1e-3, 1e-3, 1e-3, 1e-3, 7, 2)]

    (stats,) = watched_batch(harness, detector, None, "cuda")
    assert len(batches) == 2 and stats.discarded == 7 and slept == [0.05]
    always, _ = _fed(disturbed_calls=10**6)
    with pytest.raises(DisturbedError, match="cuda host stayed disturbed"):
        watched_batch(harness, always, None, "cuda")
    assert len(batches) == 2 + always.retries + 1


@pytest.mark.parametrize(
    ("call_s", "sample"), [(1e-5, ["clock", "run", "run", "clock"]), (1.0, ["clock", "run", "clock"])]
)
def test_a_short_call_is_timed_after_an_untimed_call_of_its_own(call_s, sample, monkeypatch) -> None:
    """Between the detector's reads and the timed call comes an untimed call of the same case when the case is
    shorter than SETTLE_S (so the timed one does not pay for the reads with cold caches); a long case is not
    called twice, and the untimed call lies inside the window the detector judges."""
    from attn_cost.profilers.measure import timing

    events: list[str] = []
    now = {"t": 0.0}

    class Case(_Case):
        def run(self, inputs: list) -> None:
            events.append("run")
            now["t"] += call_s

    def clock() -> Clocks:
        events.append("clock")
        return Clocks(now["t"], now["t"], 0.0)

    monkeypatch.setattr(timing.time, "perf_counter", lambda: now["t"])
    (stats,) = time_cases([Case()], repeats=2, warmup=1, detector=Detector(clock=clock))
    assert events == ["run"] + 2 * sample and stats.runs == 2 and stats.median == pytest.approx(call_s)


def test_without_a_detector_every_run_is_kept() -> None:
    (stats,) = time_cases([_Case()], repeats=4, warmup=0, detector=None)
    assert stats.runs == 4 and stats.discarded == 0


# -- checks before a crossover is called found ---------------------------------------------------


def test_a_time_that_falls_as_n_grows_is_a_trend_break() -> None:
    probes = [Probe(100, 1.0, 2.0, 0, 0.01, 0.01), Probe(200, 4.0, 4.0, 0, 0.01, 0.01), Probe(400, 3.0, 8.0, 0, 0.01)]
    assert trend_breaks(probes) == [200, 400]  # A fell from 4.0 to 3.0
    noisy = [Probe(100, 1.0, 2.0, 0, 0.2, 0.0), Probe(200, 0.9, 4.0, 0, 0.2, 0.0)]
    assert trend_breaks(noisy) == []  # within its noise


def test_the_crossing_of_replicates_comes_from_a_line_through_the_relative_differences() -> None:
    # (a - b) / a = (n - 1000) / 2000 exactly: a = 2000, b = 3000 - n
    points = [Probe(n, 2000.0, 3000.0 - n) for n in (900, 1000, 1100, 1200)]
    assert crossing_of(points) == pytest.approx(1000.0)
    assert crossing_of([Probe(n, 2000.0, 1000.0 + n) for n in (900, 1100)]) is None  # B gets dearer: no crossing


def test_the_interval_covers_further_runs_at_its_level() -> None:
    """Each simulated run has its own drift (σ = 40 tokens) and noise (σ = 10); the interval of one run's
    five replicates must cover a new replicate about 95 % of the time (Student t prediction interval)."""
    rng = random.Random(7)
    inside = 0
    trials = 2000
    for _ in range(trials):
        values = [1400 + rng.gauss(0, 41.2) for _ in range(5)]
        centre, half = replicate_interval(values)
        inside += abs(1400 + rng.gauss(0, 41.2) - centre) <= half
    assert 0.92 <= inside / trials <= 0.99


def test_a_disturbed_device_gives_no_crossover_and_says_why(tmp_path, monkeypatch) -> None:
    import attn_cost.profilers.measure.profile as prof

    def disturbed(cases, repeats, warmup, **kwargs):
        raise DisturbedError("the cpu stayed disturbed: 31 of 31 timed runs disturbed", {"calls": 31})

    monkeypatch.setattr(prof, "time_cases", disturbed)
    m = prof.Measurer("cpu", ResultStore(_device(), tmp_path))
    row = prof.profile_pair(
        "taylorshift-direct", "taylorshift-efficient", Sizes(N=1, d=8), m, Setting(), costs=("time",)
    ).as_json()
    assert row["measured_n0"] is None and row["n0_uncertainty"] is None and row["n0_verdict"] == "disturbed"
    assert "stayed disturbed" in row["n0_note"] and row["speed"]["seen"] == {"calls": 31}
    assert ResultStore(_device(), tmp_path).records == {}  # nothing stored as good


@pytest.mark.parametrize(
    "slow_variant, slow_n, timings",
    [
        # B looks dearer at 584 once: a later, longer length shows B's time falling (a trend break)
        ("taylorshift-efficient", 584, 2),
        # A looks dearer at 146 once, the top of the bracket: the replicates disagree with it
        ("taylorshift-direct", 146, 4),  # first timing, two replicates, timed again
    ],
)
def test_a_point_that_breaks_the_trend_or_the_bracket_is_measured_again(
    tmp_path, monkeypatch, slow_variant, slow_n, timings
) -> None:
    """A = N², B = 300 N (no noise); the first timing of one variant at one length is 50× too slow."""
    import attn_cost.profilers.measure.profile as prof

    timed: list[int] = []

    def timer(cases, repeats, warmup, **kwargs):
        n = cases[0].sizes.N
        timed.append(n)
        cost = {"taylorshift-direct": n * n, "taylorshift-efficient": 300 * n}
        slow = 50 if n == slow_n and timed.count(n) == 1 else 1
        return [
            TimeStats(*(cost[c.variant] * 1e-9 * (slow if c.variant == slow_variant else 1),) * 5, repeats, 0)
            for c in cases
        ]

    monkeypatch.setattr(prof, "time_cases", timer)
    m = prof.Measurer("cpu", ResultStore(_device(), tmp_path), repeats=3)
    t = prof.profile_pair(
        "taylorshift-direct", "taylorshift-efficient", Sizes(N=1, d=8), m, Setting(), costs=("time",), replicates=2
    ).speed
    assert timed.count(slow_n) == timings
    assert t.verdict == "found" and abs(t.measured - 300) <= t.uncertainty and t.uncertainty < 30


# -- the SQLite store under concurrent writers and kills -----------------------------------------


def _device() -> dict:
    return {"kind": "cpu", "name": "Test CPU", "threads": 1, "torch": "2.13.0"}


WRITER = """
import sys
from attn_cost.profilers.store.store import ResultStore
root, tag, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = ResultStore({"kind": "cpu", "name": "Test CPU", "threads": 1, "torch": "2.13.0"}, root)
for i in range(count):
    store.add({"kind": "memory", "key": f"{tag}-{i}", "variant": "softmax", "scope": "core", "dtype": "fp32",
               "sizes": {"N": i + 1, "d": 8}, "memory": {"peak_bytes": i}, "status": "ok"})
    print(f"{tag}-{i}", flush=True)
"""


def _writers(root, processes: int, records: int) -> None:
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(root), f"w{p}", str(records)], stdout=subprocess.DEVNULL)
        for p in range(processes)
    ]
    assert [p.wait(timeout=300) for p in procs] == [0] * processes


def _only_the_database(root) -> None:
    open_database(root).close()  # the next open recovers the WAL of a killed writer, the close removes it
    assert sorted(p.name for p in root.iterdir()) == ["results.db"]
    con = sqlite3.connect(root / "results.db")
    assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    con.close()


@pytest.mark.integration  # real writer processes
def test_concurrent_writer_processes_lose_nothing(tmp_path) -> None:
    _writers(tmp_path, processes=4, records=50)
    assert open_database(tmp_path).count() == 200
    _only_the_database(tmp_path)


@pytest.mark.parametrize("error", ["database is locked", "disk I/O error"])
def test_switching_to_wal_is_retried_while_another_opener_holds_the_lock(tmp_path, monkeypatch, error) -> None:
    """Two processes switching a new database to WAL at once deadlock, and SQLite answers "database is locked"
    at once, without its busy timeout: the switch is tried again. Any other error is one line, as before."""
    real = sqlite3.connect
    tries = []

    class Contended:
        def __init__(self, con: sqlite3.Connection) -> None:
            self.con = con

        def execute(self, sql: str, *args):
            if sql.startswith("PRAGMA journal_mode") and len(tries) < 2:
                tries.append(sql)
                raise sqlite3.OperationalError(error)
            return self.con.execute(sql, *args)

        def __getattr__(self, name: str):
            return getattr(self.con, name)

    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: Contended(real(*a, **k)))
    if error != "database is locked":
        with pytest.raises(UserError, match=f"cannot open the results database .*: {error}$"):
            open_database(tmp_path)
        return
    db = open_database(tmp_path)
    assert len(tries) == 2 and db.con.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    db.close()


@pytest.mark.integration  # real writer processes
@pytest.mark.slow
def test_eight_writers_of_500_records_leave_4000(tmp_path) -> None:
    _writers(tmp_path, processes=8, records=500)
    assert open_database(tmp_path).count() == 4000
    _only_the_database(tmp_path)


def kill_loop(root, kills: int, seed: int = 0) -> dict:
    """SIGKILL a writer at random moments `kills` times; every record it reported committed must be there.
    (Shared with benchmarks/bench_store.py.)"""
    rng = random.Random(seed)
    committed: set[str] = set()
    for k in range(kills):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(root), f"k{k}", "100000"], stdout=subprocess.PIPE)
        fd = proc.stdout.fileno()
        os.set_blocking(fd, False)
        said = b""

        def read(fd: int = fd) -> bytes:
            try:
                return os.read(fd, 1 << 20)
            except BlockingIOError:
                return b""

        deadline = time.monotonic() + 60  # its start-up (imports) takes what the machine's load makes it
        while b"\n" not in said and proc.poll() is None and time.monotonic() < deadline:
            said += read()
            time.sleep(0.01)
        time.sleep(rng.random() * 0.3)  # a random moment of the write loop, once it is writing
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        while chunk := read():
            said += chunk
        lines = said.decode().split("\n")
        committed |= {line for line in lines[:-1] if line}  # a last line cut by the kill was not reported whole
        proc.stdout.close()
    db = open_database(root)
    keys = {rec["key"] for _, rec in db.select()}
    db.close()
    return {"kills": kills, "committed": len(committed), "lost": len(committed - keys), "stored": len(keys)}


@pytest.mark.integration  # real writer processes, killed
def test_killed_writers_leave_a_valid_database_and_no_debris(tmp_path) -> None:
    result = kill_loop(tmp_path, kills=10)
    assert result["committed"] > 0 and result["lost"] == 0
    _only_the_database(tmp_path)


def test_a_lookup_is_an_index_probe(tmp_path) -> None:
    db = open_database(tmp_path)
    plan = db.con.execute("EXPLAIN QUERY PLAN SELECT record FROM records WHERE device = ? AND key = ?", ("a", "b"))
    assert "USING INDEX records_by_key" in " ".join(str(row) for row in plan.fetchall())
    db.close()


def test_export_then_import_round_trips_every_record(tmp_path, cli) -> None:
    store = ResultStore(_device(), tmp_path / "a")
    for i in range(5):
        key = f"memory|softmax|core|fp32|N={i + 1},d=8"  # made of its fields: an imported record must be
        store.add({**json.loads(WRITER_RECORD), "key": key, "sizes": {"N": i + 1, "d": 8}})
    store.close()
    out = cli("results", "export", "--store", str(tmp_path / "a"))
    assert out.code == 0, out.err
    (tmp_path / "x.jsonl").write_text(out.out)
    imported = cli("results", "import", str(tmp_path / "x.jsonl"), "--store", str(tmp_path / "b"))
    assert imported.code == 0, imported.err
    again = cli("results", "export", "--store", str(tmp_path / "b"))
    assert sorted(again.out.splitlines()) == sorted(out.out.splitlines()) and len(out.out.splitlines()) == 5


WRITER_RECORD = json.dumps(
    {
        "kind": "memory",
        "variant": "softmax",
        "scope": "core",
        "dtype": "fp32",
        "memory": {"peak_bytes": 1},
        "status": "ok",
    }
)


# -- results commands and odd paths --------------------------------------------------------------


def _one_error(r) -> str:
    errors = [line for line in r.err.splitlines() if line.startswith("attn-cost: error:")]
    assert r.code == 2 and len(errors) == 1 and "Traceback" not in r.err, r.err
    return errors[0]


def test_odd_store_paths_are_one_line_each(cli, tmp_path) -> None:
    shipped = str(Path(__file__).parent / "data" / "results.jsonl")  # any valid results file: the tests' own
    assert "cannot create the results directory /proc/x" in _one_error(
        cli("results", "import", shipped, "--store", "/proc/x")
    )
    listed = cli("results", "ls", "--store", "/proc/x")  # reading creates nothing: an absent store is empty
    assert listed.code == 0 and "No stored measurements" in listed.out
    home = tmp_path / "home-file"
    home.write_text("")
    assert "cannot create the results directory" in _one_error(
        cli("results", "import", shipped, env={"ATTN_COST_HOME": str(home)})
    )
    (tmp_path / "s" / "results.db").mkdir(parents=True)
    assert "is a directory" in _one_error(cli("results", "ls", "--store", str(tmp_path / "s")))
    assert "is a directory" in _one_error(cli("results", "import", str(tmp_path / "s")))
    assert "cannot read" in _one_error(cli("results", "import", str(tmp_path / "missing.jsonl")))
    assert "--kind takes" in _one_error(cli("results", "ls", "--kind", "speed"))
    assert "needs a filter" in _one_error(cli("results", "rm"))
    assert "results import" in _one_error(cli("results", "ls", "--store", str(tmp_path / "old.jsonl")))


def test_ls_and_rm_with_filters(cli, tmp_path) -> None:
    store = ResultStore(_device(), tmp_path / "a")
    other = ResultStore({**_device(), "name": "Other CPU"}, tmp_path / "a")
    base = json.loads(WRITER_RECORD)
    for i in range(4):
        store.add(
            {**base, "key": f"s{i}", "variant": "softmax" if i % 2 else "linear", "sizes": {"N": 16, "d": 8 * i + 8}}
        )
    other.add({**base, "key": "o", "sizes": {"N": 16, "d": 8}})
    store.close(), other.close()
    where = ("--store", str(tmp_path / "a"))
    listed = cli("results", "ls", *where, "--json")
    assert listed.code == 0 and listed.json()["count"] == 5 and len(listed.json()["results"]) == 5
    assert cli("results", "ls", *where, "--variant", "softmax", "--json").json()["count"] == 3  # 2 + other
    assert cli("results", "ls", *where, "--device", "other", "--json").json()["count"] == 1
    assert cli("results", "ls", *where, "--d", "16", "--json").json()["results"][0]["key"] == "s1"
    table = cli("results", "ls", *where, env={"COLUMNS": "80"})
    assert table.code == 0 and "Test CPU" in table.out and "Other CPU" in table.out and "5 records" in table.out
    removed = cli("results", "rm", *where, "--device", "Test CPU", "--variant", "linear", "--json")
    assert removed.code == 0 and removed.json()["removed"] == 2
    left = cli("results", "ls", *where, "--json").json()["results"]
    assert sorted(r["key"] for r in left) == ["o", "s1", "s3"]


# -- stored timings a slow spell moved --------------------------------------------------------------------


def test_a_stored_timing_off_its_neighbours_trend_is_timed_again_and_the_faster_kept(tmp_path) -> None:
    from attn_cost.profilers.measure.machine import prepare
    from attn_cost.profilers.measure.profile import Measurer
    from attn_cost.profilers.workflow.validating import recheck_spikes

    measurer = Measurer("cpu", ResultStore(prepare("cpu"), tmp_path / "store", shipped=False))
    law = {n: 1e-5 * (n / 64) ** 2 for n in (64, 128, 256, 512, 1024)}  # t ∝ N², as a product's time grows

    def stored(n: int) -> float:
        return measurer.store.get(measurer.key("time", "softmax", Sizes(N=n, d=8)))["time"]["median"]

    def store(times: dict[int, float]) -> None:
        for n, t in times.items():
            stats = TimeStats(t, t, t, t, t, 7, 2).as_json()
            key = measurer.key("time", "softmax", Sizes(N=n, d=8))
            measurer._record("time", key, "softmax", Sizes(N=n, d=8), {"time": stats, "status": "ok"})

    timed_again: list[int] = []
    now = {"factor": 1.0}

    def timed(variants, sizes, runs):  # what the machine times now: the law, times a factor
        timed_again.append(sizes.N)
        t = law[sizes.N] * now["factor"]
        return [TimeStats(t, t, t, t, t, runs, 2)], ["ok"]

    measurer._timed = timed
    store(law)
    assert recheck_spikes(measurer, ["softmax"], [8], Sizes(N=1, d=8)) == 0 and timed_again == []
    store({256: 3 * law[256], 512: 3 * law[512]})  # a slow spell while 256 and 512 were timed
    assert recheck_spikes(measurer, ["softmax"], [8], Sizes(N=1, d=8)) == len(timed_again) == 2
    assert sorted(timed_again) == [256, 512]  # the robust trend is not fooled by two slow neighbours
    assert [stored(n) for n in law] == pytest.approx(list(law.values()))
    timed_again.clear()
    store({128: 3 * law[128]})
    factors = iter([2.0, 1.0])  # the spell outlasts the first re-timing: the second pass catches it
    measurer._timed = lambda v, sizes, runs: (now.update(factor=next(factors)), timed(v, sizes, runs))[1]
    assert recheck_spikes(measurer, ["softmax"], [8], Sizes(N=1, d=8)) == 2 and timed_again == [128, 128]
    assert stored(128) == pytest.approx(law[128])
    measurer._timed = timed
    now["factor"] = 1.5  # timed again during a spell: the stored, faster timing stays
    measurer.time_again("softmax", Sizes(N=512, d=8))
    assert stored(512) == pytest.approx(law[512])


def test_the_cpu_timer_is_part_of_the_device_name_where_recorded() -> None:
    """Timings of the cold-start timer are never reused as settled ones: the timer is in the fingerprint and the
    name. Devices fingerprinted before it was recorded (the shipped files) keep the names they ship under."""
    from pathlib import Path

    from attn_cost.profilers.measure.machine import CPU_TIMER, TIMER_VERSION, prepare, slug
    from attn_cost.profilers.measure.timing import SETTLE_S

    here = prepare("cpu")
    assert f"{1e3 * SETTLE_S:g} ms" in here[CPU_TIMER] and here[TIMER_VERSION] == 1
    older = {k: v for k, v in here.items() if k not in (CPU_TIMER, TIMER_VERSION)}
    assert slug({**here, TIMER_VERSION: 2}) != slug(here)  # a new CPU timer version: a new name
    assert slug(older) != slug(here) and slug(older).rsplit("-", 1)[0] == slug(here).rsplit("-", 1)[0]
    shipped = Path(__file__).parent.parent / "profilers" / "data" / "devices"
    for path in shipped.glob("*.json"):
        profile = json.loads(path.read_text(encoding="utf-8"))
        dtype = profile.get("dtype", "fp32")  # a further dtype's profile is named <slug>-<dtype> (the campaign's)
        assert slug(profile["device"]) + ("" if dtype == "fp32" else f"-{dtype}") == path.stem


def test_what_a_killed_creator_left_is_removed_and_nothing_else(tmp_path) -> None:
    """A process killed while creating the database leaves its temporary files (named with its process id); the
    next writer removes them, and leaves alone a live process's and any file not named so."""
    import os

    dead = [tmp_path / f".results.db.999999999.k3x.tmp{s}" for s in ("", "-journal")]  # beyond any pid_max
    alive = tmp_path / f".results.db.{os.getpid()}.a1b.tmp"
    mine = tmp_path / ".results.db.notes.tmp"
    for f in (*dead, alive, mine):
        f.write_text("x")
    open_database(tmp_path).close()
    assert not any(f.exists() for f in dead) and alive.exists() and mine.read_text() == "x"
