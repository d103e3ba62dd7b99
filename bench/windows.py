"""windows: the long-text window and overlap, chosen by measurement on IMDB.

The default encoder (all-MiniLM-L6-v2, int8 export) embeds a seeded sample of IMDB reviews with
each window length and overlap below, at 2 threads, in one process, one configuration after
another; ``truncate`` (the first window only) is the floor. For each: rows/s, windows per
review, and how well the vectors separate the classes: logistic regression's 5-fold
cross-validated accuracy over the whole sample (stratified, seeded; less noisy than one split)
and the sqlheads head (defaults) on the sample's fixed train/test split.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.common import Section, Table, fmt, pct, save_figure, seeded_subsample, timer
from sqlheads.report.figures import pyplot

SIZES = {"full": 3_000, "quick": 600, "tiny": 40}
# (window tokens, overlap); None: truncate at 256, the floor.
CONFIGS = ((256, None), (128, 0.25), (256, 0.0), (256, 0.25), (256, 0.5), (512, 0.25))
THREADS = 2


def _label(window: int, overlap: float | None) -> str:
    return f"truncate {window}" if overlap is None else f"window {window}, overlap {overlap:g}"


def measure(texts: list[str], y: np.ndarray, train: np.ndarray) -> dict[str, dict]:
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_score

    from sqlheads.engine.encoders.catalog import DEFAULT_MODEL, catalog_encoder
    from sqlheads.engine.encoders.export import export_encoder
    from sqlheads.engine.encoders.onnx_encoder import OnnxEncoder
    from sqlheads.engine.heads import HeadClassifier

    artifact = export_encoder(catalog_encoder(DEFAULT_MODEL).model_dir())
    folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=0)
    results = {}
    for window, overlap in CONFIGS:
        encoder = OnnxEncoder(
            artifact.onnx,
            artifact.tokenizer_json,
            dim=artifact.dim,
            max_length=window,
            threads=THREADS,
            overlap=overlap or 0.0,
        )
        encoder.encode(texts[:8])  # warm-up: the first run allocates
        with timer() as elapsed:
            encoded = encoder.encode(texts, long_text="truncate" if overlap is None else "window")
        X = encoded.vectors
        lr = LogisticRegression(max_iter=1000)
        head = HeadClassifier().fit(X[train], y[train])
        results[_label(window, overlap)] = {
            "rows_per_second": len(texts) / elapsed[0],
            "windows": float(encoded.windows.mean()),
            "cv_accuracy": float(cross_val_score(lr, X, y, cv=folds).mean()),
            "head_accuracy": float(np.mean(head.predict(X[~train]) == y[~train])),
        }
    return results


def run(out_dir: Path, scale: str = "full") -> Section:
    from sqlheads import datasets
    from sqlheads.engine.encoders.onnx_encoder import DEFAULT_MAX_LENGTH, WINDOW_OVERLAP

    frame = seeded_subsample(datasets.imdb(), SIZES[scale])
    y = frame["label"].to_numpy()
    train = (frame["split"] == "train").to_numpy()
    results = measure(frame["text"].tolist(), y, train)
    section = Section(
        name="windows",
        title="windows: long-text window and overlap (IMDB, default encoder)",
        scale=scale,
        intro=__doc__.split("\n", 2)[2].strip(),
    )
    table = Table(
        f"{len(frame):,} IMDB reviews ({int(train.sum()):,} train / {int((~train).sum()):,} "
        f"test for the head), all-MiniLM-L6-v2 int8, {THREADS} threads",
        ["configuration", "rows/s", "windows per review", "LR, 5-fold CV", "head, test split"],
    )
    for label, r in results.items():
        table.rows.append(
            [label, fmt(r["rows_per_second"], 1), fmt(r["windows"], 2),
             pct(r["cv_accuracy"]), pct(r["head_accuracy"])]
        )  # fmt: skip
    section.tables.append(table)
    default = results[_label(DEFAULT_MAX_LENGTH, WINDOW_OVERLAP)]
    best = max(results.values(), key=lambda r: r["cv_accuracy"])
    # One standard error of an accuracy near these over the sample: differences inside it are
    # not differences.
    noise = float(np.sqrt(best["cv_accuracy"] * (1 - best["cv_accuracy"]) / len(frame)))
    within = [
        label for label, r in results.items() if r["cv_accuracy"] >= best["cv_accuracy"] - noise
    ]
    fastest = max(within, key=lambda label: results[label]["rows_per_second"])
    section.notes.append(
        f"The default ({_label(DEFAULT_MAX_LENGTH, WINDOW_OVERLAP)}): "
        f"{fmt(default['rows_per_second'], 1)} rows/s, {pct(default['cv_accuracy'])} "
        f"(LR, CV); the best: {pct(best['cv_accuracy'])}. Within one standard error of the best "
        f"({pct(noise)}): {', '.join(within)}; the fastest of those: {fastest}."
    )
    section.headline.append(
        ["windows", f"IMDB, default window vs truncate ({fmt(len(frame))} reviews, LR CV)",
         f"{pct(default['cv_accuracy'])} at {fmt(default['rows_per_second'], 1)} rows/s vs "
         f"{pct(results[_label(256, None)]['cv_accuracy'])} at "
         f"{fmt(results[_label(256, None)]['rows_per_second'], 1)} rows/s"]
    )  # fmt: skip
    section.plots.append(_plot(out_dir, results))
    return section


def _plot(out_dir: Path, results: dict[str, dict]) -> str:
    plt = pyplot()
    figure, ax = plt.subplots(figsize=(7.5, 4.5))
    for i, (label, r) in enumerate(results.items()):
        ax.scatter(r["rows_per_second"], 100 * r["cv_accuracy"], color=f"C{i}", label=label)
    ax.set(xlabel=f"rows/s ({THREADS} threads)", ylabel="LR 5-fold CV accuracy (%)",
           title="IMDB: window and overlap, speed against accuracy")  # fmt: skip
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    return save_figure(figure, out_dir, "bench-windows.png")
