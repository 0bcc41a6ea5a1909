"""No number under a heading it does not belong to (issue 47, class 3). A measured value is shown only where it was
measured under every size and setting asked for (`corrections.measured_point`, one rule for `crossover --device` and
the report's tables and panels) and drawn as the measured crossing only where it stands (`standing.shown_n0`); a
datasheet row is the same GPU as a profile by the row's own identity, never by a name the row gives itself; a GPU
row one command refuses, every command refuses; a variant is not paired with itself; a JSON key given twice is
refused, naming the file and the key. Expected values are the shipped profiles' own units (read from their files
here) and what the commands print, never the rule under test."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from attn_cost.profilers import DATA
from attn_cost.profilers.devicemodel.datasheet import data as datasheet
from attn_cost.profilers.devicemodel.datasheet.data import SHIPPED as GPUS

H200_BF16 = "cuda-nvidia-h200-12fde9-bf16"
CPU = "cpu-amd-epyc-5155e7"


def _one_line(r, *says: str) -> str:
    assert r.code == 2, (r.out, r.err)
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and "error: " in lines[0] and "Traceback" not in r.err, r.err
    for text in says:
        assert text in lines[0], r.err
    return lines[0]


def _unit(profile: str, a: str, b: str, d: int) -> dict:
    """A shipped profile's measured unit, read from its file."""
    data = json.loads((DATA / "devices" / f"{profile}.json").read_text(encoding="utf-8"))
    return next(m for m in data["measured"] if (m["a"], m["b"], m["d"]) == (a, b, d))


def _measured(cli, *args: str) -> float | None:
    r = cli("crossover", *args, "--json")
    assert r.code == 0, r.err
    (row,) = r.json()["results"]
    return row.get("measured_n0")


# -- measured at the sizes and the setting asked -------------------------------------------------------------------

CAUSAL = ("softmax-fused-causal", "linear-chunked")
LATTE = ("softmax-fused", "latte")


@pytest.mark.parametrize(
    ("pair", "other"),
    [(CAUSAL, ["--chunk", "128"]), (CAUSAL, ["--b", "16"]), (CAUSAL, ["--h", "2"]), (LATTE, ["--L", "32"]),
     (LATTE, ["--n-kv", "8192"])],
)  # fmt: skip
def test_a_measured_crossover_is_shown_only_at_the_sizes_and_setting_it_was_measured_at(cli, pair, other) -> None:
    """The H200's units were measured at b = 32, h = 1, the chunk 64, L = d, keys as long as queries: there the
    measured N0 is the unit's; at any other value of any size the pair depends on (the chunk too, which the units do
    not name: they were measured at its default) or with keys of their own length, there is none."""
    a, b = pair
    unit = _unit(H200_BF16, a, b, 64)
    assert unit["measured_n0"] is not None and "C" not in unit and unit["batch"] == 32
    measured_at = {"--device": H200_BF16, "--pair": f"{a}:{b}", "--d": "64", "--b": "32"}

    def at(**changed: str) -> list[str]:
        return [x for flag, value in {**measured_at, **changed}.items() for x in (flag, value)]

    flag, value = other
    assert _measured(cli, *at()) == unit["measured_n0"]
    same = {"--chunk": "64", "--L": "64", "--b": "32", "--h": "1"}.get(flag)
    if same is not None:  # the measured value given explicitly: still shown
        assert _measured(cli, *at(**{flag: same})) == unit["measured_n0"]
    assert _measured(cli, *at(**{flag: value})) is None


def test_a_unit_that_names_its_own_size_is_shown_at_that_size_only(cli, tmp_path) -> None:
    """A profile whose unit was measured at the chunk 128 (as `validate --chunk 128` now records it): shown at
    --chunk 128, not at the default 64."""
    data = json.loads((DATA / "devices" / f"{H200_BF16}.json").read_text(encoding="utf-8"))
    unit = next(m for m in data["measured"] if (m["a"], m["b"], m["d"]) == (*CAUSAL, 64))
    unit["C"] = 128
    folder = tmp_path / "home" / "devices"
    folder.mkdir(parents=True)
    (folder / f"{H200_BF16}.json").write_text(json.dumps(data))
    base = ["--device", H200_BF16, "--pair", ":".join(CAUSAL), "--d", "64", "--b", "32"]
    assert _measured(cli, *base, "--chunk", "128") == unit["measured_n0"]
    assert _measured(cli, *base) is None


def _report(cli, tmp_path: Path, *args: str) -> tuple[str, dict]:
    out = tmp_path / "r.html"
    r = cli("report", "--html", str(out), *args)
    assert r.code == 0, r.err
    text = out.read_text(encoding="utf-8")
    payload = re.search(r"<script type='application/json' id='attn-cost-data'>(.*?)</script>", text, re.S)
    return text, json.loads(payload.group(1).replace("<\\/", "</"))


def test_a_report_draws_a_measured_crossover_only_at_its_own_sizes(cli, tmp_path) -> None:
    """The report's panels are at one head, batch 1: the H200's units (b = 32) are neither drawn nor tabled there,
    and its time points (b = 32) are not markers there; the CPU profile's units (h = 1, b = 1, never judged) are."""
    text, data = _report(cli, tmp_path, "--device", H200_BF16, "--pair", "softmax-fused:latte", "--d", "64")
    assert all(row.get("measured_n0") is None for row in data["transitions"])
    assert "N0 measured" not in "".join(re.findall(r'"text":"([^"]*)"', text))
    assert not any(data["measured"]["64"][v]["time"] for v in ("softmax-fused", "latte"))
    assert all(v is None for item in data["versus_d"] for v in item.get("measured_n0", []))

    pair = ("taylorshift-direct", "taylorshift-efficient")
    text, data = _report(cli, tmp_path, "--device", CPU, "--pair", ":".join(pair), "--d", "16")
    unit = _unit(CPU, *pair, 16)
    (row,) = data["transitions"]
    assert row["measured_n0"] == unit["measured_n0"]
    assert f"a: N0 measured {unit['measured_n0']:,.0f}" in text
    (item,) = data["versus_d"]
    assert item["measured_n0"][item["d"].index(16)] == unit["measured_n0"]


# -- the same GPU by the row's identity -----------------------------------------------------------------------------


def test_a_users_gpu_row_is_never_the_measured_gpu_by_the_name_it_gives_itself(cli, tmp_path) -> None:
    """A user's row that calls itself "NVIDIA H200" (title and PyTorch name) is not the shipped H200 row: its
    report draws no measured H200 beside it; the H200's own row does."""
    h200 = next(r for r in json.loads(GPUS.read_text())["gpus"] if r["name"] == "h200-sxm-141gb")
    mine = {**h200, "name": "my-h200", "title": "NVIDIA H200", "device_names": ["NVIDIA H200"]}
    (tmp_path / "home" / "gpus").mkdir(parents=True)
    (tmp_path / "home" / "gpus" / "mine.json").write_text(
        json.dumps({"kind": "attn-cost datasheet GPUs", "schema": 1, "gpus": [mine]})
    )
    args = ["--pair", "softmax-fused:latte", "--d", "64"]
    text, data = _report(cli, tmp_path, "--device", "my-h200", *args)
    assert data["twins"] == [] and "The same GPU measured" not in text and "N0 measured" not in text
    _, data = _report(cli, tmp_path, "--device", "h200-sxm-141gb", *args)
    assert {t["profile"] for t in data["twins"]} == {H200_BF16}


# -- one validation of a GPU row ------------------------------------------------------------------------------------


@pytest.mark.parametrize("smem_kb", [1 / 1024, 40])
def test_a_gpu_row_one_command_refuses_every_command_refuses(cli, tmp_path, smem_kb: float) -> None:
    """1 byte, or 40 KB, of shared memory per block: FlashAttention-2's forward tiles (48 KB at d = 64 in bf16)
    do not fit. `io --gpu` cannot tile on it and refused it; `predict`, `crossover`, `decode` and `report` priced it.
    Each now refuses it in the same line; a row of 64 KB (the MI300X's, the least that holds them) is taken."""
    a100 = next(r for r in json.loads(GPUS.read_text())["gpus"] if r["name"] == "a100-sxm4-80gb")
    rows = [{**a100, "name": "small-smem", "title": "Small", "device_names": [], "smem_per_block_kb": smem_kb},
            {**a100, "name": "enough-smem", "title": "Enough", "device_names": [], "smem_per_block_kb": 64}]
    (tmp_path / "home" / "gpus").mkdir(parents=True)
    (tmp_path / "home" / "gpus" / "mine.json").write_text(
        json.dumps({"kind": "attn-cost datasheet GPUs", "schema": 1, "gpus": rows})
    )
    commands = [
        ["io", "--gpu", "{}", "--d", "64"],
        ["predict", "--device", "{}", "--variant", "softmax-fused", "--n", "1024"],
        ["crossover", "--device", "{}", "--pair", "softmax-fused:linear", "--d", "64"],
        ["decode", "--device", "{}", "--d", "64", "--n", "1024"],
        ["report", "--device", "{}", "--pair", "softmax-fused:linear", "--d", "64", "--html", str(tmp_path / "r.html")],
    ]
    said = set()
    for command in commands:
        line = _one_line(cli(*(x.format("small-smem") for x in command)), "small-smem", "shared memory per block")
        said.add(line.split(": its datasheet row is left out ", 1)[1])
        r = cli(*(x.format("enough-smem") for x in command))
        assert r.code == 0, (command, r.err)
    assert len(said) == 1, said  # one reason, whichever command asks
    assert not (tmp_path / "r.html").exists() or "enough" in (tmp_path / "r.html").read_text()


# -- a variant paired with itself -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [["crossover", "--pair", "linear:linear"],
     ["crossover", "--pair", "softmax-fused:softmax-fused", "--device", "a100-sxm4-80gb"],
     ["crossover", "--pair", "softmax:softmax-causal", "--causal"],
     ["report", "--pair", "latte:latte", "--html", "r.html"],
     ["profile", "--cpu", "--pair", "linear:linear", "--d", "8"]],
)  # fmt: skip
def test_a_variant_paired_with_itself_is_one_line(cli, tmp_path, args) -> None:
    """No N is where a variant becomes cheaper than itself: refused before any work, not answered as N0 = 2."""
    _one_line(cli(*args), "--pair", "with itself")
    assert not (tmp_path / "r.html").exists()


# -- a JSON key given twice -----------------------------------------------------------------------------------------


def _twice(text: str, key: str) -> str:
    """The JSON text with its first `"key": ` given twice, the first time with another value."""
    at = text.index(f'"{key}":')
    return text[:at] + f'"{key}": "twice", ' + text[at:]


def test_a_json_key_given_twice_is_refused_naming_the_file_and_the_key(cli, tmp_path) -> None:
    """Python's json keeps the last of two values silently; attn-cost reads every JSON file through one parser that
    refuses the file (a JSON-lines line: that line) in one line naming it and the key: a device profile, an op
    calibration, a user's datasheet table, a results file's line, a trace --config."""
    home = tmp_path / "home"
    for folder, name, key in (("devices", CPU, "scope"), ("opmodels", "cpu-amd-epyc-234b2f", "dtype")):
        (home / folder).mkdir(parents=True, exist_ok=True)
        path = home / folder / f"{name}.json"
        path.write_text(_twice((DATA / folder / f"{name}.json").read_text(encoding="utf-8"), key))
        _one_line(cli("crossover", "--device", name, "--pair", "softmax:linear", "--d", "16"), str(path),
                  f"the key '{key}' is given twice")  # fmt: skip
        path.unlink()
    (home / "gpus").mkdir()
    table = home / "gpus" / "mine.json"
    table.write_text(_twice(GPUS.read_text(encoding="utf-8"), "name"))
    datasheet._load.cache_clear()  # read once a process: this one has read the folder before the table was there
    r = cli("devices")
    assert r.code == 0 and f"{table} is not an attn-cost datasheet table: the key 'name' is given twice" in r.err

    lines = (DATA / "results" / f"{CPU}.jsonl").read_text(encoding="utf-8").splitlines()[:3]
    records = tmp_path / "mine.jsonl"
    records.write_text("\n".join([_twice(lines[0], "kind"), *lines[1:]]) + "\n")
    r = cli("results", "import", str(records), "--store", str(tmp_path / "s.db"))
    assert r.code == 0 and "Imported 2 of 2 records" in r.out, r.out
    assert f"{records}: 1 line skipped (the key 'kind' is given twice in one object): line 1" in r.err

    from attn_cost.costmodel.errors import UserError
    from attn_cost.profilers.trace.load import load_config

    config = tmp_path / "config.json"
    config.write_text('{"hidden_size": 64, "num_heads": 2, "hidden_size": 128}')
    with pytest.raises(UserError, match=re.escape(f"--config {config}: the key 'hidden_size' is given twice")):
        load_config(config)
