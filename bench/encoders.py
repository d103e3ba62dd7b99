"""encoders: each installed catalogue encoder vs sentence-transformers on the same model.

For every encoder of ``engine.encoders.catalog`` whose packages are installed (all-MiniLM-L6-v2
alone at the tiny scale): rows/s of sqlheads' int8 and fp32 exports and of
``SentenceTransformer(model_dir).encode`` on the same texts (seeded samples of Rotten Tomatoes
and IMDB reviews, 256-token truncation on both sides, batches of 32), each path in its own
process at the largest thread count, the set repeated and interleaved, best of the rounds.
Then a head and logistic regression on int8 vs fp32 vectors of a seeded Rotten Tomatoes sample
(its fixed split), which decides whether int8 is worth its speed for that encoder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from bench.common import Section, Table, cached_vectors, fmt, pct, save_figure, seeded_subsample
from bench.encode import PEER, _unit, measure_path, run_isolated
from sqlheads.report.figures import pyplot

PATHS = ("int8", "fp32", PEER)
SIZES: dict[str, dict[str, Any]] = {
    "full": {"rt": 300, "imdb": 32, "threads": 2, "rounds": 2, "head_rows": 2_000, "all": True},
    "quick": {"rt": 100, "imdb": 8, "threads": 2, "rounds": 1, "head_rows": 600, "all": True},
    "tiny": {"rt": 20, "imdb": 2, "threads": 2, "rounds": 1, "head_rows": 200, "all": False},
}  # fmt: skip


def run(out_dir: Path, scale: str = "full") -> Section:
    from sqlheads import datasets
    from sqlheads.engine.encoders.catalog import CATALOG, DEFAULT_MODEL

    size = SIZES[scale]
    models = [
        name
        for name, entry in CATALOG.items()
        if entry.installed() and (size["all"] or name == DEFAULT_MODEL)
    ]
    rt, imdb = datasets.rotten_tomatoes(), datasets.imdb()
    samples = {
        "Rotten Tomatoes": seeded_subsample(rt, size["rt"])["text"].tolist(),
        "IMDB": seeded_subsample(imdb, size["imdb"])["text"].tolist(),
    }
    threads = size["threads"]
    best: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for _ in range(size["rounds"]):
        for model in models:
            for path in PATHS:
                result = run_isolated(threads, measure_path, path, threads, samples, model)
                kept = best.setdefault((model, path), result)
                for data, m in result.items():
                    if m["seconds"] < kept[data]["seconds"]:
                        kept[data] = m
    section = Section(
        name="encoders",
        title="encoders: the catalogue against sentence-transformers",
        scale=scale,
        intro=__doc__.split("\n", 2)[2].strip(),
    )
    speed = Table(
        f"Rows per second at {threads} threads ({len(samples['Rotten Tomatoes'])} Rotten "
        f"Tomatoes and {len(samples['IMDB'])} IMDB reviews)",
        ["encoder", "data", "path", "rows/s", "x sentence-transformers", "min cosine to it"],
    )
    for model in models:
        for data, texts in samples.items():
            peer = best[(model, PEER)][data]
            for path in PATHS:
                m = best[(model, path)][data]
                cosine = np.sum(_unit(m["vectors"]) * _unit(peer["vectors"]), axis=1)
                m["rate"] = len(texts) / m["seconds"]
                speed.rows.append(
                    [model, data, path, fmt(m["rate"], 1),
                     f"{peer['seconds'] / m['seconds']:.2f}x", f"{cosine.min():.4f}"]
                )  # fmt: skip
    section.tables.append(speed)
    accuracy = Table(
        f"Accuracy on int8 vs fp32 vectors: {size['head_rows']:,} Rotten Tomatoes reviews, "
        "their fixed split",
        ["encoder", "classifier", "fp32 vectors", "int8 vectors", "difference (points)"],
    )
    frame = seeded_subsample(rt, size["head_rows"])
    for model in models:
        found = _int8_vs_fp32(model, frame)
        for name, label in (("head", "sqlheads head (defaults)"), ("lr", "logistic regr.")):
            diff = 100 * (found[(name, "int8")] - found[(name, "fp32")])
            accuracy.rows.append(
                [model, label, pct(found[(name, "fp32")]), pct(found[(name, "int8")]),
                 f"{diff:+.1f}"]
            )  # fmt: skip
        head_diff = 100 * (found[("head", "int8")] - found[("head", "fp32")])
        int8 = best[(model, "int8")]
        section.headline.append(
            ["encoders", f"{model} int8 rows/s at {threads} threads vs sentence-transformers "
             "(Rotten Tomatoes / IMDB)",
             " / ".join(f"{fmt(int8[d]['rate'], 1)} "
                        f"({best[(model, PEER)][d]['seconds'] / int8[d]['seconds']:.2f}x)"
                        for d in samples)]
        )  # fmt: skip
        section.notes.append(
            f"{model}: head accuracy on int8 vectors {head_diff:+.1f} point(s) from fp32 "
            + (
                "(within 0.5 point: int8 is the catalogue's default)."
                if abs(head_diff) <= 0.5
                else "(more than 0.5 point on a sample where one point is "
                f"{len(frame) // 5 // 100} reviews; register `--quantization none` where that "
                "matters)."
            )
        )
    section.tables.append(accuracy)
    section.plots.append(_plot(out_dir, models, samples, best))
    return section


def _int8_vs_fp32(model: str, frame) -> dict[tuple[str, str], float]:
    from sklearn.linear_model import LogisticRegression

    from sqlheads.engine.heads import HeadClassifier

    train, test = frame["split"] == "train", frame["split"] == "test"
    y = frame["label"].to_numpy()
    found = {}
    for quantization, path in (("int8", "int8"), ("none", "fp32")):
        X, _ = cached_vectors("rt", quantization, frame["text"].tolist(), model=model)
        head = HeadClassifier().fit(X[train], y[train])
        found[("head", path)] = float(np.mean(head.predict(X[test]) == y[test]))
        lr = LogisticRegression(max_iter=1000).fit(X[train], y[train])
        found[("lr", path)] = float(np.mean(lr.predict(X[test]) == y[test]))
    return found


def _plot(out_dir: Path, models, samples, best) -> str:
    plt = pyplot()
    figure, axes = plt.subplots(1, len(samples), figsize=(5.2 * len(samples), 3.8))
    width = 0.8 / len(PATHS)
    for ax, data in zip(np.atleast_1d(axes), samples, strict=True):
        for i, path in enumerate(PATHS):
            x = np.arange(len(models)) + (i - (len(PATHS) - 1) / 2) * width
            bars = ax.bar(x, [best[(m, path)][data]["rate"] for m in models], width, label=path)
            ax.bar_label(bars, fmt="%.0f", fontsize=7)
        ax.set_xticks(np.arange(len(models)), models, fontsize=8)
        ax.set(yscale="log", ylabel="rows / s", title=data)
        ax.legend(fontsize=8)
    figure.suptitle("Catalogue encoders on CPU: sqlheads ONNX vs sentence-transformers")
    return save_figure(figure, out_dir, "bench-encoders.png")
