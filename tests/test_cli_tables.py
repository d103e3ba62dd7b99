"""Listings (models, jobs, encoders, drift) fit the terminal: at 80 and at 200 columns every line
fits, no header or name is cut to "…", the columns that did not fit are named, an empty listing
says so in words, and --json has every field with integers as integers. Real store, real head,
real queued jobs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import invoke
from typer.testing import CliRunner

from sqlheads import host
from sqlheads.cli import app
from sqlheads.cli.app import in_words
from sqlheads.errors import SingleClassError
from sqlheads.sidecar.requests import request_embed
from sqlheads.store.jobs import JobQueue
from sqlheads.store.repository import Store
from sqlheads.verbs.drift import NO_SET_JUDGED

runner = CliRunner()


@pytest.fixture(scope="module")
def listed(tmp_path_factory, embedded_template: Path, copy_sqlite) -> str:
    """Two versions of a head and a queued embed job of four parts: one store, built once, that
    the tests here only read."""
    store = copy_sqlite(embedded_template, tmp_path_factory.mktemp("listed") / "heads.db")
    labels = "SELECT item_key, label FROM reviews"
    host.train(store, head="sentiment_of_reviews", set_name="reviews", labels=labels, epochs=2)
    host.train(store, head="sentiment_of_reviews", set_name="reviews", labels=labels, epochs=2)
    request_embed(
        store, set_name="queued_reviews", source="SELECT item_key, text FROM reviews", parts=4
    )
    return str(store.engine.url)


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
        # at 80 columns --wide adds the columns that fit: the baseline's
        assert "baseline" in set(_headers(narrow)) - set(_headers(_table(listed, 80, "models")))
        assert "all-MiniLM-L6-v2-int8" in "\n".join(wide)
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


PARAMS = {"source": "SELECT item_key, text FROM reviews", "engine": "onnx"}


def test_json_jobs_prints_integer_columns_as_integers(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'heads.db'}"
    store = Store.from_url(url)
    host.init(store)
    queue = JobQueue(store, max_attempts=1)
    (failed,) = queue.enqueue("teacher", "reviews", PARAMS)
    queue.claim("w1")
    queue.fail(failed.job_id, "w1", SingleClassError("the labels hold one class: 'positive'"))
    queue.enqueue("embed", "reviews", PARAMS)  # queued: no error number, no progress yet
    result = runner.invoke(app, ["--url", url, "--json", "jobs"])
    assert result.exit_code == 0, result.output
    listed = {job["job_id"]: job for job in json.loads(result.stdout)["jobs"]}
    assert listed[failed.job_id]["error_number"] == 50004
    for job in listed.values():
        for column in ("job_id", "attempts", "max_attempts", "part", "parts", "error_number"):
            assert job[column] is None or type(job[column]) is int, (column, job[column])


# -- nothing to list ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "says"),
    [
        (("jobs",), "no jobs"),
        (("jobs", "--state", "running", "--kind", "teacher"), "no jobs"),
        (("models",), "no versions"),
        (("encoders",), "none registered"),
    ],
    ids=lambda value: " ".join(value) if isinstance(value, tuple) else value,
)
def test_a_listing_with_no_rows_prints_an_empty_table(tmp_path, command, says):
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    assert invoke("--url", url, "init").exit_code == 0
    result = invoke("--url", url, *command)
    assert result.exit_code == 0, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    assert says in result.output


def test_listings_and_results_say_in_words_what_is_empty(embedded: Store):
    """A head trained on every labelled row: no queue, no set to judge for drift, each said in
    a sentence that names what to do; a result's mapping is printed as words, not JSON."""
    url = str(embedded.engine.url)
    labels = "SELECT item_key, label FROM reviews"
    host.train(embedded, head="h", set_name="reviews", labels=labels, epochs=2, deploy="always")
    host.predict(embedded, head="h", set_name="reviews")
    drift = runner.invoke(app, ["--url", url, "drift", "--head", "h"], env={"COLUMNS": "200"})
    assert drift.exit_code == 0, drift.output
    assert NO_SET_JUDGED in " ".join(drift.output.split()), drift.output
    assert in_words({"load": 2.58, "embed": None, "classes": ["a", "b"]}) == (
        "load 2.58, embed -, classes a, b"
    )
