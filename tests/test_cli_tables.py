"""jobs, encoders and models fit the terminal (issue 20, point 2): at 80 and at 200 columns
every line fits, no header or name is cut to "…", the columns that did not fit are named, and
--json has every field. Real store, real head, real queued jobs."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from sqlheads import host
from sqlheads.cli import app
from sqlheads.sidecar.requests import request_embed
from sqlheads.store.repository import Store

runner = CliRunner()


@pytest.fixture
def listed(embedded: Store) -> str:
    """Two versions of a head and a queued embed job of four parts."""
    labels = "SELECT item_key, label FROM reviews"
    host.train(embedded, head="sentiment_of_reviews", set_name="reviews", labels=labels, epochs=2)
    host.train(embedded, head="sentiment_of_reviews", set_name="reviews", labels=labels, epochs=2)
    request_embed(
        embedded, set_name="queued_reviews", source="SELECT item_key, text FROM reviews", parts=4
    )
    return str(embedded.engine.url)


def _table(url: str, width: int, *command: str) -> list[str]:
    result = runner.invoke(app, ["--url", url, *command], env={"COLUMNS": str(width)})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines and all(len(line) <= width for line in lines), "\n".join(lines)
    assert "…" not in result.stdout, result.stdout
    return lines


def _headers(lines: list[str]) -> list[str]:
    header = next(line for line in lines if line.startswith("┃"))
    return [cell.strip() for cell in header.strip("┃").split("┃")]


@pytest.mark.parametrize(
    ("command", "at_80"),
    [
        (("models",), ["head", "version", "kind", "deployed", "accuracy"]),
        (("models", "--wide"), ["head", "version", "kind", "deployed", "accuracy"]),
        (("jobs",), ["job", "kind", "state", "head", "progress", "set", "stage"]),
    ],
)
def test_tables_fit_80_and_200_columns(listed: str, command, at_80):
    narrow = _table(listed, 80, *command)
    assert set(at_80) <= set(_headers(narrow))
    wide = _table(listed, 200, *command)
    left_out = set(_headers(wide)) - set(_headers(narrow))
    if left_out:  # what did not fit is named
        text = " ".join(line.strip() for line in narrow)
        caption = text[text.index("not shown") :]
        assert all(header in caption for header in left_out), (left_out, caption)
    assert len(_headers(wide)) >= len(_headers(narrow))
    if command == ("models", "--wide"):
        assert {"encoder_name", "rows_train", "model_id"} <= set(_headers(wide))
        assert any("not shown at 80 columns" in line for line in narrow)
    if command == ("models",):
        assert "sentiment_of_reviews" in "\n".join(narrow)


def test_encoders_fit_80_columns_with_whole_names(listed: str):
    narrow = "\n".join(_table(listed, 80, "encoders"))
    assert "all-MiniLM-L6-v2" in narrow and "all-mpnet-base-v2" in narrow
    wide = "\n".join(_table(listed, 200, "encoders"))
    assert "MB int8/fp32" in wide and "parity cosine" in wide


def test_json_has_every_field(listed: str):
    result = runner.invoke(app, ["--url", listed, "--json", "models", "--wide"])
    record = json.loads(result.stdout)["models"][0]
    assert {"encoder_name", "rows_train", "created_at", "teacher_accuracy"} <= set(record)
