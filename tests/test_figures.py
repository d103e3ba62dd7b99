"""One source for every figure: each measured figure the README and the documentation quote
comes from docs/benchmarks.json (what ``python -m bench`` writes) or from
docs/results/measured.json (a measurement no benchmark makes, with its provenance: what, how,
when, on which machine and load), and the quoted text matches its source."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the repository root: bench/

from bench import quotes  # noqa: E402

MEASURED = json.loads((ROOT / "docs/results/measured.json").read_text(encoding="utf-8"))
RESULTS = quotes.results()
# A measured-looking figure: a number with a unit of time, size, speed or share.
FIGURE = re.compile(
    r"(?<![\w.\-/])(\d[\d,]*(?:\.\d+)?)\s?"
    r"(%|rows/s|jobs a second|ms\b|s\b|min\b|minutes|hours?\b|MB\b|GB\b|MiB\b|x\b)"
)
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)
PAGES = sorted(MEASURED["pages"])


def _prose(page: str) -> str:
    """A page without its code (commands, example output): what a reader takes as a claim."""
    return CODE.sub(" ", (ROOT / page).read_text(encoding="utf-8"))


def _text(page: str) -> str:
    """A page without its code blocks, on one line: where a quoted figure is looked for."""
    return " ".join(
        re.sub(r"```.*?```", " ", (ROOT / page).read_text(encoding="utf-8"), flags=re.S).split()
    )


def _section_numbers(name: str) -> set[str]:
    """Every number written in a benchmark section's results: its tables, notes, headline."""
    section = RESULTS[name]
    text = json.dumps([section["tables"], section["notes"], section["headline"], section["intro"]])
    return set(re.findall(r"\d[\d,]*(?:\.\d+)?", text))


def test_every_page_with_figures_is_listed():
    docs = {str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md")}
    generated = {"docs/benchmarks.md"}  # python -m bench writes it from benchmarks.json
    with_figures = {page for page in docs - generated if FIGURE.search(_prose(page))}
    assert with_figures <= set(MEASURED["pages"]), with_figures - set(MEASURED["pages"])


@pytest.mark.parametrize("page", PAGES)
def test_every_figure_on_a_page_has_its_source(page: str):
    """A figure is a measured.json quote placed on this page, a number of a benchmark section
    the page names as its source, or one of the page's constants (a setting, a goal, a size by
    definition), each listed with why it is not a measurement."""
    listed = MEASURED["pages"].get(page, {"benchmarks": [], "constants": []})
    quoted = " ".join(f["quote"] for f in MEASURED["figures"] if page in f["pages"])
    numbers = set().union(*(_section_numbers(n) for n in listed["benchmarks"]))
    constants = {c["figure"] for c in listed["constants"]}
    unsourced = [
        " ".join(found)
        for found in FIGURE.findall(_prose(page))
        if found[0] not in numbers
        and " ".join(found) not in constants
        and not re.search(rf"(?<![\d.,]){re.escape(found[0])}(?![\d,])", quoted)
    ]
    assert unsourced == [], f"{page}: figures with no source: {unsourced}"


@pytest.mark.parametrize("figure", MEASURED["figures"], ids=lambda f: f["quote"][:40])
def test_a_measured_figure_is_quoted_as_recorded_with_its_provenance(figure: dict):
    for field in ("what", "how", "when", "machine"):
        assert figure.get(field), f"{figure['quote']}: no {field}"
    machine = figure["machine"]
    assert {"cpu", "avx512_vnni", "cores", "load"} <= set(machine), figure["quote"]
    for page in figure["pages"]:
        assert " ".join(figure["quote"].split()) in _text(page), (page, figure["quote"])


def test_the_readme_headline_figures_are_the_benchmarks_own():
    """Each row quotes a headline row of docs/benchmarks.json word for word, with the machine
    that benchmark recorded (CPU, AVX-512 VNNI or not, cores, load)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("| benchmark | what | figure | machine |")
    rows = []
    for line in readme[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split(" | ")])
    assert len(rows) >= 5
    for benchmark, what, figure, machine in rows:
        assert figure == quotes.headline(benchmark, what, RESULTS), (benchmark, what)
        assert machine == quotes.machine_label(RESULTS[benchmark]["machine"]), (benchmark, what)


def test_the_catalogue_quotes_the_benchmarks():
    """``sqlheads encoders`` prints each catalogue encoder's rows/s and accuracy: they are the
    encode, encoders and accuracy sections' figures (the package cannot read docs/ at run
    time, so the figures are copied, and this keeps the copy true)."""
    from sqlheads.engine.encoders.catalog import CATALOG

    assert CATALOG["all-MiniLM-L6-v2"].rows_per_second == quotes.catalogue_speed_minilm(RESULTS)
    assert CATALOG["all-MiniLM-L6-v2"].buys == quotes.catalogue_accuracy("MiniLM", RESULTS)
    assert CATALOG["all-mpnet-base-v2"].rows_per_second == quotes.catalogue_speed_mpnet(RESULTS)
    assert CATALOG["all-mpnet-base-v2"].buys == quotes.catalogue_accuracy("all-mpnet", RESULTS)
