"""Progress on the command line: lines on stderr that count the rows and epochs really done, a
rate as a person reads it, an estimate from the first report on, and the encoder's export
named as a stage on its first use only. Real SQLite files, the real CLI, real encoders."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from sqlheads import host
from sqlheads.cli import app
from sqlheads.cli.render import ProgressLines
from sqlheads.store.repository import Store

runner = CliRunner()


LABELS = "SELECT item_key, label FROM reviews"


def test_progress_lines_go_to_stderr_when_it_is_not_a_terminal(embedded):
    url = embedded.engine.url.render_as_string(hide_password=False)
    commands = [
        ["embed", "--set", "again", "--source", "SELECT item_key, text FROM reviews"],
        ["train", "--head", "h", "--set", "reviews", "--labels", LABELS, "--epochs", "3"],
    ]
    said = []
    for command in commands:
        completed = subprocess.run(
            [sys.executable, "-m", "sqlheads.cli", "--url", url, "--json", *command],
            capture_output=True,  # stderr is a pipe, as under a scheduler or in a log file
            text=True,
            env=os.environ.copy(),
            timeout=900,
        )
        assert completed.returncode == 0, completed.stderr
        json.loads(completed.stdout)  # stdout stays one JSON object
        said.append(completed.stderr)
    assert "embedding again: 600 of 600 rows (100 %)" in said[0] and "rows/s" in said[0]
    # a rate as a person reads it: epochs a second, or under one a second, seconds an epoch
    assert "training h: 3 of 3 epochs (100 %)" in said[1]
    assert "epochs/s" in said[1] or "s/epoch" in said[1], said[1]


def test_the_first_use_exports_the_encoder_and_a_second_store_registers_the_cached_export(
    store: Store, tmp_path, monkeypatch
):
    """The suite's one run on an empty cache (every other test shares the exports kept on this
    machine, tests/conftest.py): the first embed with the default encoder names its export as a
    stage; a second store then registers it from the cache, and its command line says so
    instead of "exporting"."""
    monkeypatch.setenv("SQLHEADS_CACHE", str(tmp_path / "empty-cache"))
    pd.DataFrame({"item_key": ["a"], "text": ["Fine."]}).to_sql("notes", store.engine, index=False)
    stages: list[str] = []

    def heard(done: int, total: int | None, stage: str | None) -> None:
        if stage is not None:
            stages.append(stage)

    host.embed(store, set_name="notes", source="SELECT item_key, text FROM notes", progress=heard)
    first_use = "exporting all-MiniLM-L6-v2-int8 to ONNX (first use on this machine)"
    assert stages == [first_use, "embedding notes"]

    url = f"sqlite:///{tmp_path / 'second.db'}"
    runner.invoke(app, ["--url", url, "init"])
    with Store.from_url(url).engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE notes (item_key TEXT, text TEXT)")
        connection.exec_driver_sql("INSERT INTO notes VALUES ('a', 'a fine film')")
    result = subprocess.run(
        [sys.executable, "-m", "sqlheads.cli", "--url", url, "embed", "--set", "notes"]
        + ["--source", "SELECT item_key, text FROM notes"],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    assert "to ONNX (first use" not in result.stderr
    assert (
        "registering all-MiniLM-L6-v2-int8 from this machine's cached ONNX export" in result.stderr
    )


def test_the_first_estimate_counts_from_the_first_report_not_from_the_start(capsys):
    """A slow start (an export, a query) before the first batch must not read as a slow rate:
    the estimate of time left comes from the rows done since the first report."""
    clock = [100.0]
    lines = ProgressLines("embedding reviews", "rows", clock=lambda: clock[0])
    clock[0] += 60.0  # a minute of exporting before any row is embedded
    lines(1000, 100_000)  # the first batch (running totals, as every Progress reports)
    for batch in range(2, 12):  # then a batch every 2 s
        clock[0] += 2.0
        lines(1000 * batch, 100_000)
    said = capsys.readouterr().err.splitlines()
    last = said[-1]
    left = re.search(r"about (\d+):(\d\d):(\d\d) left", last)
    assert left, said
    seconds = int(left.group(1)) * 3600 + int(left.group(2)) * 60 + int(left.group(3))
    # 10,000 rows in 20 s since the first report: 89,000 rows take 178 s (counted from the
    # start, the export included, the rate was 137.5 rows/s: 647 s)
    assert 170 <= seconds <= 190, said
    assert "about" not in said[0], "one report gives no rate to estimate from"


def test_a_rate_under_one_a_second_is_given_as_seconds_each(capsys):
    clock = [0.0]
    lines = ProgressLines("distilling student", "epochs", clock=lambda: clock[0])
    lines(0, 3)
    for epoch in (1, 2, 3):
        clock[0] += 50.0
        lines(epoch, 3)
    last = capsys.readouterr().err.splitlines()[-1]
    assert last == "distilling student: 3 of 3 epochs (100 %), 50.0 s/epoch", last


# -- the demo's rate ----------------------------------------------------------------------------


def _demo(folder: Path, monkeypatch, rows: int = 300) -> tuple[dict, str]:
    """``sqlheads --json demo`` on a sample of ``rows`` in ``folder``: its JSON and stderr."""
    monkeypatch.chdir(folder)
    monkeypatch.setenv("SQLHEADS_SAMPLE_ROWS", str(rows))
    result = runner.invoke(app, ["--json", "demo"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


@pytest.fixture(scope="module")
def demo_twice(tmp_path_factory) -> tuple[tuple[dict, str], tuple[dict, str]]:
    """``sqlheads --json demo`` on 300 reviews, then again on the same file: each run's JSON
    and stderr."""
    folder = tmp_path_factory.mktemp("demo_twice")
    with pytest.MonkeyPatch.context() as monkeypatch:
        return _demo(folder, monkeypatch), _demo(folder, monkeypatch)


def _last_rate(said: str, stage: str) -> str | None:
    lines = [line for line in said.splitlines() if line.startswith(f"{stage}:")]
    assert lines, said
    found = re.search(r", ([\d,.]+ [\w/]+)$", lines[-1])
    return found.group(1) if found else None


def test_the_demos_embedding_rate_is_the_rate_its_progress_showed(demo_twice):
    first, said = demo_twice[0]
    shown = _last_rate(said, "embedding rt_reviews")
    assert shown is not None and shown.endswith(" rows/s"), said
    shown_rate = float(shown.split()[0].replace(",", ""))
    assert first["embedded"] == 300
    # the same rows over the same seconds: from the first batch read to the last committed
    assert first["embed_rows_per_second"] == pytest.approx(shown_rate, rel=0.05), (first, said)


def test_a_rerun_that_embeds_nothing_claims_no_rate(demo_twice):
    again, said = demo_twice[1]
    assert (again["embedded"], again["unchanged"]) == (0, 300)
    assert "embedding rt_reviews: 0 of 0 rows: nothing to do" in said, said
    assert _last_rate(said, "embedding rt_reviews") is None, said
    assert again["embed_rows_per_second"] is None
