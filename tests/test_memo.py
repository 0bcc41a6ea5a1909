"""The derivations kept between runs (costmodel/memo.py): the same answers with the cache off, cold and warm; read
back only under the fingerprint of the code that wrote them; never written into a file that is not attn-cost's."""

from __future__ import annotations

import pickle
import sqlite3
from pathlib import Path

import pytest
from attn_cost.costmodel import memo


def _counted(calls: list[int]):
    @memo.persisted
    def square(x: int) -> int:
        calls.append(x)
        return x * x

    return square


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv(memo.ENV, str(tmp_path / "cache"))
    return tmp_path / "cache" / memo.FILE


def test_a_value_is_read_back_by_another_process(cache) -> None:
    first, second = [], []
    assert _counted(first)(7) == 49 and first == [7]
    memo._open.clear()  # another process: nothing open, nothing in memory
    assert _counted(second)(7) == 49 and second == []
    rows = sqlite3.connect(cache).execute(f"SELECT fingerprint, key, value FROM {memo.TABLE}").fetchall()
    assert [(f, pickle.loads(v)) for f, _, v in rows] == [(memo.fingerprint(), 49)]


def test_a_row_of_other_code_is_not_read_and_is_dropped_on_the_next_write(cache) -> None:
    _counted([])(3)
    db = sqlite3.connect(cache)
    with db:
        db.execute(f"UPDATE {memo.TABLE} SET fingerprint = 'older code', value = ?", (pickle.dumps(-1),))
    memo._open.clear()
    calls: list[int] = []
    assert _counted(calls)(3) == 9 and calls == [3]
    assert db.execute(f"SELECT fingerprint FROM {memo.TABLE}").fetchall() == [(memo.fingerprint(),)]


@pytest.mark.parametrize("content", [b"my notes, not a database\n", None])
def test_a_file_not_attn_costs_is_left_as_it_is(cache, content: bytes | None) -> None:
    cache.parent.mkdir(parents=True)
    if content is None:  # a SQLite database of someone else's
        with sqlite3.connect(cache) as other:
            other.execute("CREATE TABLE mine (x)")
        content = cache.read_bytes()
    else:
        cache.write_bytes(content)
    memo._open.clear()
    calls: list[int] = []
    assert _counted(calls)(5) == 25 and calls == [5]
    assert cache.read_bytes() == content


def test_a_folder_that_cannot_hold_the_cache_costs_nothing_but_time(tmp_path, monkeypatch) -> None:
    (tmp_path / "a file").write_text("x")
    monkeypatch.setenv(memo.ENV, str(tmp_path / "a file" / "cache"))
    memo._open.clear()
    assert _counted([])(4) == 16


def test_an_empty_setting_turns_it_off(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(memo.ENV, "")
    monkeypatch.setenv("ATTN_COST_HOME", str(tmp_path))
    memo._open.clear()
    assert memo.folder() is None and _counted([])(2) == 4
    assert not any(tmp_path.iterdir())


def test_nothing_is_kept_while_a_variant_not_the_catalogues_is_registered(cache, registry_restored) -> None:
    from attn_cost.costmodel.variants import REGISTRY, Variant, add_variant, catalogue_only, get_variant

    assert catalogue_only()
    base = get_variant("softmax")
    add_variant(Variant("mine", "a user's", "a test", "softmax", core=lambda g, q, k, v: base.core(g, q, k, v)))
    assert not catalogue_only()
    memo._open.clear()
    assert _counted([])(6) == 36 and not cache.exists()
    del REGISTRY["mine"]


@pytest.mark.integration
def test_crossover_answers_alike_with_the_cache_off_cold_and_warm_and_reads_it(attn_cost, tmp_path) -> None:
    args = ("crossover", "--d", "64", "--pair", "softmax:linear", "--json")
    on = {memo.ENV: str(tmp_path / "c")}
    off = attn_cost(*args, env={memo.ENV: ""})
    cold, warm = attn_cost(*args, env=on), attn_cost(*args, env=on)
    assert off.code == cold.code == warm.code == 0 and off.out == cold.out == warm.out
    db = sqlite3.connect(tmp_path / "c" / memo.FILE)
    keys = [k for (k,) in db.execute(f"SELECT key FROM {memo.TABLE}")]
    assert any(k.startswith("attn_cost.costmodel.crossover.cost_branches('softmax', 'flops'") for k in keys)
    table = attn_cost(*args[:-1], env=on)  # the closed forms' text is kept too
    with db:  # a warm run reads the file: what it holds is what is shown
        db.execute(f"UPDATE {memo.TABLE} SET value = ? WHERE key LIKE '%display.text%'", (pickle.dumps("READ-BACK"),))
    again = attn_cost(*args[:-1], env=on)
    assert table.code == again.code == 0 and "READ-BACK" not in table.out and "READ-BACK" in again.out
