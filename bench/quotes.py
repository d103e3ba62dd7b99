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
