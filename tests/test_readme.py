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
    install = _section("Install")
    assert "--index-url https://download.pytorch.org/whl/cpu" in install
    # .ci/run keeps installing the pinned wheel the build machines have on local disk.
    assert "pip install -q torch==2.13.0\n" in (ROOT / ".ci" / "run").read_text()


def test_demo_quotes_the_encode_benchmark_figure_not_a_best_case():
    headline = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    measured = re.search(
        r"^\| encode \| Rotten Tomatoes rows/s, 2 threads: .*? \| (\d[\d,]*) vs", headline, re.M
    )
    assert measured, "the encode headline row of docs/benchmarks.md moved"
    demo = " ".join(_section("Demo").split())  # line breaks do not matter
    assert f"{measured.group(1)} rows/s for the encoder alone" in demo
    assert "about 800 rows/s" not in demo
