"""A campaign on a cluster, through submitit: one job per device kind (Slurm partition) or per pair.

Each job runs `run_campaign` in its own folder, OUT/<label>/, with its own result store inside it
(OUT/<label>/store: SQLite on a shared file system is never written by two nodes at once), and
writes the usual campaign files there. The measurements of all jobs are merged afterwards with
`attn-cost results import OUT/*/measurements.jsonl`. submitit's `AutoExecutor` does the
submitting, the pickling of the job and the waiting; `cluster="local"` runs the same jobs as local
processes (how the tests run them), `cluster="slurm"` submits them with sbatch.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from attn_cost.costmodel.errors import UserError
from attn_cost.profilers.campaign.run import Plan, run_campaign

EXECUTORS = ("slurm", "local")
SPLITS = ("device", "pair")


@dataclass
class Submitted:
    """One submitted job: its label, folder and submitit job."""

    label: str
    out: Path
    job: Any
    """A submitit Job (submitit is the optional `cluster` extra: not imported here)."""

    @property
    def job_id(self) -> str:
        return str(getattr(self.job, "job_id", "?"))


def job_plans(plan: Plan, partitions: list[str], split: str) -> list[tuple[str, str | None, Plan]]:
    """(label, partition, plan) of every job: one per partition, or one per partition and pair."""
    if split not in SPLITS:
        raise UserError(f"--split takes {' or '.join(SPLITS)}, got {split!r}")
    out = Path(plan.out)
    jobs: list[tuple[str, str | None, Plan]] = []
    parts: list[str | None] = [*partitions] or [None]
    for part in parts:
        base = part or "local"
        groups = (
            [(base, list(plan.pairs))] if split == "device" else [(f"{base}-{a}-{b}", [(a, b)]) for a, b in plan.pairs]
        )
        for label, pairs in groups:
            folder = out / label
            jobs.append((label, part, replace(plan, out=str(folder), store=str(folder / "store"), pairs=pairs)))
    return jobs


def run_job(plan_json: dict) -> dict:
    """What a job runs (a module-level function, so that submitit can pickle it by name)."""
    return run_campaign(Plan.from_json(plan_json), sink=lambda line: print(line, file=sys.stderr, flush=True))


def submit(
    plan: Plan,
    partitions: list[str],
    *,
    executor: str = "slurm",
    split: str = "device",
    timeout_min: int = 60,
) -> list[Submitted]:
    """Submit every job of the plan; returns them without waiting."""
    if executor not in EXECUTORS:
        raise UserError(f"--executor takes {' or '.join(EXECUTORS)}, got {executor!r}")
    try:
        import submitit
    except ImportError:
        raise UserError("--slurm needs submitit: pip install 'attn-cost[cluster]'") from None
    folder = Path(plan.out) / "submitit"
    submitted = []
    for label, part, job_plan in job_plans(plan, partitions, split):
        ex = submitit.AutoExecutor(folder=folder, cluster=executor)
        params: dict = {"timeout_min": timeout_min, "name": f"attn-cost-{label}", "nodes": 1, "tasks_per_node": 1}
        if job_plan.device != "cpu":
            params["gpus_per_node"] = 1
        if part is not None:
            params["slurm_partition"] = part
        ex.update_parameters(**params)
        Path(job_plan.out).mkdir(parents=True, exist_ok=True)
        submitted.append(Submitted(label, Path(job_plan.out), ex.submit(run_job, job_plan.as_json())))
    return submitted


def wait(jobs: list[Submitted]) -> list[tuple[Submitted, dict | None, str | None]]:
    """Wait for every job: (job, its summary or None, the first line of its error or None)."""
    done: list[tuple[Submitted, dict | None, str | None]] = []
    for s in jobs:
        try:
            done.append((s, s.job.result(), None))
        except Exception as e:  # a failed job is reported, the others still count
            lines = [line for line in str(e).strip().splitlines() if line.strip()]
            done.append((s, None, lines[-1] if lines else type(e).__name__))
    return done


def merge_command(jobs: list[Submitted]) -> str:
    """The command that merges the jobs' measurements into one store."""
    return "attn-cost results import " + " ".join(str(s.out / "measurements.jsonl") for s in jobs)
