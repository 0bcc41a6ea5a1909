"""The result store under concurrent writers, kills and size: the figures issue 10 asks for.

    python benchmarks/bench_store.py                      # 8 writers x 500, 30 kills, 100,000 records
    python benchmarks/bench_store.py --writers 2 --records 50 --kills 3 --size 2000   # a smoke run

Prints: records stored after W concurrent writer processes of R records each (expected W x R) and
their wall time; for K SIGKILLs at random moments of a write loop, the records each killed writer
had reported committed that are missing afterwards (expected 0), files left beside the database
after the next open (expected none), and SQLite's integrity check; then the median time of one
lookup by key in a store of --size records.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from attn_cost.profilers.store.store import Record, ResultStore, open_database

DEVICE = {"kind": "cpu", "name": "Bench CPU", "threads": 1, "torch": "2.13.0"}
WRITER = """
import sys
from attn_cost.profilers.store.store import ResultStore
root, tag, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = ResultStore({"kind": "cpu", "name": "Bench CPU", "threads": 1, "torch": "2.13.0"}, root)
for i in range(count):
    store.add({"kind": "memory", "key": f"{tag}-{i}", "variant": "softmax", "scope": "core", "dtype": "fp32",
               "sizes": {"N": i + 1, "d": 8}, "memory": {"peak_bytes": i}, "status": "ok"})
    print(f"{tag}-{i}", flush=True)
"""


def writers(root: Path, processes: int, records: int) -> dict:
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(root), f"w{p}", str(records)], stdout=subprocess.DEVNULL)
        for p in range(processes)
    ]
    codes = [p.wait() for p in procs]
    db = open_database(root)
    stored = db.count()
    db.close()
    return {"writers": processes, "each": records, "stored": stored, "exit_codes": sorted(set(codes)),
            "seconds": round(time.perf_counter() - t0, 2)}  # fmt: skip


def kills(root: Path, count: int, seed: int = 0) -> dict:
    rng = random.Random(seed)
    committed: set[str] = set()
    for k in range(count):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(root), f"k{k}", "1000000"], stdout=subprocess.PIPE, text=True
        )
        os.set_blocking(proc.stdout.fileno(), False)
        time.sleep(0.3 + rng.random() * 0.7)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        committed |= set((proc.stdout.read() or "").split())
        proc.stdout.close()
    db = open_database(root)
    keys = {rec["key"] for _, rec in db.select()}
    db.close()
    con = sqlite3.connect(root / "results.db")
    integrity = con.execute("PRAGMA integrity_check").fetchone()[0]
    con.close()
    debris = sorted(p.name for p in root.iterdir() if p.name != "results.db")
    return {"kills": count, "committed": len(committed), "lost": len(committed - keys), "debris": debris,
            "integrity": integrity}  # fmt: skip


def lookups(root: Path, size: int, probes: int = 2000) -> dict:
    db = open_database(root)
    at = "2026-01-01T00:00:00+00:00"
    base = {"schema": 1, "kind": "memory", "variant": "softmax", "scope": "core", "dtype": "fp32", "device": DEVICE,
            "memory": {"peak_bytes": 1}, "status": "ok", "at": at}  # fmt: skip
    t0 = time.perf_counter()
    db.put_many(Record.check({**base, "key": f"r{i}", "sizes": {"N": i + 1, "d": 8}}) for i in range(size))
    fill = time.perf_counter() - t0
    db.close()
    store = ResultStore(DEVICE, root, shipped=False)
    keys = [f"r{random.randrange(size)}" for _ in range(probes)]
    times = []
    for key in keys:
        t = time.perf_counter()
        assert store.get(key) is not None
        times.append(time.perf_counter() - t)
    store.close()
    return {
        "records": size,
        "fill_seconds": round(fill, 2),
        "lookup_median_us": round(1e6 * statistics.median(times), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--records", type=int, default=500)
    ap.add_argument("--kills", type=int, default=30)
    ap.add_argument("--size", type=int, default=100_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print("concurrent writers:", writers(Path(tmp) / "w", args.writers, args.records))
        print("SIGKILL loop:      ", kills(Path(tmp) / "k", args.kills))
        print("lookups:           ", lookups(Path(tmp) / "l", args.size))


if __name__ == "__main__":
    main()
