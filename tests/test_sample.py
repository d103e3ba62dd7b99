"""load-sample: the README students example's tables, and its refusals (issue 20)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from sqlheads.cli import app
from sqlheads.store.repository import Store

runner = CliRunner()


def _url(store: Store) -> str:
    return store.engine.url.render_as_string(hide_password=False)


@pytest.mark.parametrize(
    ("rows", "teacher", "number", "named"),
    [("many", "rt_sentiment", 50012, "SQLHEADS_SAMPLE_ROWS"), ("0", "x", 50012, "'0'")]
    + [("50", "nosuch", 50001, "'nosuch'")],
)
def test_load_sample_refusals_are_numbered_and_create_no_table(
    store: Store, monkeypatch, rows, teacher, number, named
):
    monkeypatch.setenv("SQLHEADS_SAMPLE_ROWS", rows)
    result = runner.invoke(
        app, ["--url", _url(store), "--json", "load-sample", "--teacher", teacher]
    )
    assert result.exit_code == 2, result.output
    error = json.loads(result.stdout)
    assert error["number"] == number and named in error["error"]
    with store.engine.connect() as c:
        tables = set(c.exec_driver_sql("SELECT name FROM sqlite_master").scalars())
    assert not tables & {"rt_labels", "imdb_reviews", "teacher_logits"}


def test_load_sample_without_a_teacher_needs_no_head_and_makes_no_soft_labels(
    store: Store, monkeypatch
):
    """The README's IMDB recipe loads its tables into a fresh file, which holds no head: its
    teacher is a sidecar job."""
    monkeypatch.setenv("SQLHEADS_SAMPLE_ROWS", "40")
    result = runner.invoke(app, ["--url", _url(store), "--json", "load-sample", "--no-teacher"])
    assert result.exit_code == 0, result.output
    loaded = json.loads(result.stdout)
    assert loaded["tables"] == {"rt_labels": 40, "imdb_reviews": 40} and loaded["teacher"] is None
    with store.engine.connect() as c:
        tables = set(c.exec_driver_sql("SELECT name FROM sqlite_master").scalars())
    assert {"rt_labels", "imdb_reviews"} <= tables and "teacher_logits" not in tables


def test_the_quick_starts_ids_are_not_ordered_by_label(store: Store, monkeypatch):
    """An analyst's table is not sorted by its label: the README's `WHERE id <= 500` must reach
    both classes (Rotten Tomatoes itself comes sorted, all negatives first)."""
    monkeypatch.setenv("SQLHEADS_SAMPLE_ROWS", "40")
    result = runner.invoke(app, ["--url", _url(store), "load-sample", "--quick-start"])
    assert result.exit_code == 0, result.output
    with store.engine.connect() as c:
        first = c.exec_driver_sql("SELECT DISTINCT sentiment FROM labels WHERE id <= 10").scalars()
        assert set(first) == {"negative", "positive"}


def test_a_sampled_demo_holds_the_reviews_load_sample_takes(store: Store, monkeypatch):
    """SQLHEADS_SAMPLE_ROWS=N runs the demo on N reviews, the very ones load-sample's rt_labels
    hold, so that the documentation's blocks run on one sample from the demo on."""
    from sqlheads.demo import run_demo

    monkeypatch.setenv("SQLHEADS_SAMPLE_ROWS", "60")
    result = run_demo(_url(store))
    assert result["rows"] == 60 and result["predictions_in_view"] == 60
    loaded = runner.invoke(app, ["--url", _url(store), "--json", "load-sample"])
    assert loaded.exit_code == 0, loaded.output
    with store.engine.connect() as c:
        demo = set(c.exec_driver_sql("SELECT item_key FROM rt_reviews").scalars())
        labels = set(c.exec_driver_sql("SELECT item_key FROM rt_labels").scalars())
        logits = set(c.exec_driver_sql("SELECT item_key FROM teacher_logits").scalars())
    assert demo == labels == logits and len(demo) == 60
