"""``--help``: every command's options explained, flags without a value type, defaults from the
settings, and the command list wrapped as paragraphs."""

from __future__ import annotations

import pytest
from conftest import invoke
from typer.main import get_command
from typer.testing import CliRunner

from sqlheads.cli import app

runner = CliRunner()


WIDE = {"COLUMNS": "200"}


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


def test_request_teacher_options_have_help_and_the_jobs_defaults():
    from sqlheads.cli import help as cli_help

    text = _help("request-teacher")
    for name in cli_help.TEACHER_OPTIONS:
        line = next(line for line in text.splitlines() if f"--{name.replace('_', '-')} " in line)
        assert cli_help.teacher_help(name)[:20] in line, line
    assert "(default 3)" in text and "(default 32)" in text


def test_recipe_auto_is_explained():
    text = " ".join(_help("train").split())
    assert "auto: fast from 20,000 training rows on, full below" in text.replace("│ ", "")


def test_load_sample_help_keeps_its_summary_in_one_sentence():
    summary = get_command(app).commands["load-sample"].help.split("\n\n")[0]
    assert "\n" not in summary.strip() and summary.strip().endswith(".")


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
    lines = invoke("--help").stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "Commands" in line)
    panel = [line for line in lines[start + 1 :] if line.startswith("│")]
    entries = _entries(panel)
    assert set(entries) == set(get_command(app).commands)
    for name, (room, text) in entries.items():
        for line, following in zip(text, text[1:], strict=False):
            assert len(line) + 1 + len(following.split()[0]) > room, (name, text)
