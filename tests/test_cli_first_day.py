"""Help and output an analyst meets on the first day (issue 20, point 4)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from sqlheads.cli import app
from sqlheads.store.repository import Store

runner = CliRunner()
WIDE = {"COLUMNS": "200"}
CLI = "from sqlheads.cli import app; app()"


def _help(*command: str) -> str:
    result = runner.invoke(app, [*command, "--help"], env=WIDE)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("command", ["", *sorted(get_command(app).commands)])
def test_flags_show_no_value_type(command: str):
    text = _help(*filter(None, [command]))
    assert "<bool>" not in text
    assert "--help" in text


@pytest.mark.parametrize(
    ("command", "option", "help_text"),
    [
        ("deploy", "--head", "The head whose version to deploy."),
        ("roll-back", "--head", "The head to deploy the previous version of."),
        ("drop-head", "--head", "The head to delete, with every version."),
        ("drop-set", "--set", "The embedding set to delete."),
    ],
)
def test_head_and_set_options_have_help(command: str, option: str, help_text: str):
    line = next(line for line in _help(command).splitlines() if option in line)
    assert help_text in line


def test_models_of_an_unknown_head_is_a_numbered_error(tmp_path):
    url = f"sqlite:///{tmp_path / 'heads.db'}"
    assert runner.invoke(app, ["--url", url, "init"]).exit_code == 0  # models creates no file
    result = runner.invoke(app, ["--url", url, "--json", "models", "--head", "nosuch"])
    assert result.exit_code == 2
    error = json.loads(result.stdout)
    assert error["number"] == 50001 and "'nosuch' has no versions" in error["error"]


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


def test_request_teacher_options_have_help_and_the_jobs_defaults():
    from sqlheads.cli import help as cli_help

    text = _help("request-teacher")
    for name in cli_help.TEACHER_OPTIONS:
        line = next(line for line in text.splitlines() if f"--{name.replace('_', '-')} " in line)
        assert cli_help.teacher_help(name)[:20] in line, line
    assert "(default 3)" in text and "(default 32)" in text


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


def test_recipe_auto_is_explained():
    text = " ".join(_help("train").split())
    assert "auto: fast from 20,000 training rows on, full below" in text.replace("│ ", "")
