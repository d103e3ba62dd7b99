"""Figures the README and the documentation quote, and the machine each was measured on.

Every measured figure a page quotes comes from a file a benchmark wrote: ``docs/benchmarks.json``
(one entry per benchmark, ``python -m bench NAME``). ``tests/test_docs.py`` reads the quotes back
from the pages and checks each against its source, so a re-measured benchmark that changes a
figure fails the suite until the page quotes the new one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.json"


def results(path: Path = RESULTS) -> dict[str, dict[str, Any]]:
    return json.loads(path.read_text(encoding="utf-8"))


def machine_label(machine: dict[str, Any]) -> str:
    """``CPU, AVX-512 VNNI or not, N cores, load L``: what a quoted figure names its machine by.

    VNNI decides int8 encoder speed (the int8 MatMuls run on it), so a figure says whether its
    CPU had it; the load is the 1-minute load average the benchmark recorded at its end.
    """
    vnni = "AVX-512 VNNI" if "avx512_vnni" in machine.get("cpu_flags", []) else "no AVX-512 VNNI"
    load = machine.get("load_average")
    load_text = f"load {load[0]}" if load else "load not recorded"
    cpu, cores = machine.get("cpu", "unknown CPU"), machine.get("cores", "?")
    return f"{cpu}, {vnni}, {cores} cores, {load_text}"


def headline(benchmark: str, what: str, source: dict[str, dict[str, Any]] | None = None) -> str:
    """The figure of the headline row ``what`` of ``benchmark``."""
    section = (source or results())[benchmark]
    for name, row_what, figure in section["headline"]:
        if name == benchmark and row_what == what:
            return figure
    raise KeyError(f"{benchmark} has no headline row {what!r}")


def cell(section: dict[str, Any], caption: str, where: dict[str, str], column: str) -> str:
    """The ``column`` of the row of the table whose caption starts with ``caption`` that has
    the values ``where`` in its columns."""
    for table in section["tables"]:
        if table["caption"].startswith(caption):
            names = table["columns"]
            for row in table["rows"]:
                if all(row[names.index(k)] == v for k, v in where.items()):
                    return row[names.index(column)]
    raise KeyError(f"no row {where} in a table {caption!r}")


def catalogue_speed_minilm(source: dict[str, dict[str, Any]]) -> str:
    """all-MiniLM-L6-v2's rows/s in the catalogue: the encode section, int8 at 2 threads, with
    the median ratio of its rounds to sentence-transformers and the load it was measured under."""
    ratio = "x sentence-transformers, median (range)"

    def at(data: str) -> tuple[str, str]:
        where = {"data": data, "path": "int8", "threads": "2"}
        rows_per_second = cell(source["encode"], "Rows per second", where, "rows/s")
        median = cell(source["encode"], "Rows per second", where, ratio).split()[0]
        return rows_per_second, median

    (rt, rt_x), (imdb, imdb_x) = at("Rotten Tomatoes"), at("IMDB")
    load = source["encode"]["machine"]["load_average"][0]
    return f"RT {rt} ({rt_x} s-t), IMDB {imdb} ({imdb_x}), at load {load}"


def catalogue_speed_mpnet(source: dict[str, dict[str, Any]]) -> str:
    """all-mpnet-base-v2's rows/s in the catalogue: the encoders section, int8 at 2 threads,
    with the load it was measured under."""

    def at(data: str) -> tuple[str, str]:
        where = {"encoder": "all-mpnet-base-v2", "data": data, "path": "int8"}
        columns = ("rows/s", "x sentence-transformers")
        found = [cell(source["encoders"], "Rows per second", where, c) for c in columns]
        return found[0], found[1]

    (rt, rt_x), (imdb, imdb_x) = at("Rotten Tomatoes"), at("IMDB")
    load = source["encoders"]["machine"]["load_average"][0]
    return f"RT {rt} ({rt_x} s-t), IMDB {imdb} ({imdb_x}), at load {load}"


def catalogue_accuracy(encoder: str, source: dict[str, dict[str, Any]]) -> str:
    """A catalogue encoder's held-out accuracy with a head on its frozen vectors: the accuracy
    section's window rows for Rotten Tomatoes and IMDB (and how many IMDB reviews)."""
    table = next(t for t in source["accuracy"]["tables"] if t["caption"] == "Held-out accuracy")
    names = table["columns"]

    def row(data: str) -> list[str]:
        return next(
            r for r in table["rows"]
            if r[names.index("data")] == data
            and encoder in r[names.index("model")] and "(window)" in r[names.index("model")]
            and "sqlheads head" in r[names.index("model")]
        )  # fmt: skip

    rt, imdb = row("Rotten Tomatoes"), row("IMDB")
    reviews = sum(int(imdb[names.index(c)].replace(",", "")) for c in ("train rows", "test rows"))
    accuracy = names.index("accuracy")
    return f"RT {rt[accuracy]}, IMDB {imdb[accuracy]} ({reviews:,} reviews)"
