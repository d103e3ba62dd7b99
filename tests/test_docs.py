"""The documentation: a README that is a front door, a site that builds strict, references
generated from the code, and figures that match the files the benchmarks wrote."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the repository root: bench/


README = (ROOT / "README.md").read_text(encoding="utf-8")


def _references():
    spec = importlib.util.spec_from_file_location("references", ROOT / "docs/hooks/references.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_site_builds_strict(strict_site: Path):
    """A broken link or anchor, a page left out of the navigation, or a generated reference
    that differs from the code fails the build (mkdocs.yml: strict, validation, hooks)."""
    assert (strict_site / "guides" / "dba" / "index.html").exists()
    # the Python API reference is rendered from the docstrings (mkdocstrings), their Sphinx
    # roles shown as code (docs/hooks/sphinx_roles.py), not printed as ":class:`...`"
    api = (strict_site / "reference" / "python" / "index.html").read_text(encoding="utf-8")
    for rendered in ("HeadClassifier", "in scikit-learn's manner", "Distil a teacher"):
        assert rendered in api, rendered
    assert not re.search(r":(class|func|meth|mod|data|attr):", api), "a Sphinx role shows"


def test_generated_references_match_the_code():
    """The CLI, error, procedure and settings references are what the code makes now."""
    references = _references()
    assert references.stale() == [], f"run {references.FIX}"


def test_the_readme_is_a_front_door():
    assert len(README.splitlines()) <= 300
    for section in ("Install", "Demo", "Quick start", "Tests", "What it does", "Headline figures"):
        assert f"\n## {section}\n" in README, section


def test_deploying_to_a_server_and_the_roles_are_within_two_clicks_of_the_readme():
    """README -> the DBA's guide, whose Permissions section says what each role may do."""
    assert "(docs/guides/dba.md)" in README and "(docs/guides/dba.md#permissions)" in README
    dba = (ROOT / "docs/guides/dba.md").read_text(encoding="utf-8")
    assert "## Deploying to an existing server" in dba and "## Permissions" in dba
    permissions = dba[dba.index("## Permissions") :]
    for role in ("heads_reader", "heads_analyst", "heads_admin", "heads_sidecar"):
        assert f"| `{role}` |" in permissions, role


def _table_rows(text: str, header: str) -> list[list[str]]:
    """The rows of the Markdown table whose header line is ``header``, as cells."""
    start = text.index(header)
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return rows


def test_the_quick_start_benchmark_runs_the_readme_commands():
    """bench demo measures the quick start's expected figure by the README's own commands."""
    from bench.demo import QUICK_START

    block = re.search(r"## Quick start\n.*?```bash\n(.*?)```", README, re.S).group(1)
    commands = [line.split("   #")[0].rstrip() for line in block.splitlines()]
    assert [f"sqlheads --url sqlite:///my.db {c}" for c in QUICK_START] == commands[:4]


def test_the_views_reference_names_every_column_of_every_view():
    from sqlheads.store import queue_drift, schema

    views = (ROOT / "docs/reference/views.md").read_text(encoding="utf-8")
    documented = {row[0].strip("`"): row[1] for row in _table_rows(views, "| view | columns |")}
    every = schema.VIEWS | queue_drift.VIEWS
    assert set(documented) == set(every)
    for name, build in every.items():
        columns = list(build().selected_columns.keys())
        words = re.findall(r"\b(\w+)\b", documented[name].split(":")[0])
        assert [word for word in words if word in columns] == columns, name


@pytest.mark.parametrize("page", ["getting-started.md"])
def test_getting_started_repeats_the_readme_install_exactly(page: str):
    """The site's install block is the README's, which CI runs (tests/test_readme.py)."""
    install = re.search(r"## Install\n\n```bash\n(.*?)```", README, re.S).group(1)
    assert f"```bash\n{install}```" in (ROOT / "docs" / page).read_text(encoding="utf-8")


def test_every_command_is_described_in_the_cli_reference():
    """The hand-written table of docs/reference/cli.md gives every command of the application
    a description (issue 38: init, encoders and demo had empty rows)."""
    import typer.main

    from sqlheads.cli import app

    page = (ROOT / "docs/reference/cli.md").read_text(encoding="utf-8")
    described = {
        row[0].strip("`"): row[1] for row in _table_rows(page, "| command | what it does |")
    }
    for name in typer.main.get_command(app).commands:
        assert len(described.get(name, "").split()) >= 8, f"{name}: no description"


def _markdown_lint(*paths: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """pymarkdownlnt over ``paths`` with the project's rules (pyproject.toml [tool.pymarkdown])."""
    return subprocess.run(
        [sys.executable, "-m", "pymarkdown", "--config", str(ROOT / "pyproject.toml"), "scan",
         "-r", *paths],
        cwd=cwd, capture_output=True, text=True,
    )  # fmt: skip


def test_the_markdown_lint_passes_on_the_readme_and_every_page():
    linted = _markdown_lint("README.md", "docs")
    assert linted.returncode == 0, linted.stdout + linted.stderr


def test_the_markdown_lint_catches_a_list_run_into_its_paragraph(tmp_path):
    """The mistake issue 38 found: without a blank line before it, MkDocs renders a list as
    part of the paragraph above; the lint must refuse it (and accept the fixed page)."""
    page = tmp_path / "page.md"
    page.write_text("# Page\n\nWhere a new thing goes:\n- a verb\n- a kind\n", encoding="utf-8")
    caught = _markdown_lint(str(page), cwd=tmp_path)
    assert caught.returncode != 0 and "MD032" in caught.stdout, caught.stdout
    page.write_text("# Page\n\nWhere a new thing goes:\n\n- a verb\n- a kind\n", encoding="utf-8")
    assert _markdown_lint(str(page), cwd=tmp_path).returncode == 0
