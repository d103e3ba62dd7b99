"""A newcomer's second hour (issue 38): URL forms a person types, Ctrl-C in every long verb,
progress that counts the rows really processed, one count of rejects, a head's versions on
one encoder, and the lock folder out of sight. Real SQLite files, the real CLI, real encoders."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sqlheads.cli import app
from sqlheads.store.repository import SET_BUSY, Store

runner = CliRunner()


def _error(*arguments: str) -> dict:
    result = runner.invoke(app, ["--json", *arguments])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return json.loads(result.stdout)


# -- URL forms -----------------------------------------------------------------------------


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


# -- the lock folder ---------------------------------------------------------------------------


def _git(folder, *arguments: str) -> str:
    return subprocess.run(
        ["git", *arguments], cwd=folder, capture_output=True, text=True, check=True
    ).stdout


def test_the_lock_folder_is_hidden_and_out_of_a_users_git_status(tmp_path):
    """A store in a folder under git (the user's, without our .gitignore): after a verb took
    its locks, nothing but the store itself is new to ``git status``, and ``ls`` shows no lock
    folder."""
    _git(tmp_path, "init", "-q")
    url = f"sqlite:///{tmp_path / 'notes.db'}"
    assert runner.invoke(app, ["--url", url, "init"]).exit_code == 0
    Store.from_url(url).engine.dispose()
    with Store.from_url(url).lock("set", "reviews", 0, SET_BUSY):
        pass
    untracked = _git(tmp_path, "status", "--porcelain", "--untracked-files=all").splitlines()
    assert [line for line in untracked if "notes.db" not in line or "lock" in line] == []
    shown = [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")]
    assert set(shown) <= {"notes.db", "notes.db-wal", "notes.db-shm"}, shown  # SQLite's own


def test_the_projects_gitignore_ignores_the_demos_lock_folder():
    root = Path(__file__).resolve().parents[1]
    for path in ("sqlheads-demo.db.locks/set.x.rwlock", ".sqlheads-demo.db.locks/set.x.rwlock"):
        assert _git(root, "check-ignore", "--no-index", path).strip() == path, path
