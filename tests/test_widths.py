"""Every table command at 80 and 120 columns, piped: no variant name, number or formula is split or
cut, no table is wider than the width, no line ends in spaces."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import sympy as sp
from attn_cost.cli.main import main
from attn_cost.costmodel import display
from attn_cost.costmodel.symbols import BY_NAME
from attn_cost.costmodel.variants import all_variants
from rich.cells import cell_len

WIDTHS = (80, 120)
PROFILE = min((Path(__file__).parent / "data" / "devices").glob("*.json"))
"""The tests' own device profile (tests/data/make_device.py), never the shipped measurements of one CPU."""
NAMES = {v.name for v in all_variants()}
NUMBER = re.compile(r"^\d{1,3}(,\d{3})*(\.\d+)?$")
EDGE = "()[]{}:;,.'\"`|"

ANALYTIC = [
    ["crossover", "--d", "64"],
    ["crossover"],
    ["crossover", "--all", "--d", "64"],
    ["crossover", "--d", "16", "--device", PROFILE.stem],
    ["cheapest"],
    ["decode"],
    ["formula", "taylorshift-efficient"],
    ["formula", "latte", "--scope", "layer"],
    ["heads", "--d-embed", "256"],
    ["variants"],
    ["conventions"],
    ["devices"],
]


def split_names(text: str) -> list[str]:
    """Tokens that are a cut or folded piece of a variant name (a strict prefix or suffix of one,
    or a prefix ending in an ellipsis), on a line where the whole name is absent."""
    bad = []
    for line in text.splitlines():
        for raw in line.split():
            token = raw.strip(EDGE)
            cut = token.endswith("…") and len(token) > 1
            token = token.rstrip("…")
            if len(token) < 3 or token in NAMES or not re.search(r"[a-z]", token):
                continue
            for name in NAMES:
                if token == name or name in line or len(token) < 4:
                    continue
                # a whole hyphen-separated word of a name ("efficient", "causal") is prose, not a piece
                head = name.startswith(token) and (cut or token.endswith("-") or name[len(token)] != "-")
                tail = name.endswith(token) and (token.startswith("-") or name[-len(token) - 1] != "-")
                if head or tail:
                    bad.append(f"{raw!r} (of {name}) in {line!r}")
    return bad


def split_numbers(text: str) -> list[str]:
    """Numbers with broken digit groups (`4,16`), or cut at a line's end (`16,` then `513`)."""
    bad = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        for raw in line.split():
            token = raw.strip("()[]:;%×≈±")
            number = token.rstrip(",.")
            if "," in number and re.fullmatch(r"[\d,.]+", number) and not NUMBER.match(number):
                bad.append(f"{raw!r} in {line!r}")
        nxt = lines[i + 1].lstrip() if i + 1 < len(lines) else ""
        if re.search(r"\d,$", line) and re.match(r"\d{3}\b", nxt):
            bad.append(f"{line!r} / {nxt!r}")
    return bad


def check(text: str, width: int) -> None:
    assert text.strip(), "no output"
    lines = text.splitlines()
    assert not [x for x in lines if x != x.rstrip()], "trailing spaces"
    assert split_names(text) == []
    assert split_numbers(text) == []
    rules = [x for x in lines if "──" in x]
    assert all(cell_len(x) <= width for x in rules), [x for x in rules if cell_len(x) > width]


def _output(args: list[str], width: int, capsys, monkeypatch) -> str:
    monkeypatch.setenv("COLUMNS", str(width))
    capsys.readouterr()
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


@pytest.fixture(autouse=True)
def _isolated_home(fixture_device) -> None:
    """ATTN_COST_HOME in tmp_path, holding the tests' own device profile."""


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("args", ANALYTIC, ids=[" ".join(a) for a in ANALYTIC])
def test_analytic_tables_keep_names_and_numbers_whole(args: list[str], width: int, capsys, monkeypatch) -> None:
    check(_output(args, width, capsys, monkeypatch), width)


@pytest.mark.parametrize("width", WIDTHS)
def test_crossover_d64_shows_whole_names(width: int, capsys, monkeypatch) -> None:
    """The first table a newcomer sees (issue 9: `taylorshift-di` / `rect` at 80 columns)."""
    out = _output(["crossover", "--d", "64"], width, capsys, monkeypatch)
    rows = [x for x in out.splitlines() if "4,161" in x]
    assert len(rows) == 2
    assert "taylorshift-direct" in rows[0] and "taylorshift-efficient" in rows[0]
    assert "softmax" in rows[1] and "taylorshift-efficient" in rows[1]


@pytest.mark.parametrize("width", WIDTHS)
def test_closed_forms_are_never_wrapped(width: int, capsys, monkeypatch) -> None:
    data = json.loads(_output(["crossover", "--d", "64", "--json"], width, capsys, monkeypatch))
    forms = {
        display.text(sp.sympify(row[c]["exact"], locals=dict(BY_NAME)))
        for row in data["results"]
        for c in ("flops", "memory", "traffic")
        if row[c]["exact"]
    }
    assert len(forms) >= 3
    out = _output(["crossover", "--d", "64"], width, capsys, monkeypatch)
    for form in forms:
        assert any(form in line for line in out.splitlines()), form


@pytest.mark.parametrize("width", WIDTHS)
def test_formula_totals_are_never_wrapped(width: int, capsys, monkeypatch) -> None:
    data = json.loads(_output(["formula", "taylorshift-efficient", "--json"], width, capsys, monkeypatch))
    out = _output(["formula", "taylorshift-efficient"], width, capsys, monkeypatch)
    for total in data["flops"].values():
        text = display.text(sp.sympify(total, locals=dict(BY_NAME)))
        assert any(text in line for line in out.splitlines()), text


@pytest.mark.parametrize("width", WIDTHS)
def test_measured_tables_from_a_device_profile(width: int, capsys, monkeypatch) -> None:
    """`validate` and `profile` tables rendered from the rows of a device profile (the tests' own)."""
    from types import SimpleNamespace

    from attn_cost.cli.measure import _profile_table, _validation_tables
    from attn_cost.profilers.devicemodel.measured.data import load_profile

    monkeypatch.setenv("COLUMNS", str(width))
    profile = load_profile(str(PROFILE))
    capsys.readouterr()
    _validation_tables(profile, profile.validation, [8, 16, 64], None)
    measurer = SimpleNamespace(store=SimpleNamespace(device=profile.device, path=Path("x")), measured=0)
    _profile_table(profile.validation, measurer, 16384)
    out = capsys.readouterr().out
    check(out, width)
    assert "taylorshift-efficient" in out


@pytest.mark.parametrize("width", WIDTHS)
def test_block_layout_when_even_one_column_does_not_fit(width: int, capsys, monkeypatch) -> None:
    """A table too wide to stack (a long name beside a long value) becomes one record per block."""
    from attn_cost.cli import render

    monkeypatch.setenv("COLUMNS", str(width))
    capsys.readouterr()
    name = "taylorshift-efficient"
    value = "9" * (width - 10)
    render.table("T", [render.Col("variant"), render.right("value")], [[name, value]], keys=1)
    out = capsys.readouterr().out
    assert f"variant: {name}" in out and value in out
    assert not [x for x in out.splitlines() if x != x.rstrip()]


def test_check_flops_and_measure_tables(capsys, monkeypatch) -> None:
    pytest.importorskip("torch")
    for width in WIDTHS:
        out = _output(["check-flops", "--variant", "softmax", "--scope", "core"], width, capsys, monkeypatch)
        check(out, width)
        args = ["measure", "--variant", "softmax", "--variant", "taylorshift-efficient", "--n", "16", "--d", "8"]
        out = _output([*args, "--repeats", "1", "--cpu"], width, capsys, monkeypatch)
        check(out, width)
