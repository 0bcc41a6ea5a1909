"""The workflow layer (`profilers/workflow`): each step called directly, without the CLI, on timings whose crossings
are known by hand; the CLI and the campaign run the same functions and never the steps' parts themselves; the
measuring options and the result filters are declared once."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from attn_cost.costmodel.crossover import Setting
from attn_cost.costmodel.errors import UserError
from attn_cost.profilers.measure.sizes import Sizes
from attn_cost.profilers.store.store import write_jsonl
from attn_cost.profilers.workflow import calibrating, measuring, profiling, validating
from attn_cost.profilers.workflow.measuring import Events, Measuring

ROOT = Path(__file__).resolve().parents[1]
PAIR = ("taylorshift-direct", "taylorshift-efficient")


def slope(d: int) -> float:
    """B's time is slope(d)·N ns against A's N² ns: A = B at N = slope(d) = 300·d/8, by hand."""
    return 300 * d / 8


def _fake_timer(costs: dict):
    """`time_cases` returning each variant's cost(N, d) in nanoseconds, no noise."""
    from attn_cost.profilers.measure.timing import TimeStats

    def timer(cases, repeats, warmup, **kwargs):
        return [TimeStats(*(costs[c.variant](c.sizes.N, c.sizes.d) * 1e-9,) * 5, repeats, warmup) for c in cases]

    return timer


@pytest.fixture
def timed_by_hand(monkeypatch):
    """Every timing of the TaylorShift pair from A = N², B = slope(d)·N (ns), nothing run."""
    import attn_cost.profilers.measure.profile as prof

    costs = {PAIR[0]: lambda n, d: float(n * n), PAIR[1]: lambda n, d: float(slope(d) * n)}
    monkeypatch.setattr(prof, "time_cases", _fake_timer(costs))


# -- opening a measurer ----------------------------------------------------------------------------------------------


def test_the_measuring_options_are_checked_before_torch() -> None:
    with pytest.raises(UserError, match="not both"):
        measuring.measuring(gpu=True, cpu=True)
    with pytest.raises(UserError, match="unknown SDPA backend 'nope'"):
        measuring.measuring(cpu=True, sdpa_backend="nope")
    m = measuring.measuring(cpu=True, threads=2, repeats=5, sdpa_backend="math")
    assert (m.device, m.threads, m.repeats, m.sdpa_backend, m.fresh) == ("cpu", 2, 5, "math", False)
    assert measuring.measuring().device == "auto" and measuring.measuring(gpu=True).device == "cuda"


def test_the_longest_length_is_the_given_one_else_the_device_kinds() -> None:
    assert measuring.longest("cuda") == 65536 and measuring.longest("cpu") == 16384
    assert measuring.longest("cuda", 512) == 512


def test_open_measurer_opens_the_store_and_tells_the_caller(tmp_path) -> None:
    import torch

    opened, notes = [], []
    threads = torch.get_num_threads()
    try:
        m = Measuring("cpu", threads=1, repeats=3, store=tmp_path / "store")
        measurer = measuring.open_measurer(m, "core", "bf16", [8], Events(opened=opened.append, note=notes.append))
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)
    assert (measurer.device, measurer.scope, measurer.dtype, measurer.repeats) == ("cpu", "core", "bf16", 3)
    assert opened == [measurer.store] and measurer.store.path.is_relative_to(tmp_path / "store")


def test_a_variant_without_a_reference_and_n_kv_are_refused_before_anything_is_measured() -> None:
    measuring.check_measurable(list(PAIR))
    with pytest.raises(UserError, match="--n-kv is not measured"):
        from attn_cost.costmodel.counting import Counting

        measuring.check_measurable(list(PAIR), Setting(counting=Counting(n_kv=64)))


# -- profiling -------------------------------------------------------------------------------------------------------


def _measurer(tmp_path):
    return measuring.open_measurer(Measuring("cpu", repeats=3, store=tmp_path / "store"), "core", "fp32", [], Events())


def test_profile_finds_the_crossings_by_hand_at_each_head_dim_in_order(tmp_path, timed_by_hand) -> None:
    measurer = _measurer(tmp_path)
    done = profiling.profile(measurer, [PAIR], [8, 16], Sizes(N=1, d=1), Setting(), costs=("time",), n_max=4096)
    assert done.n_max == 4096
    assert [(p.a, p.b, p.sizes.d) for p in done.pairs] == [(*PAIR, 8), (*PAIR, 16)]
    for p, d in zip(done.pairs, (8, 16), strict=True):
        assert p.speed is not None and p.speed.verdict == "found"
        assert p.speed.measured == pytest.approx(slope(d), rel=0.03)
    again = _measurer(tmp_path)  # the same store: every length a lookup
    profiling.profile(again, [PAIR], [8, 16], Sizes(N=1, d=1), Setting(), costs=("time",), n_max=4096)
    assert again.measured == 0 and again.reused > 0


def test_the_cli_profile_is_the_workflows_profile(cli, tmp_path, timed_by_hand) -> None:
    """`attn-cost profile --json` prints the rows `workflow.profiling.profile` returns, called directly on the same
    timings (everything but the wall time)."""
    r = cli("profile", "--pair", ":".join(PAIR), "--d", "8", "--d", "16", "--cpu", "--repeats", "3", "--cost", "time",
            "--max-n", "4096", "--json", "--store", str(tmp_path / "cli-store"))  # fmt: skip
    assert r.code == 0, r.err
    direct = profiling.profile(_measurer(tmp_path), [PAIR], [8, 16], Sizes(N=1, d=1), Setting(), costs=("time",),
                               n_max=4096).rows()  # fmt: skip
    shown = r.json()["results"]
    assert [{k: v for k, v in row.items() if k != "seconds"} for row in shown] == [
        {k: v for k, v in row.items() if k != "seconds"} for row in direct
    ]


def test_sweep_rows_count_the_products_by_hand(tmp_path, timed_by_hand) -> None:
    measurer = _measurer(tmp_path)
    rows = profiling.sweep(measurer, list(PAIR), [64, 128], [8], Sizes(N=1, d=1, h=2, b=3))
    assert [(r["variant"], r["N"], r["d"]) for r in rows] == [(v, n, 8) for n in (64, 128) for v in PAIR]
    direct = {r["N"]: r for r in rows if r["variant"] == PAIR[0]}
    for n, row in direct.items():  # QKᵀ and PV: 2·N·N·d each, per head and batch
        assert row["flops_matmul"] == 3 * 2 * (2 * n * n * 8 + 2 * n * n * 8)
        assert row["seconds"] == pytest.approx(n * n * 1e-9)


# -- calibrating -----------------------------------------------------------------------------------------------------


class _Model:
    slug = "cpu-test"
    context = False

    def save(self, root: Path) -> Path:
        path = root / "cpu-test.json"
        path.write_text("{}", encoding="utf-8")
        return path


def test_calibrate_claims_its_file_before_timing_and_saves_after(tmp_path, monkeypatch) -> None:
    from attn_cost.profilers.devicemodel.calibrated import fit as cal
    from attn_cost.profilers.devicemodel.tunables import QUICK

    store = _measurer(tmp_path).store
    timed = []

    def fit(calibrator, caches, *, lines, glue, step):
        timed.append((calibrator.repeats, lines, glue))
        step("done", 1, 1)
        return _Model(), 10, 0, 2

    monkeypatch.setattr(cal, "calibrate", fit)
    out = tmp_path / "opmodels"
    out.mkdir()
    (out / f"{store.slug}.json").write_text("my own notes\n", encoding="utf-8")  # a file that is not attn-cost's
    with pytest.raises(UserError, match=f"{store.slug}.json"):
        calibrating.calibrate(store, "cpu", "fp32", repeats=3, tune=QUICK, variants=[], sizes=[], out=out)
    assert timed == [] and (out / f"{store.slug}.json").read_text(encoding="utf-8") == "my own notes\n"
    (out / f"{store.slug}.json").unlink()
    steps = []
    done = calibrating.calibrate(store, "cpu", "fp32", repeats=3, tune=QUICK, variants=[], sizes=[], out=out,
                                 context=True, step=lambda *a: steps.append(a), caches={"L1": 1024})  # fmt: skip
    assert timed == [(3, [], ([], []))] and steps == [("done", 1, 1)]
    assert done.model.context is True and done.path == out / "cpu-test.json" and done.caches == {"L1": 1024}
    assert (done.grid_shapes, done.exact_shapes, done.held_out_shapes, done.measured) == (10, 0, 2, 0)


def test_refit_calibration_refits_a_shipped_file_where_asked(tmp_path) -> None:
    from attn_cost.profilers import DATA

    shipped = min((DATA / "opmodels").glob("*.json"))
    model, saved = calibrating.refit_calibration(shipped, tmp_path / "out")
    assert saved == tmp_path / "out" / shipped.name and json.loads(saved.read_text())["kind"]
    assert len(model.points) == len(json.loads(shipped.read_text())["points"])
    (tmp_path / "file").write_text("x")
    with pytest.raises(UserError, match="is not a directory"):
        calibrating.calibration_folder(tmp_path / "file")


# -- validating ------------------------------------------------------------------------------------------------------


def _records(tmp_path) -> Path:
    """Records of the pair at d = 8 and 16 (timings by hand, two traced memory points each), as a results file."""
    measurer = _measurer(tmp_path)
    profiling.profile(measurer, [PAIR], [8, 16], Sizes(N=1, d=1), Setting(), costs=("time",), n_max=4096,
                      replicates=2)  # fmt: skip
    for d in (8, 16):
        for n in (64, 128):
            for v in PAIR:
                measurer.memory(v, Sizes(N=n, d=d))
    path = tmp_path / "measurements.jsonl"
    with path.open("w", encoding="utf-8") as out:
        write_jsonl(list(measurer.store.every().values()), out)
    return path


def test_validate_from_records_fits_without_timing_and_the_cli_prints_the_same(cli, tmp_path, timed_by_hand,
                                                                                monkeypatch) -> None:  # fmt: skip
    import attn_cost.profilers.measure.profile as prof

    path = _records(tmp_path)

    def no(*args, **kwargs):
        raise AssertionError("a validation from records timed something")

    monkeypatch.setattr(prof, "time_cases", no)
    monkeypatch.setattr(prof, "traced_peak", no)
    done = validating.validate_from_records(path, None, [PAIR], [], [8, 16], Sizes(N=1, d=1), Setting(),
                                            save_to=tmp_path / "profiles")  # fmt: skip
    rows = {r["d"]: r for r in done.rows}
    for d in (8, 16):
        assert rows[d]["measured_n0"] == pytest.approx(slope(d), rel=0.03)
    assert done.path is not None and done.path.parent == tmp_path / "profiles" and done.notes == []
    assert "nothing timed" in done.profile.made
    r = cli("validate", "--records", str(path), "--pair", ":".join(PAIR), "--fit-d", "8", "--fit-d", "16", "--d", "8",
            "--json", "--no-save")  # fmt: skip
    assert r.code == 0, r.err
    shown = {x["d"]: x for x in r.json()["results"]}
    assert {d: shown[d]["measured_n0"] for d in shown} == {d: rows[d]["measured_n0"] for d in rows}


def test_validate_device_fits_checks_and_saves_once(tmp_path, timed_by_hand) -> None:
    measurer = _measurer(tmp_path)
    done = validating.validate_device(measurer, [PAIR], [16], [8, 12], Sizes(N=1, d=1), Setting(), n_max=2048,
                                      max_lengths=8, replicates=2, save_to=tmp_path / "profiles")  # fmt: skip
    assert {r["d"]: r["held_out"] for r in done.rows} == {8: False, 12: False, 16: True}
    assert done.path is not None and json.loads(done.path.read_text())["kind"]
    assert done.opmodel is None and done.errors == {}
    again = validating.validate_device(_measurer(tmp_path), [PAIR], [16], [8, 12], Sizes(N=1, d=1), Setting(),
                                       n_max=2048, max_lengths=8, replicates=2, existing=done.profile,
                                       save_to=tmp_path / "profiles")  # fmt: skip
    assert again.path is None  # an existing profile is checked, never saved again


def test_a_calibration_of_another_device_is_refused_or_left_out() -> None:
    from attn_cost.profilers import DATA
    from attn_cost.profilers.measure.machine import fingerprint

    unknown = {**fingerprint("cpu"), "name": "No such CPU"}
    assert validating.calibration_of(None, unknown, Events()) is None  # no calibration of it: no op-model columns
    other = min((DATA / "opmodels").glob("*.json"))
    with pytest.raises(UserError):
        validating.calibration_of(str(other), unknown, Events())


# -- one function per step, for the CLI and the campaign -------------------------------------------------------------

PARTS = {
    "attn_cost.profilers.measure.profile": {"profile_pair"},
    "attn_cost.profilers.measure.machine": {"select_device", "prepare"},
    "attn_cost.profilers.measure.sdpa": {"validate_choice"},
    "attn_cost.profilers.devicemodel.calibrated.fit": {
        "Calibrator",
        "calibrate",
        "line_grid",
        "missing_lines",
        "time_lines",
    },
    "attn_cost.profilers.workflow.validating": {"validate", "refit", "time_errors"},
    "attn_cost.profilers.store.store": {"ResultStore"},
}
"""What the workflows are made of: a module above them that imports one of these is doing a step again."""
CAMPAIGN = sorted((ROOT / "profilers" / "campaign").glob("*.py"))
CALLERS = [*CAMPAIGN, *sorted((ROOT / "cli").glob("*.py"))]


def _imported(path: Path) -> set[tuple[str, str]]:
    """What a module imports, apart from the types it names for the type checker alone (`if TYPE_CHECKING:`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only = {
        id(n) for block in ast.walk(tree) if isinstance(block, ast.If) and ast.unparse(block.test) == "TYPE_CHECKING"
        for n in ast.walk(block)
    }  # fmt: skip
    return {
        (node.module, alias.name)
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and id(node) not in typing_only
        for alias in node.names
    }


@pytest.mark.parametrize("path", CALLERS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_cli_and_the_campaign_never_do_a_workflow_step_themselves(path: Path) -> None:
    """Opening a measurer, profiling, calibrating and validating are written once, in profilers/workflow: neither
    the campaign nor a command imports the pieces they are made of (a second copy of a step would)."""
    again = sorted(f"{module}.{name}" for module, name in _imported(path) if name in PARTS.get(module, set()))
    assert not again, f"{path.name} does a workflow step itself with {', '.join(again)}"


def test_the_campaign_and_the_cli_call_the_same_step_functions() -> None:
    campaign = set().union(*(_imported(p) for p in CAMPAIGN))
    commands = set().union(*(_imported(p) for p in sorted((ROOT / "cli").glob("*.py"))))
    shared = {("attn_cost.profilers.workflow.measuring", "open_device"), ("attn_cost.profilers.workflow.profiling",
              "profile"), ("attn_cost.profilers.workflow.calibrating", "calibrate"),
              ("attn_cost.profilers.workflow.validating", "validate_device")}  # fmt: skip
    assert shared <= campaign
    cli_steps = {("attn_cost.profilers.workflow.measuring", "open_measurer"), ("attn_cost.profilers.workflow.profiling",
                 "profile"), ("attn_cost.profilers.workflow.calibrating", "calibrate")}  # fmt: skip
    assert cli_steps <= commands


def test_the_check_sees_a_step_done_again(tmp_path) -> None:
    bad = tmp_path / "run.py"
    bad.write_text("from attn_cost.profilers.measure.profile import Measurer, profile_pair\n")
    assert ("attn_cost.profilers.measure.profile", "profile_pair") in _imported(bad)


# -- options declared once -------------------------------------------------------------------------------------------


def _options(command: str) -> dict:
    from attn_cost.cli.main import command_line

    group = command_line()
    for word in command.split():
        group = group.commands[word]
    return {max(p.opts, key=len): p for p in group.params if p.param_type_name == "option"}


@pytest.mark.parametrize("flag", ["--gpu", "--cpu", "--threads", "--store"])
def test_a_measuring_option_reads_the_same_in_every_command(flag: str) -> None:
    commands = ["profile", "measure", "validate", "calibrate", "campaign"] + (["doctor"] if flag in ("--gpu", "--cpu")
                                                                             else [])  # fmt: skip
    helps = {c: _options(c)[flag].help for c in commands}
    assert len(set(helps.values())) == 1, helps


def test_the_result_filters_are_the_same_in_ls_rm_and_export() -> None:
    filters = ["--device", "--variant", "--kind", "--status", "--scope", "--dtype", "--d", "--n"]
    seen = [[(f, _options(f"results {c}")[f].help) for f in filters] for c in ("ls", "rm", "export")]
    assert seen[0] == seen[1] == seen[2]
