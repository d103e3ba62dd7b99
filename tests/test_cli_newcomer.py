"""A newcomer's first hour on the command line: listings of an empty store, a mistyped path,
global options after the command, help that wraps cleanly, wide tables at 80 columns, the
export message, Ctrl-C during embed and the first progress estimate. Real SQLite files, the
real CLI, real encoders."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from sqlheads import host
from sqlheads.cli import app
from sqlheads.cli.render import ProgressLines
from sqlheads.store.repository import Store

runner = CliRunner()


def _invoke(*arguments: str, width: int = 80):
    return runner.invoke(app, list(arguments), env={"COLUMNS": str(width)})


# -- listings with nothing to list -----------------------------------------------------------


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
    assert _invoke("--url", url, "init").exit_code == 0
    result = _invoke("--url", url, *command)
    assert result.exit_code == 0, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    assert says in result.output


@pytest.mark.parametrize("command", ["models", "jobs", "encoders"])
def test_a_read_only_verb_on_a_mistyped_path_creates_no_file(tmp_path, command):
    typo = tmp_path / "sqlheds.db"
    result = _invoke("--url", f"sqlite:///{typo}", command)
    assert result.exit_code == 2, result.output
    assert "error 50014" in result.output and str(typo) in " ".join(result.output.split())
    assert not typo.exists()
    assert list(tmp_path.iterdir()) == []  # no -wal, -shm or .locks either


# -- global options ----------------------------------------------------------------------------


def test_global_options_are_accepted_after_the_command(tmp_path):
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    assert _invoke("--url", url, "init").exit_code == 0
    after = _invoke("jobs", "--json", "--url", url)
    assert after.exit_code == 0, after.output
    assert json.loads(after.stdout) == {"jobs": []}
    equals = _invoke("models", f"--url={url}", "--json")
    assert equals.exit_code == 0, equals.output
    assert json.loads(equals.stdout) == {"models": []}


def test_an_option_value_that_reads_like_a_global_option_stays_a_value(tmp_path):
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    assert _invoke("--url", url, "init").exit_code == 0
    result = _invoke("--url", url, "models", "--head", "--json")  # a head named "--json"
    assert result.exit_code == 2
    assert "error 50002" in result.output  # refused as a name, not taken as the flag


# -- help ------------------------------------------------------------------------------------


def _entries(panel: list[str]) -> dict[str, tuple[int, list[str]]]:
    """The Commands panel's rows: {command: (the room its help has, its help's lines)}."""
    found: dict[str, tuple[int, list[str]]] = {}
    current = None
    for line in panel:
        inner = line[1:-1]  # between the borders
        body = inner.rstrip()
        if body[1:2].strip():  # a command's name starts the row
            current, _, text = body[1:].partition(" ")
            column = len(body) - len(text.lstrip())
            found[current] = (len(inner) - column - 1, [text.strip()])  # one space of padding
        elif current is not None and body.strip():
            found[current][1].append(body.strip())
    return found


def test_the_command_list_wraps_each_help_as_one_paragraph():
    """Each line of a command's help in ``sqlheads --help`` is full: the next line's first word
    would not have fitted on it (a docstring's own line breaks made ragged lines)."""
    lines = _invoke("--help").stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "Commands" in line)
    panel = [line for line in lines[start + 1 :] if line.startswith("│")]
    entries = _entries(panel)
    assert set(entries) == set(get_command(app).commands)
    for name, (room, text) in entries.items():
        for line, following in zip(text, text[1:], strict=False):
            assert len(line) + 1 + len(following.split()[0]) > room, (name, text)


def test_load_sample_help_keeps_its_summary_in_one_sentence():
    summary = get_command(app).commands["load-sample"].help.split("\n\n")[0]
    assert "\n" not in summary.strip() and summary.strip().endswith(".")


# -- models --wide at 80 columns ----------------------------------------------------------


def test_models_wide_at_80_columns_adds_the_columns_that_fit(embedded: Store):
    labels = "SELECT item_key, label FROM reviews"
    host.train(embedded, head="rt_sentiment", set_name="reviews", labels=labels, epochs=2)
    url = str(embedded.engine.url)
    narrow = _invoke("--url", url, "models").stdout.splitlines()
    wide = _invoke("--url", url, "models", "--wide").stdout.splitlines()
    assert all(len(line) <= 80 for line in wide), "\n".join(wide)

    def headers(lines: list[str]) -> list[str]:
        header = next(line for line in lines if line.startswith("┃"))
        return [cell.strip() for cell in header.strip("┃").split("┃")]

    added = set(headers(wide)) - set(headers(narrow))
    assert "baseline" in added, "\n".join(wide)


# -- the export message -------------------------------------------------------------------


def test_embedding_with_a_cached_export_does_not_announce_an_export(embedded: Store, tmp_path):
    """``embedded`` registered the default encoder, so this machine's cache holds its export:
    a second store registers it from there, and says so instead of "exporting"."""
    url = f"sqlite:///{tmp_path / 'second.db'}"
    runner.invoke(app, ["--url", url, "init"])
    Store.from_url(url).engine.dispose()
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
    assert "cached" in result.stderr


# -- Ctrl-C during embed -------------------------------------------------------------------


def test_ctrl_c_during_embed_says_what_was_committed_and_how_to_finish(embedded: Store):
    """A real SIGINT after the first committed batch: exit 130, a sentence on stderr with the
    rows committed and the command that finishes the rest; the committed rows are there."""
    url = str(embedded.engine.url)
    with embedded.engine.begin() as connection:  # more rows than one batch, slow enough
        connection.exec_driver_sql(
            "CREATE TABLE many AS SELECT item_key || '-' || n AS item_key, text FROM reviews, "
            "(SELECT 1 AS n UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4)"
        )
    process = subprocess.Popen(
        [sys.executable, "-m", "sqlheads.cli", "--url", url, "embed", "--set", "many"]
        + ["--source", "SELECT item_key, text FROM many", "--batch-rows", "50"],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ | {"PYTHONUNBUFFERED": "1"},
        # as at a terminal: a test run in the background (nohup, &) inherits SIGINT ignored
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    for line in process.stderr:  # the first progress line comes after the first commit
        if re.search(r"embedding many: [\d,]+ of", line):
            break
    process.send_signal(signal.SIGINT)
    _, said = process.communicate(timeout=300)
    assert process.returncode == 130, said
    assert "Traceback" not in said
    committed = re.search(r"interrupted: ([\d,]+) of ([\d,]+) rows? (?:were|was) committed", said)
    assert committed, said
    assert "run the same command again" in said
    with embedded.engine.connect() as connection:
        stored = connection.exec_driver_sql(
            "SELECT COUNT(*) FROM embeddings JOIN embedding_sets USING (set_id) "
            "WHERE embedding_sets.name = 'many'"
        ).scalar_one()
    assert stored >= int(committed.group(1).replace(",", "")) > 0


# -- the first progress estimate ---------------------------------------------------------


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
