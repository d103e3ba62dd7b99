"""train: head training time against rows and classes, vs scikit-learn's LogisticRegression.

Synthetic 384-d unit vectors around seeded class centres (like sentence vectors of labelled
text), 80/20 random split; both classifiers fit the same training rows with their defaults
(``HeadClassifier()``: 30 epochs, batch max(64, rows/100), Adam amsgrad;
``LogisticRegression()``: lbfgs, 100 iterations at most) and are scored on the same held-out rows.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import Section, Table, fmt, pct, save_figure, timer
from sqlheads.report import pyplot

DIM = 384
SEPARATION = 0.12  # centre norm against unit noise: a task neither classifier finds trivial
# rows -> class counts; (rows, epochs) where the head trains fewer epochs than its default.
SIZES: dict[str, dict[str, Any]] = {
    "full": {"grid": {10_000: (2, 10, 50), 100_000: (2, 10, 50), 1_000_000: (2, 50)},
             "epochs": {1_000_000: 3}},
    "quick": {"grid": {5_000: (2, 10, 50), 20_000: (2, 50)}, "epochs": {}},
    "tiny": {"grid": {600: (2, 5), 1_500: (2,)}, "epochs": {600: 2, 1_500: 2}},
}  # fmt: skip


def synthetic(rows: int, classes: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed + classes)
    centres = rng.standard_normal((classes, DIM), dtype=np.float32)
    centres *= SEPARATION / np.linalg.norm(centres, axis=1, keepdims=True)
    y = rng.integers(0, classes, rows)
    X = rng.standard_normal((rows, DIM), dtype=np.float32) / np.sqrt(DIM, dtype=np.float32)
    X += centres[y]
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X, np.asarray([f"class_{c:02d}" for c in y])


def fit_both(rows: int, classes: int, epochs: int | None) -> dict[str, float]:
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    from sqlheads.engine.heads import HeadClassifier, HeadParams

    X, y = synthetic(rows, classes)
    test = np.random.default_rng(1).random(rows) < 0.2
    train = ~test
    params = HeadParams() if epochs is None else HeadParams(epochs=epochs)
    with timer() as head_seconds:
        head = HeadClassifier(params).fit(X[train], y[train])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        with timer() as lr_seconds:
            lr = LogisticRegression().fit(X[train], y[train])
    return {
        "head_seconds": head_seconds[0],
        "head_epochs": params.epochs,
        "head_accuracy": float(np.mean(head.predict(X[test]) == y[test])),
        "lr_seconds": lr_seconds[0],
        "lr_iterations": int(np.max(lr.n_iter_)),
        "lr_accuracy": float(np.mean(lr.predict(X[test]) == y[test])),
    }


def run(out_dir: Path, scale: str = "full") -> Section:
    from sqlheads.engine.heads import HeadParams, default_batch_size

    size = SIZES[scale]
    default_epochs = HeadParams().epochs
    fit_both(256, 2, 1)  # warm-up: imports and first-call allocations are not training time
    results = {
        (rows, classes): fit_both(rows, classes, size["epochs"].get(rows))
        for rows, class_counts in size["grid"].items()
        for classes in class_counts
    }
    section = Section(
        name="train",
        title="train: head vs logistic regression on stored vectors",
        scale=scale,
        intro=__doc__.split("\n", 2)[2].strip()
        + " Times are single fits of the training rows (80 % of `rows`): the head on the "
        "one PyTorch thread it sets for itself (`engine/heads.py`), scikit-learn with its "
        "BLAS defaults.",
    )
    table = Table(
        "Fit time and held-out accuracy",
        ["rows", "classes", "head epochs", "head s", "head s/epoch",
         f"head s, {default_epochs} epochs", "head accuracy", "LR s (iterations)",
         "LR accuracy"],
    )  # fmt: skip
    for (rows, classes), r in results.items():
        per_epoch = r["head_seconds"] / r["head_epochs"]
        projected = "" if r["head_epochs"] == default_epochs else " (projected)"
        table.rows.append(
            [fmt(rows), str(classes), str(r["head_epochs"]), fmt(r["head_seconds"], 1),
             fmt(per_epoch, 2), fmt(per_epoch * default_epochs, 1) + projected,
             pct(r["head_accuracy"]), f"{fmt(r['lr_seconds'], 1)} ({r['lr_iterations']})",
             pct(r["lr_accuracy"])]
        )  # fmt: skip
    section.tables.append(table)
    at_default = [rows for (rows, _), r in results.items() if r["head_epochs"] == default_epochs]
    shown = max(at_default or size["grid"])  # the largest size trained with default epochs
    for (rows, classes), r in results.items():
        if rows == shown and classes in (2, max(size["grid"][rows])):
            section.headline.append(
                ["train", f"fit on {int(rows * 0.8):,} rows, {classes} classes, "
                 f"{r['head_epochs']} epochs: head vs LR",
                 f"{fmt(r['head_seconds'], 1)} s vs {fmt(r['lr_seconds'], 1)} s; accuracy "
                 f"{pct(r['head_accuracy'])} vs {pct(r['lr_accuracy'])}"]
            )  # fmt: skip
    short = sorted({rows for (rows, _), r in results.items() if r["head_epochs"] < default_epochs})
    if short:
        section.notes.append(
            f"At {', '.join(f'{r:,}' for r in short)} rows the head trained "
            f"{size['epochs'].get(short[0], '')} epoch(s) to fit the time budget; its "
            f"{default_epochs}-epoch time is that run's time per epoch x {default_epochs} "
            "(time is linear in epochs), marked projected."
        )
    (rows, classes), r = max(results.items(), key=lambda item: item[0])
    batch = default_batch_size(int(rows * 0.8))
    steps = r["head_epochs"] * -(-int(rows * 0.8) // batch)
    section.notes.append(
        f"The head takes one optimiser step per batch; by default a batch is 64 rows, or a "
        f"hundredth of the training rows when that is larger ({batch:,} here), so an epoch is "
        f"about 100 steps. Measured {1000 * r['head_seconds'] / steps:.2f} ms a step "
        f"({rows:,} rows, {classes} classes)"
        + (
            "; logistic regression (a few dozen full-batch L-BFGS iterations) still fitted "
            "faster in every row above"
            if all(r["lr_seconds"] < r["head_seconds"] for r in results.values())
            else ""
        )
        + "."
    )
    section.plots.append(_plot(out_dir, results, default_epochs))
    return section


def _plot(out_dir: Path, results, default_epochs: int) -> str:
    plt = pyplot()
    figure, ax = plt.subplots(figsize=(7.5, 4.5))
    class_counts = sorted({classes for _, classes in results})
    for i, classes in enumerate(class_counts):
        points = sorted((rows, r) for (rows, c), r in results.items() if c == classes)
        rows = [p[0] for p in points]
        color = f"C{i}"
        head = [r["head_seconds"] / r["head_epochs"] * default_epochs for _, r in points]
        ax.plot(rows, head, marker="o", color=color, label=f"head, {classes} classes")
        projected = [(n, h) for (n, r), h in zip(points, head, strict=True)
                     if r["head_epochs"] != default_epochs]  # fmt: skip
        if projected:
            ax.scatter(*zip(*projected, strict=True), s=90, facecolors="none", color=color)
        ax.plot(rows, [r["lr_seconds"] for _, r in points], marker="s", linestyle="--",
                color=color, label=f"LogisticRegression, {classes} classes")  # fmt: skip
    ax.set(xscale="log", yscale="log", xlabel="rows (80 % train)", ylabel="fit seconds",
           title=f"Training time vs rows (head: {default_epochs} epochs; "
           "ringed points projected from fewer)")  # fmt: skip
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    return save_figure(figure, out_dir, "bench-train.png")
