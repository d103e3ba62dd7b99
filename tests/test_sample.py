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
