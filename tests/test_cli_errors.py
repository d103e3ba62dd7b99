"""Errors on the command line: numbered, one line, naming the object or path and the fix,
without a traceback, and creating nothing. Real SQLite files, the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import invoke
from typer.testing import CliRunner

from sqlheads.cli import app
from sqlheads.store.repository import Store

runner = CliRunner()


CLI = "from sqlheads.cli import app; app()"


def _error(*arguments: str) -> dict:
    result = runner.invoke(app, ["--json", *arguments])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return json.loads(result.stdout)


def test_errors_without_json_are_one_readable_line(tmp_path):
    result = runner.invoke(
        app, ["--url", f"sqlite:///{tmp_path / 'x.db'}", "roll-back", "--head", "nothing"]
    )
    assert result.exit_code == 2
    assert "error 50001" in result.output and "never trained" in result.output


def test_an_error_into_a_file_is_one_line(tmp_path):
    """stderr redirected to a file: the message is not wrapped at 80 columns."""
    log = tmp_path / "err.log"
    url = f"sqlite:///{tmp_path / 'heads.db'}"
    assert runner.invoke(app, ["--url", url, "init"]).exit_code == 0
    with log.open("w") as stderr:
        done = subprocess.run(
            [sys.executable, "-c", CLI, "--url", url, "models", "--head", "nosuch"],
            stderr=stderr,
            stdout=subprocess.DEVNULL,
            env={k: v for k, v in os.environ.items() if k != "COLUMNS"},
            timeout=300,
        )
    assert done.returncode == 2
    lines = log.read_text().strip().splitlines()
    assert len(lines) == 1 and len(lines[0]) > 80, lines
    assert lines[0].startswith("error 50001:")


def test_models_of_an_unknown_head_is_a_numbered_error(tmp_path):
    url = f"sqlite:///{tmp_path / 'heads.db'}"
    assert runner.invoke(app, ["--url", url, "init"]).exit_code == 0  # models creates no file
    result = runner.invoke(app, ["--url", url, "--json", "models", "--head", "nosuch"])
    assert result.exit_code == 2
    error = json.loads(result.stdout)
    assert error["number"] == 50001 and "'nosuch' has no versions" in error["error"]


def test_a_query_error_ends_in_one_full_stop(tmp_path):
    url = f"sqlite:///{tmp_path / 'heads.db'}"
    result = runner.invoke(
        app,
        ["--url", url, "--json", "embed", "--set", "s", "--source", "SELECT 1; SELECT 2"],
    )
    assert result.exit_code == 2
    message = json.loads(result.stdout)["error"]
    assert "one statement at a time. Check" in message and ".." not in message


def test_an_unknown_encoder_is_refused_before_any_export_is_announced(tmp_path):
    url = f"sqlite:///{tmp_path / 'heads.db'}"
    source = "SELECT 'a' AS item_key, 'a fine film' AS text"
    result = runner.invoke(
        app, ["--url", url, "embed", "--set", "s", "--encoder", "nosuch", "--source", source]
    )
    assert result.exit_code == 2
    assert "error 50001" in result.output and "exporting" not in result.output


def test_an_embed_whose_source_returns_no_rows_is_refused_and_creates_nothing(tmp_path):
    url = f"sqlite:///{tmp_path / 'heads.db'}"
    source = "SELECT 'a' AS item_key, 'a fine film' AS text WHERE 0"
    result = runner.invoke(app, ["--url", url, "--json", "embed", "--set", "s", "--source", source])
    assert result.exit_code == 2
    error = json.loads(result.stdout)
    assert error["number"] == 50003 and "returned no rows" in error["error"]
    assert Store.from_url(url).find_set("s") is None


# -- database URLs and SQLite files ------------------------------------------------------------


def test_an_unsupported_database_url_is_a_numbered_error_without_a_traceback():
    completed = subprocess.run(
        [sys.executable, "-m", "sqlheads.cli", "--url", "postgresql://ann:secret@db/x", "models"],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=300,
    )
    assert completed.returncode == 2
    said = completed.stdout + completed.stderr
    assert "Traceback" not in said and "secret" not in said
    assert "error 50030" in said and "sqlite:///" in said and "sqlheads[mssql]" in said


@pytest.mark.parametrize("command", ["models", "init"])
def test_a_sqlite_url_with_two_slashes_names_the_three_slash_form(tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    error = _error("--url", "sqlite://my.db", command)
    assert error["number"] == 50030
    assert "sqlite:///my.db" in error["error"], error
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["models", "init"])
def test_a_folder_as_the_sqlite_file_names_a_file_inside_it(tmp_path, command):
    folder = tmp_path / "stores"
    folder.mkdir()
    error = _error("--url", f"sqlite:///{folder}", command)
    assert error["number"] == 50013
    assert "is a folder" in error["error"] and f"sqlite:///{folder}/" in error["error"], error
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("command", ["models", "init"])
def test_a_file_that_is_not_sqlite_is_named_and_left_alone(tmp_path, command):
    notes = tmp_path / "notes.txt"
    notes.write_text("a shopping list, not a database\n")
    error = _error("--url", f"sqlite:///{notes}", command)
    assert error["number"] == 50013
    assert str(notes) in error["error"] and "not a SQLite database" in error["error"], error
    assert "sqlite:///" in error["error"]
    assert notes.read_text() == "a shopping list, not a database\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_an_empty_file_is_a_new_sqlite_store(tmp_path):
    """SQLite treats an empty file as an empty database: touch-then-init stays allowed."""
    empty = tmp_path / "empty.db"
    empty.touch()
    result = runner.invoke(app, ["--url", f"sqlite:///{empty}", "init"])
    assert result.exit_code == 0, result.output


def test_a_missing_sqlite_folder_names_the_path_and_the_fix(tmp_path):
    url = f"sqlite:///{tmp_path / 'no' / 'such' / 'heads.db'}"
    result = runner.invoke(app, ["--url", url, "--json", "init"])
    assert result.exit_code == 2
    error = json.loads(result.stdout)
    assert error["number"] == 50013
    assert str(tmp_path / "no" / "such") in error["error"] and "mkdir -p" in error["error"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_sqlite_folder_names_the_path_and_the_fix(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        result = runner.invoke(app, ["--url", f"sqlite:///{folder / 'h.db'}", "--json", "init"])
    finally:
        folder.chmod(0o755)
    error = json.loads(result.stdout)
    assert error["number"] == 50013 and "read-only" in error["error"]
    assert str(folder) in error["error"]


@pytest.mark.parametrize("command", ["models", "jobs", "encoders"])
def test_a_read_only_verb_on_a_mistyped_path_creates_no_file(tmp_path, command):
    typo = tmp_path / "sqlheds.db"
    result = invoke("--url", f"sqlite:///{typo}", command)
    assert result.exit_code == 2, result.output
    assert "error 50014" in result.output and str(typo) in " ".join(result.output.split())
    assert not typo.exists()
    assert list(tmp_path.iterdir()) == []  # no -wal, -shm or .locks either
