"""demo: ``sqlheads demo`` as a new user runs it, first use and re-run, beside its baseline.

``sqlheads --json demo`` runs in a fresh directory with a fresh encoder cache (the first use
exports all-MiniLM-L6-v2 to int8 ONNX, checks it against PyTorch, embeds the 8,530 Rotten
Tomatoes reviews, trains the head and scores every row), then again on the same file (nothing
embedded, nothing trained, every row re-scored in place). The named peer is the one the demo
fits itself: TF-IDF + logistic regression on the same training rows, scored on the same
held-out rows. Each run is a process of its own; its CPU seconds (user + system, from the
operating system) are recorded beside its wall seconds, because on a shared machine the wall
clock measures the other work as much as this one.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import Section, Table, fmt, pct, save_figure, scratch_dir
from sqlheads.report import pyplot

# Reviews the demo runs on: every one at full scale, a seeded sample (SQLHEADS_SAMPLE_ROWS)
# below it. The tiny scale reuses the caller's encoder cache: the smoke test measures nothing.
ROWS = {"full": None, "quick": 2_000, "tiny": 200}
STAGES = ("load", "embed", "train", "predict")


def run(out_dir: Path, scale: str = "full") -> Section:
    folder = scratch_dir("sqlheads-bench-demo-")
    env = {k: v for k, v in os.environ.items() if k not in ("SQLHEADS_URL", "COLUMNS")}
    if scale != "tiny":
        env["SQLHEADS_CACHE"] = str(folder / "cache")  # the first use exports
    if ROWS[scale] is not None:
        env["SQLHEADS_SAMPLE_ROWS"] = str(ROWS[scale])
    first = _demo(folder, env)
    again = _demo(folder, env)
    result = first["result"]
    rows = [
        _row("first use (export included)", first),
        _row("re-run on the same file", again),
    ]
    stages = [[stage, fmt(first["result"]["seconds"][stage], 1),
               fmt(again["result"]["seconds"][stage], 1)] for stage in STAGES]  # fmt: skip
    plots = [_plot(out_dir, first, again)]
    reviews = f"{result['rows']:,} Rotten Tomatoes reviews"
    return Section(
        name="demo",
        title="demo: `sqlheads demo`, first use and re-run",
        scale=scale,
        intro=__doc__.split("\n\n", 1)[1].replace("\n", " ").strip(),
        tables=[
            Table(
                f"`sqlheads --json demo` on {reviews} ({result['rows_test']:,} held out), "
                "then again on the same file",
                [
                    "run",
                    "wall s",
                    "CPU s",
                    "embedded",
                    "trained",
                    "accuracy",
                    "macro-F1",
                    "TF-IDF + LR",
                    "file bytes",
                ],  # fmt: skip
                rows,
            ),
            Table(
                "seconds by stage, as the demo reports them",
                ["stage", "first use", "re-run"],
                stages,
            ),  # fmt: skip
        ],
        notes=[
            f"versus_baseline: {result['versus_baseline']}",
            f"test_accuracy_from_view {result['test_accuracy_from_view']} (the same accuracy "
            "recomputed from latest_predictions)",
        ],
        plots=plots,
        headline=[
            [
                "demo",
                f"{reviews}: head vs TF-IDF + LR, same held-out rows",
                f"{pct(result['accuracy'])} vs {pct(result['baseline_accuracy'])}",
            ],
            [
                "demo",
                "first use end to end (export included): wall, CPU",
                f"{fmt(first['wall'])} s, {fmt(first['cpu'])} s CPU",
            ],
            [
                "demo",
                "re-run on the same file: wall, CPU; file size unchanged",
                f"{fmt(again['wall'])} s, {fmt(again['cpu'])} s CPU; "
                f"{'yes' if again['bytes'] == first['bytes'] else 'no'}",
            ],
        ],  # fmt: skip
    )


def _demo(folder: Path, env: dict[str, str]) -> dict[str, Any]:
    """One ``sqlheads --json demo`` process: its result, wall and CPU seconds, the file's size."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "sqlheads.cli", "--json", "demo"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"sqlheads demo failed:\n{done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    database = folder / "sqlheads-demo.db"
    return {
        "result": json.loads(done.stdout),
        "wall": wall,
        "cpu": cpu,
        "bytes": database.stat().st_size,
    }


def _row(run_name: str, measured: dict[str, Any]) -> list[str]:
    result = measured["result"]
    return [
        run_name,
        fmt(measured["wall"], 1),
        fmt(measured["cpu"], 1),
        f"{result['embedded']:,}",
        "yes" if result["trained"] else "no",
        f"{result['accuracy']:.4f}",
        f"{result['macro_f1']:.4f}",
        f"{result['baseline_accuracy']:.4f}",
        f"{measured['bytes']:,}",
    ]


def _plot(out_dir: Path, first: dict[str, Any], again: dict[str, Any]) -> str:
    plt = pyplot()
    figure, ax = plt.subplots(figsize=(6.4, 3.6))
    for offset, (label, measured) in enumerate((("first use", first), ("re-run", again))):
        seconds = [measured["result"]["seconds"][stage] for stage in STAGES]
        ax.barh([i + 0.4 * offset for i in range(len(STAGES))], seconds, height=0.4, label=label)
    ax.set_yticks([i + 0.2 for i in range(len(STAGES))], STAGES)
    ax.set(xlabel="seconds (wall, as the demo reports them)", title="sqlheads demo by stage")
    ax.legend(fontsize=8)
    return save_figure(figure, out_dir, "bench-demo.png")
