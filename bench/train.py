"""train: head training time against rows and classes, vs scikit-learn's LogisticRegression.

Synthetic 384-d unit vectors around seeded class centres (like sentence vectors of labelled
text): hard (centres close, classes overlap) and separable (two classes a margin apart, where
nothing is left to learn after a few epochs), 80/20 random split; every classifier fits the
same training rows with its defaults and is scored on the same held-out rows:
``HeadClassifier()`` (the fast recipe: Adam at twice the full recipe's rate, batches of 512, early
stopping on a 10 % validation slice of the training rows, at most 30 epochs),
``HeadClassifier(HeadParams(recipe="full"))`` (the full recipe: Adam amsgrad, 30 epochs,
linear decay, batch max(64, rows/100)) and ``LogisticRegression()`` (lbfgs, 100 iterations at
most).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import Section, Table, fmt, pct, save_figure, timer
from sqlheads.report.figures import pyplot

DIM = 384
SEPARATION = 0.12  # centre norm against unit noise: a task neither classifier finds trivial
SEPARABLE = 0.5  # two centres ~14 noise deviations apart: every classifier gets 100 %
# rows -> class counts; (rows, epochs) where the full recipe trains fewer than its 30 epochs.
# "ratio": rows of the head-vs-LR time comparison on hard and separable data, fitted "repeats"
# times each, interleaved (head, LR, head, LR, ...), so that a shared machine's drift hits both.
SIZES: dict[str, dict[str, Any]] = {
    "full": {"grid": {10_000: (2, 10, 50), 100_000: (2, 10, 50), 1_000_000: (2, 50)},
             "epochs": {1_000_000: 1}, "separable": (100_000,), "ratio": 100_000, "repeats": 5},
    "quick": {"grid": {5_000: (2, 10, 50), 20_000: (2, 50)}, "epochs": {},
              "separable": (100_000,), "ratio": 100_000, "repeats": 3},
    "tiny": {"grid": {600: (2, 5), 1_500: (2,)}, "epochs": {600: 2, 1_500: 2},
             "separable": (1_500,), "ratio": 1_500, "repeats": 2},
}  # fmt: skip
HARD, SEPARABLE_DATA = "hard", "separable"


def synthetic(
    rows: int, classes: int, seed: int = 0, separation: float = SEPARATION
) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed + classes)
    centres = rng.standard_normal((classes, DIM), dtype=np.float32)
    centres *= separation / np.linalg.norm(centres, axis=1, keepdims=True)
    y = rng.integers(0, classes, rows)
    X = rng.standard_normal((rows, DIM), dtype=np.float32) / np.sqrt(DIM, dtype=np.float32)
    X += centres[y]
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X, np.asarray([f"class_{c:02d}" for c in y])


def fit_all(
    rows: int, classes: int, seed_epochs: int | None, separation: float = SEPARATION
) -> dict[str, float]:
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    from sqlheads.engine.heads import HeadClassifier, HeadParams

    X, y = synthetic(rows, classes, separation=separation)
    test = np.random.default_rng(1).random(rows) < 0.2
    train = ~test
    with timer() as fast_seconds:
        fast = HeadClassifier().fit(X[train], y[train])
    seed_params = HeadParams(recipe="full", epochs=seed_epochs or HeadParams.epochs)
    with timer() as seed_seconds:
        seed = HeadClassifier(seed_params).fit(X[train], y[train])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with timer() as lr_seconds:
            lr = LogisticRegression().fit(X[train], y[train])
    return {
        "fast_seconds": fast_seconds[0],
        "fast_cpu": fast_seconds[1],
        "fast_epochs": len(fast.loss_curve_),
        "fast_best_epoch": fast.best_epoch_,
        "fast_accuracy": float(np.mean(fast.predict(X[test]) == y[test])),
        "seed_seconds": seed_seconds[0],
        "seed_epochs": seed_params.epochs,
        "seed_accuracy": float(np.mean(seed.predict(X[test]) == y[test])),
        "lr_seconds": lr_seconds[0],
        "lr_cpu": lr_seconds[1],
        "lr_iterations": int(np.max(lr.n_iter_)),
        "lr_accuracy": float(np.mean(lr.predict(X[test]) == y[test])),
    }


def fit_pair(rows: int, classes: int, separation: float) -> dict[str, float]:
    """One fit of the default head and one of LogisticRegression on the same rows."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    from sqlheads.engine.heads import HeadClassifier

    X, y = synthetic(rows, classes, separation=separation)
    train = np.random.default_rng(1).random(rows) >= 0.2
    with timer() as head_seconds:
        head = HeadClassifier().fit(X[train], y[train])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with timer() as lr_seconds:
            LogisticRegression().fit(X[train], y[train])
    return {
        "head_seconds": head_seconds[0],
        "head_cpu": head_seconds[1],
        "head_epochs": len(head.loss_curve_),
        "lr_seconds": lr_seconds[0],
        "lr_cpu": lr_seconds[1],
    }


GOALS = {(100_000, 2, HARD): 1.5, (1_000_000, 50, HARD): 30.0}  # issue 11: seconds on 2 cores
# The head takes at most this many times LR's time, on overlapping and separable data alike.
RATIO_GOAL, RATIO_GOAL_ROWS = 2.0, 100_000


def run(out_dir: Path, scale: str = "full") -> Section:
    from sqlheads.engine.heads import FAST_BATCH_SIZE, FAST_LR_SCALE, HeadParams

    size = SIZES[scale]
    default_epochs = HeadParams().epochs
    fit_all(256, 2, 1)  # warm-up: imports and first-call allocations are not training time
    results = {
        (rows, classes, HARD): fit_all(rows, classes, size["epochs"].get(rows))
        for rows, class_counts in size["grid"].items()
        for classes in class_counts
    }
    for rows in size["separable"]:
        key = (rows, 2, SEPARABLE_DATA)
        results[key] = fit_all(rows, 2, size["epochs"].get(rows), separation=SEPARABLE)
    ratios: dict[str, list[dict[str, float]]] = {HARD: [], SEPARABLE_DATA: []}
    for _ in range(size["repeats"]):
        for data, separation in ((HARD, SEPARATION), (SEPARABLE_DATA, SEPARABLE)):
            ratios[data].append(fit_pair(size["ratio"], 2, separation))
    section = Section(
        name="train",
        title="train: head vs logistic regression on stored vectors",
        scale=scale,
        intro=__doc__.split("\n", 2)[2].strip()
        + " Times are single fits of the training rows (80 % of `rows`), wall clock and "
        "the process's CPU time: the head on the one PyTorch thread it sets for itself "
        "(`engine/heads.py`), scikit-learn with its BLAS defaults (both cores, so its CPU "
        "time counts both). On a machine shared with other work, CPU time is the steadier "
        "figure.",
    )
    table = Table(
        "Fit time and held-out accuracy",
        ["data", "rows", "classes", "head s (CPU s)", "head epochs (best)", "head accuracy",
         "full recipe s", "full recipe accuracy", "LR s (CPU s; iterations)", "LR accuracy"],
    )  # fmt: skip
    for (rows, classes, data), r in results.items():
        seed_time = fmt(r["seed_seconds"], 1)
        if r["seed_epochs"] != default_epochs:
            projected = r["seed_seconds"] / r["seed_epochs"] * default_epochs
            seed_time = f"{fmt(projected, 1)} (projected from {r['seed_epochs']} epochs)"
        table.rows.append(
            [data, fmt(rows), str(classes),
             f"{fmt(r['fast_seconds'], 2)} ({fmt(r['fast_cpu'], 2)})",
             f"{r['fast_epochs']} ({r['fast_best_epoch']})", pct(r["fast_accuracy"]), seed_time,
             pct(r["seed_accuracy"]),
             f"{fmt(r['lr_seconds'], 2)} ({fmt(r['lr_cpu'], 2)}; {r['lr_iterations']})",
             pct(r["lr_accuracy"])]
        )  # fmt: skip
    section.tables.append(table)
    largest = max(size["grid"])
    for (rows, classes, data), r in results.items():
        if rows == largest or (rows, classes, data) in GOALS or data == SEPARABLE_DATA:
            section.headline.append(
                ["train", f"fit on {int(rows * 0.8):,} {data} rows, {classes} classes: head vs LR",
                 f"{fmt(r['fast_seconds'], 1)} s vs {fmt(r['lr_seconds'], 1)} s; accuracy "
                 f"{pct(r['fast_accuracy'])} vs {pct(r['lr_accuracy'])}"]
            )  # fmt: skip
    for (rows, classes, data), goal in GOALS.items():
        if (rows, classes, data) in results:
            r = results[(rows, classes, data)]
            in_time = r["fast_seconds"] <= goal
            behind = 100 * (r["lr_accuracy"] - r["fast_accuracy"])  # points
            section.notes.append(
                f"Goal, {rows:,} rows x {classes} classes in at most {goal:g} s with accuracy "
                f"no worse than logistic regression: {fmt(r['fast_seconds'], 2)} s wall, "
                f"{fmt(r['fast_cpu'], 2)} s CPU (one thread), {pct(r['fast_accuracy'])} vs "
                f"{pct(r['lr_accuracy'])}: time {'met' if in_time else 'not met'}, accuracy "
                + ("met." if behind <= 0 else f"{behind:.2f} point(s) below, not met.")
            )  # fmt: skip
    ratio_table = Table(
        f"Head vs LR on the same {int(size['ratio'] * 0.8):,} training rows x 2 classes, "
        f"{size['repeats']} fits each, interleaved: time ratio head / LR",
        ["data", "head epochs", "wall ratio: median (min-max)", "CPU ratio: median (min-max)",
         "head s, median", "LR s, median"],
    )  # fmt: skip
    for data, fits in ratios.items():
        wall = [f["head_seconds"] / f["lr_seconds"] for f in fits]
        cpu = [f["head_cpu"] / f["lr_cpu"] for f in fits]
        ratio_table.rows.append(
            [data, "/".join(str(f["head_epochs"]) for f in fits), _spread(wall), _spread(cpu),
             fmt(float(np.median([f["head_seconds"] for f in fits])), 2),
             fmt(float(np.median([f["lr_seconds"] for f in fits])), 2)]
        )  # fmt: skip
        section.headline.append(
            ["train", f"{data} {int(size['ratio'] * 0.8):,} x 2: head / LR time, median of "
             f"{len(fits)} (wall; CPU)", f"{np.median(wall):.2f}x; {np.median(cpu):.2f}x"]
        )  # fmt: skip
        if size["ratio"] < RATIO_GOAL_ROWS:
            continue  # the goal is set at 100,000 rows; smaller sets train the full recipe
        met = min(np.median(wall), np.median(cpu)) <= RATIO_GOAL
        section.notes.append(
            f"Goal, {data} data: the head in at most {RATIO_GOAL:g}x logistic regression's time: "
            f"median {np.median(wall):.2f}x wall, {np.median(cpu):.2f}x CPU over {len(fits)} "
            f"interleaved fits, {'met' if met else 'not met'} (the head runs on one thread, "
            "LR's BLAS on both cores, so on a machine shared with other work the CPU ratio is "
            "the steadier one)."
        )
    section.tables.append(ratio_table)
    section.notes.append(
        f"What the fast recipe trades: {FAST_BATCH_SIZE}-row batches at a constant rate "
        f"({FAST_LR_SCALE:g}x lr) stop "
        f"once the validation loss has gone {HeadParams().patience} epoch(s) without "
        f"falling by at least {HeadParams().tol:g} (`tol`), keeping the best epoch's weights, "
        "so it trains on "
        f"{100 * (1 - HeadParams().validation_fraction):g} % of the training rows and rarely "
        "runs the 30 epochs; the full recipe decays its rate to zero over all 30."
    )
    section.plots.append(_plot(out_dir, results))
    return section


def _spread(values: list[float]) -> str:
    return f"{np.median(values):.2f}x ({min(values):.2f}-{max(values):.2f})"


def _plot(out_dir: Path, results) -> str:
    plt = pyplot()
    figure, ax = plt.subplots(figsize=(7.5, 4.5))
    class_counts = sorted({classes for _, classes, _ in results})
    for i, classes in enumerate(class_counts):
        points = sorted(
            (rows, r) for (rows, c, data), r in results.items() if c == classes and data == HARD
        )
        rows = [p[0] for p in points]
        color = f"C{i}"
        ax.plot(rows, [r["fast_seconds"] for _, r in points], marker="o", color=color,
                label=f"head, {classes} classes")  # fmt: skip
        ax.plot(rows, [r["lr_seconds"] for _, r in points], marker="s", linestyle="--",
                color=color, label=f"LogisticRegression, {classes} classes")  # fmt: skip
    ax.set(xscale="log", yscale="log", xlabel="rows (80 % train)", ylabel="fit seconds",
           title="Training time vs rows (head: default fast recipe)")  # fmt: skip
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    return save_figure(figure, out_dir, "bench-train.png")
