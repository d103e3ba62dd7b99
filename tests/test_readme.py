"""What the README promises a new user about installing and speed matches what is measured."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = README.index(f"## {title}\n")
    return README[start : README.index("\n## ", start + 1)]


def test_install_says_how_to_get_the_cpu_only_torch_wheel():
    install = " ".join(_section("Install").split())
    assert "--index-url https://download.pytorch.org/whl/cpu" in install


def test_ci_runs_the_readme_install_and_test_commands_in_a_new_venv():
    """Issue 16: CI installed into the machine's own Python, so it passed where a new user's
    fresh install failed."""
    install = _section("Install")
    commands = install[
        install.index("```bash\n") + 8 : install.index("```", install.index("```bash") + 7)
    ]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    pip_lines = [line for line in commands.splitlines() if line.startswith("python3 -m pip ")]
    assert pip_lines[0] == "python3 -m pip install torch==2.13.0"  # torch first
    assert "-c constraints.txt" in pip_lines[1]
    assert [line for line in ci if line.startswith("python3 -m pip install ")][:2] == pip_lines
    assert 'rm -rf "$VENV"' in ci and 'python3 -m venv "$VENV"' in ci
    assert ci[-1] == "python3 -m pytest -q" and "python3 -m pytest -q" in _section("Tests")
    pinned = (ROOT / "constraints.txt").read_text()
    assert "\nonnxruntime==" in pinned and "\ntorch==" not in pinned


def test_demo_quotes_the_encode_benchmark_figure_not_a_best_case():
    headline = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    measured = re.search(
        r"^\| encode \| Rotten Tomatoes rows/s, 2 threads: .*? \| (\d[\d,]*) vs", headline, re.M
    )
    assert measured, "the encode headline row of docs/benchmarks.md moved"
    demo = " ".join(_section("Demo").split())  # line breaks do not matter
    assert f"{measured.group(1)} rows/s for the encoder alone" in demo
    assert "about 800 rows/s" not in demo
