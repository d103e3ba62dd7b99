"""demo: ``sqlheads demo`` and the quick start as a new user runs them, beside their baseline.

``sqlheads --json demo`` runs in a fresh directory with a fresh encoder cache (the first use
exports all-MiniLM-L6-v2 to int8 ONNX, checks it against PyTorch, embeds the 8,530 Rotten
Tomatoes reviews, trains the head and scores every row), then again on the same file (nothing
embedded, nothing trained, every row re-scored in place). The named peer is the one the demo
fits itself: TF-IDF + logistic regression on the same training rows, scored on the same
held-out rows. Each run is a process of its own; its CPU seconds (user + system, from the
operating system) are recorded beside its wall seconds, because on a shared machine the wall
clock measures the other work as much as this one.

Then the README's quick start, command for command, in the same directory (its own file,
``my.db``: the same reviews under integer ids in shuffled order). Both files' heads are trained
again with the held-out split's seed 0 to 4: the quick start's first train and the demo hold
out different rows (the split is fixed by the keys, and the keys differ), and the spread over
seeds says how far apart two splits of the same reviews fall.
"""

from __future__ import annotations

import json
import os
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import Section, Table, fmt, pct, save_figure, scratch_dir
from sqlheads.report.figures import pyplot

# Reviews the demo runs on: every one at full scale, a seeded sample (SQLHEADS_SAMPLE_ROWS)
# below it. The tiny scale reuses the caller's encoder cache: the smoke test measures nothing.
ROWS = {"full": None, "quick": 2_000, "tiny": 200}
SEEDS = {"full": range(5), "quick": range(5), "tiny": range(1)}
STAGES = ("load", "embed", "train", "predict")
# The README's quick start, as written there (tests/test_docs.py holds them to each other).
QUICK_START = (
    "init",
    "load-sample --quick-start",
    'embed   --set reviews --source "SELECT id AS item_key, body AS text FROM reviews"',
    'train   --head sentiment --set reviews --labels "SELECT id AS item_key, sentiment AS label '
    'FROM labels"',
)
SPLITS = {  # file, set, labels query: the demo's keys, then the quick start's ids
    "demo (keys rt-00000 ...)": ("sqlheads-demo.db", "rt_reviews",
                                 "SELECT item_key, label FROM rt_reviews"),
    "quick start (ids 1 ...)": ("my.db", "reviews",
                                "SELECT id AS item_key, sentiment AS label FROM labels"),
}  # fmt: skip


def run(out_dir: Path, scale: str = "full") -> Section:
    folder = scratch_dir("sqlheads-bench-demo-")
    env = {k: v for k, v in os.environ.items() if k not in ("SQLHEADS_URL", "COLUMNS")}
    if scale != "tiny":
        env["SQLHEADS_CACHE"] = str(folder / "cache")  # the first use exports
    if ROWS[scale] is not None:
        env["SQLHEADS_SAMPLE_ROWS"] = str(ROWS[scale])
    first = _demo(folder, env)
    again = _demo(folder, env)
    quick = _quick_start(folder, env)
    seeds = {name: [_trained(folder, env, *split, seed) for seed in SEEDS[scale]]
             for name, split in SPLITS.items()}  # fmt: skip
    result, trained = first["result"], quick["result"]
    reviews = f"{result['rows']:,} Rotten Tomatoes reviews"
    runs = Table(
        f"`sqlheads --json demo` on {reviews} ({result['rows_test']:,} held out), then again "
        "on the same file",
        ["run", "wall s", "CPU s", "embedded", "trained", "accuracy", "macro-F1", "TF-IDF + LR",
         "file bytes"],
        [_row("first use (export included)", first), _row("re-run on the same file", again)],
    )  # fmt: skip
    stages = Table(
        "seconds by stage, as the demo reports them",
        ["stage", "first use", "re-run"],
        [[stage, fmt(first["result"]["seconds"][stage], 1),
          fmt(again["result"]["seconds"][stage], 1)] for stage in STAGES],
    )  # fmt: skip
    quick_start = Table(
        "the README's quick start, command for command (its train's --json)",
        ["reviews", "held out", "accuracy", "TF-IDF + LR", "versus_baseline",
         "embed + train wall s", "CPU s"],
        [[f"{trained['rows_train'] + trained['rows_test']:,}", f"{trained['rows_test']:,}",
          pct(trained["accuracy"]), pct(trained["baseline"]["accuracy"]),
          trained["versus_baseline"], fmt(quick["wall"], 1), fmt(quick["cpu"], 1)]],
    )  # fmt: skip
    by_seed = Table(
        "the same reviews, held out by seed (train --seed N --deploy never): head / TF-IDF + LR",
        ["keys", *(f"seed {seed}" for seed in SEEDS[scale]), "mean head", "mean LR"],
        [[name, *(f"{pct(a)} / {pct(b)}" for a, b in found),
          pct(sum(a for a, _ in found) / len(found)), pct(sum(b for _, b in found) / len(found))]
         for name, found in seeds.items()],
    )  # fmt: skip
    return Section(
        name="demo",
        title="demo: `sqlheads demo` and the quick start, as a new user runs them",
        scale=scale,
        intro=" ".join(__doc__.split("\n\n", 1)[1].split()),
        tables=[runs, stages, quick_start, by_seed],
        notes=[
            f"the demo's versus_baseline: {result['versus_baseline']}",
            f"test_accuracy_from_view {result['test_accuracy_from_view']} (the same accuracy "
            "recomputed from latest_predictions)",
        ],
        plots=[_plot(out_dir, first, again)],
        headline=[
            ["demo", f"{reviews}: head vs TF-IDF + LR, same held-out rows",
             f"{pct(result['accuracy'])} vs {pct(result['baseline_accuracy'])}"],
            ["demo", "first use end to end (export included): wall, CPU",
             f"{fmt(first['wall'])} s, {fmt(first['cpu'])} s CPU"],
            ["demo", "re-run on the same file: wall, CPU; file size unchanged",
             f"{fmt(again['wall'])} s, {fmt(again['cpu'])} s CPU; "
             f"{'yes' if again['bytes'] == first['bytes'] else 'no'}"],
            ["demo", "the README's quick start, first train: head vs TF-IDF + LR",
             f"{pct(trained['accuracy'])} vs {pct(trained['baseline']['accuracy'])}"],
        ],
    )  # fmt: skip


def _demo(folder: Path, env: dict[str, str]) -> dict[str, Any]:
    """One ``sqlheads --json demo``: its result, wall and CPU seconds, the file's size."""
    measured = _sqlheads(folder, env, "demo")
    return measured | {"bytes": (folder / "sqlheads-demo.db").stat().st_size}


def _sqlheads(folder: Path, env: dict[str, str], command: str) -> dict[str, Any]:
    """One ``sqlheads --json ...`` process: its JSON, wall and CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "sqlheads.cli", "--json", *shlex.split(command)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"sqlheads {command} failed:\n{done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"result": json.loads(done.stdout), "wall": wall, "cpu": cpu}


def _quick_start(folder: Path, env: dict[str, str]) -> dict[str, Any]:
    """The quick start's commands on ``my.db``; the train's result, embed + train seconds."""
    runs = [_sqlheads(folder, env, f"--url sqlite:///my.db {c}") for c in QUICK_START]
    return {
        "result": runs[-1]["result"],
        "wall": sum(r["wall"] for r in runs[2:]),
        "cpu": sum(r["cpu"] for r in runs[2:]),
    }


def _trained(
    folder: Path, env: dict[str, str], file: str, set_name: str, labels: str, seed: int
) -> tuple[float, float]:
    """(head, TF-IDF + LR) held-out accuracy of a head trained with split seed ``seed``."""
    command = (
        f"--url sqlite:///{file} train --head split_seed_{seed} --set {set_name} "
        f"--labels {shlex.quote(labels)} --seed {seed} --deploy never"
    )
    result = _sqlheads(folder, env, command)["result"]
    return result["accuracy"], result["baseline"]["accuracy"]


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
