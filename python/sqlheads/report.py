"""``sqlheads report``: one version of a head as an HTML page with PNG plots.

The page shows the confusion matrix and per-class precision/recall of the held-out split (as
recorded at training time), the distribution of the scores that version wrote into
``predictions``, its training loss curve, and how it compares with the head's other versions
(the ``model_summary`` view). The numbers behind the first four plots are also written to
``model_figures`` (replacing that version's previous rows), so that a BI tool can draw them:

===================  =======================  ==================  ==================
figure               series                   x                   value
===================  =======================  ==================  ==================
confusion_matrix     true class               predicted class     rows
per_class            precision|recall|f1      class               metric
loss_curve           train_loss               epoch (1-based)     mean training loss
score_histogram      predicted label          bin's lower edge    predictions
baseline             model|tfidf_lr           accuracy|macro_f1   held-out metric
===================  =======================  ==================  ==================

The version comparison needs no rows of its own: BI tools read ``model_summary`` directly.
This module sits above the store and the engine; matplotlib (the ``report`` extra) draws with
the Agg backend, so no display is needed.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sqlheads.errors import InvalidParameterError
from sqlheads.store.figures import FIGURE_TEXT_LIMIT, prediction_scores, store_figures
from sqlheads.store.repository import Model, Store

SCORE_BINS = 20
FIGURES = (
    "confusion_matrix",
    "per_class",
    "score_histogram",
    "loss_curve",
    "versions",
    "baseline",
)


@dataclass
class ReportData:
    """Everything the page shows, read from the store once."""

    model: Model
    record: dict[str, Any]
    metrics: dict[str, Any]
    loss_curve: list[float]
    scores: pd.DataFrame  # label, score: this version's rows in predictions
    versions: pd.DataFrame  # model_summary rows of the head

    @property
    def classes(self) -> list[str]:
        return list(self.metrics["classes"])


def load_report_data(store: Store, head: str, version: int | None = None) -> ReportData:
    """The deployed version of ``head`` (or ``version``) with its metrics and predictions."""
    model = store.find_model(head, version)
    record = store.model_record(model.model_id)
    return ReportData(
        model=model,
        record=record,
        metrics=json.loads(record["metrics_json"]),
        loss_curve=[float(v) for v in json.loads(record["loss_curve_json"])],
        scores=prediction_scores(store, model.model_id),
        versions=store.read_view("model_summary", head=head).sort_values("version"),
    )


def histogram_edges() -> np.ndarray:
    return np.linspace(0.0, 1.0, SCORE_BINS + 1)


def figure_rows(data: ReportData) -> list[dict[str, Any]]:
    """The numbers behind the plots, one ``model_figures`` row per point."""
    limit = FIGURE_TEXT_LIMIT
    rows: list[dict[str, Any]] = []

    def add(figure: str, series: str, x: str, value: float) -> None:
        rows.append(
            {"figure": figure, "series": series[:limit], "x": x[:limit], "value": float(value)}
        )

    classes = data.classes
    for true, counts in zip(classes, data.metrics["confusion_matrix"], strict=True):
        for predicted, count in zip(classes, counts, strict=True):
            add("confusion_matrix", true, predicted, count)
    for name in classes:
        for metric in ("precision", "recall", "f1"):
            add("per_class", metric, name, data.metrics["per_class"][name][metric])
    for epoch, loss in enumerate(data.loss_curve, start=1):
        add("loss_curve", "train_loss", str(epoch), loss)
    edges = histogram_edges()
    for label, group in data.scores.groupby("label", sort=True):
        counts, _ = np.histogram(group["score"].to_numpy(dtype=float), bins=edges)
        for edge, count in zip(edges[:-1], counts, strict=True):
            add("score_histogram", str(label), f"{edge:.2f}", count)
    for series, metrics in _against_baseline(data).items():
        for metric, value in metrics.items():
            add("baseline", series, metric, value)
    return rows


def _against_baseline(data: ReportData) -> dict[str, dict[str, float]]:
    """This version's held-out accuracy and macro-F1 beside its TF-IDF baseline's: a
    model that does not beat a bag of words is not worth its cost."""
    found = data.metrics.get("baseline", {})
    if "accuracy" not in found:
        return {}
    metrics = ("accuracy", "macro_f1")
    return {
        "model": {m: float(data.metrics[m]) for m in metrics},
        "tfidf_lr": {m: float(found[m]) for m in metrics},
    }


def build_report(
    store: Store, head: str, *, version: int | None = None, out_dir: str | Path | None = None
) -> dict[str, Any]:
    """Write ``index.html`` and its PNG plots for a version; store the figures' numbers."""
    data = load_report_data(store, head, version)
    rows = figure_rows(data)
    store_figures(store, data.model.model_id, rows)
    out = Path(out_dir) if out_dir is not None else Path(f"report-{head}-v{data.model.version}")
    out.mkdir(parents=True, exist_ok=True)
    plots = draw(data, out)
    page = out / "index.html"
    page.write_text(render_html(data, plots), encoding="utf-8")
    return {
        "head": head,
        "version": data.model.version,
        "model_id": data.model.model_id,
        "html": str(page),
        "plots": [str(out / p) for p in plots.values()],
        "figure_rows": len(rows),
        "predictions": len(data.scores),
        "rows_test": int(data.record["rows_test"]),
    }


# ---------------------------------------------------------------------------------------------
# Plots


def pyplot():
    try:
        import matplotlib
    except ImportError:  # pragma: no cover - the report extra is missing
        raise InvalidParameterError(
            "sqlheads report needs matplotlib: pip install 'sqlheads[report]'"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def draw(data: ReportData, out: Path) -> dict[str, str]:
    """One PNG per figure; returns figure name -> file name (relative to the page)."""
    plt = pyplot()
    drawers = {
        "confusion_matrix": _confusion,
        "per_class": _per_class,
        "score_histogram": _scores,
        "loss_curve": _loss,
        "versions": _versions,
        "baseline": _baseline,
    }
    files = {}
    for name in FIGURES:
        figure, ax = plt.subplots(figsize=(6.4, 4.4))
        drawers[name](ax, data)
        figure.tight_layout()
        files[name] = f"{name}.png"
        figure.savefig(out / files[name], dpi=100)
        plt.close(figure)
    return files


def _confusion(ax, data: ReportData) -> None:
    matrix = np.asarray(data.metrics["confusion_matrix"], dtype=float)
    classes = data.classes
    image = ax.imshow(matrix, cmap="Blues")
    ax.figure.colorbar(image, ax=ax, fraction=0.046)
    ticks = np.arange(len(classes))
    ax.set_xticks(ticks, classes, rotation=45 if len(classes) > 3 else 0, ha="right")
    ax.set_yticks(ticks, classes)
    if len(classes) <= 15:
        threshold = matrix.max() / 2 if matrix.size else 0
        for i, j in np.ndindex(matrix.shape):
            ax.text(j, i, f"{int(matrix[i, j]):,}", ha="center", va="center", fontsize=8,
                    color="white" if matrix[i, j] > threshold else "black")  # fmt: skip
    ax.set(xlabel="predicted", ylabel="true",
           title=f"Confusion matrix, held-out split ({int(matrix.sum()):,} rows)")  # fmt: skip


def _per_class(ax, data: ReportData) -> None:
    classes = data.classes
    x = np.arange(len(classes))
    for i, metric in enumerate(("precision", "recall", "f1")):
        values = [data.metrics["per_class"][c][metric] for c in classes]
        ax.bar(x + (i - 1) * 0.27, values, 0.27, label=metric)
    ax.set_xticks(x, classes, rotation=45 if len(classes) > 3 else 0, ha="right")
    ax.set(ylim=(0, 1.05), ylabel="held-out", title="Per-class precision, recall, F1")
    ax.legend(fontsize=8, loc="lower right")


def _scores(ax, data: ReportData) -> None:
    if data.scores.empty:
        ax.text(0.5, 0.5, "no predictions of this version yet:\nrun `sqlheads predict`",
                ha="center", va="center", transform=ax.transAxes)  # fmt: skip
        ax.set_axis_off()
        return
    edges = histogram_edges()
    groups = [(str(k), g["score"].to_numpy(dtype=float)) for k, g in data.scores.groupby("label")]
    ax.hist([g for _, g in groups], bins=edges, stacked=True, label=[k for k, _ in groups])
    ax.set(xlabel="score (probability of the predicted label)", ylabel="predictions",
           title=f"Score distribution ({len(data.scores):,} predictions)")  # fmt: skip
    ax.legend(fontsize=8, title="predicted", loc="upper left")


def _loss(ax, data: ReportData) -> None:
    epochs = np.arange(1, len(data.loss_curve) + 1)
    ax.plot(epochs, data.loss_curve, marker="o", markersize=3)
    ax.set(xlabel="epoch", ylabel="mean training loss (cross-entropy)", title="Training loss")
    ax.grid(True, alpha=0.3)


def _versions(ax, data: ReportData) -> None:
    versions = data.versions
    ax.plot(versions["version"], versions["accuracy"], marker="o", label="accuracy")
    ax.plot(versions["version"], versions["macro_f1"], marker="s", label="macro-F1")
    this = versions[versions["model_id"] == data.model.model_id]
    ax.scatter(this["version"], this["macro_f1"], s=160, facecolors="none", edgecolors="red",
               label="this version", zorder=3)  # fmt: skip
    deployed = versions[versions["is_deployed"] == 1]
    ax.scatter(deployed["version"], deployed["accuracy"], marker="*", s=160, color="gold",
               edgecolors="black", label="deployed", zorder=3)  # fmt: skip
    ax.set_xticks(versions["version"].tolist())
    # Equal scores must look equal: no offset notation (1e-6 + 7.825e-1) and at least a tenth
    # of the [0, 1] scale around the values, so that noise in the 7th digit stays invisible.
    scores = versions[["accuracy", "macro_f1"]].to_numpy(dtype=float)
    ax.set_ylim(max(0.0, scores.min() - 0.05), min(1.0, scores.max() + 0.05))
    ax.ticklabel_format(axis="y", style="plain", useOffset=False)
    ax.set(xlabel="version", ylabel="held-out", title="Versions of this head")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)


def _baseline(ax, data: ReportData) -> None:
    bars = _against_baseline(data)
    if not bars:
        reason = data.metrics.get("baseline", {}).get("skipped", "not recorded for this version")
        ax.text(0.5, 0.5, f"no TF-IDF baseline:\n{reason}", ha="center", va="center", wrap=True)
        ax.set_axis_off()
        return
    positions = np.arange(2)
    for offset, (series, label) in zip(
        (-0.2, 0.2), (("model", data.model.kind), ("tfidf_lr", "TF-IDF + LR baseline")), strict=True
    ):
        values = list(bars[series].values())
        ax.bar(positions + offset, values, width=0.4, label=label)
        for x, value in zip(positions + offset, values, strict=True):
            ax.text(x, value, f"{value:.3f}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(positions, ["accuracy", "macro-F1"])
    ax.set_ylim(0, 1.05)
    ax.set(ylabel="held-out", title="This version beside its baseline (same rows)")
    ax.legend(fontsize=8, loc="lower right")


# ---------------------------------------------------------------------------------------------
# The page


def render_html(data: ReportData, plots: dict[str, str]) -> str:
    record, metrics = data.record, data.metrics
    deployed = bool(
        data.versions.loc[data.versions["model_id"] == data.model.model_id, "is_deployed"].any()
    )
    summary = {
        "head": data.model.head,
        "version": data.model.version,
        "deployed": "yes" if deployed else "no",
        "trained at": record["created_at"],
        "classes": ", ".join(data.classes),
        "held-out accuracy": f"{metrics['accuracy']:.4f}",
        "macro-F1": f"{metrics['macro_f1']:.4f}",
        "TF-IDF + LR baseline (accuracy / macro-F1)": (
            f"{metrics['baseline']['accuracy']:.4f} / {metrics['baseline']['macro_f1']:.4f}"
            if "accuracy" in metrics.get("baseline", {})
            else f"none: {metrics.get('baseline', {}).get('skipped', 'not recorded')}"
        ),
        "rows (train / test)": f"{record['rows_train']:,} / {record['rows_test']:,}",
        "training seconds": f"{record['seconds']:.2f}",
        "parameters": record["params_json"],
        "predictions of this version": f"{len(data.scores):,}",
    }
    per_class = [
        [c, *(f"{metrics['per_class'][c][m]:.3f}" for m in ("precision", "recall", "f1")),
         str(metrics["per_class"][c]["support"])]
        for c in data.classes
    ]  # fmt: skip
    versions = [
        [str(r.version), "yes" if r.is_deployed else "", f"{r.accuracy:.4f}",
         f"{r.macro_f1:.4f}", f"{r.rows_train:,}", f"{r.rows_test:,}", str(r.created_at)]
        for r in data.versions.itertuples(index=False)
    ]  # fmt: skip
    titles = {
        "confusion_matrix": "Confusion matrix",
        "per_class": "Per-class precision and recall",
        "score_histogram": "Score distribution",
        "loss_curve": "Training loss",
        "versions": "Comparison with other versions",
        "baseline": "Beside its TF-IDF baseline",
    }
    figures = "\n".join(
        f'<figure><img src="{html.escape(file)}" alt="{html.escape(titles[name])}">'
        f"<figcaption>{html.escape(titles[name])}</figcaption></figure>"
        for name, file in plots.items()
    )
    title = f"{data.model.head} v{data.model.version}"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)} - sqlheads report</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem; color: #222; }}
table {{ border-collapse: collapse; margin-bottom: 1.5rem; }}
td, th {{ border: 1px solid #ccc; padding: 0.25rem 0.6rem; text-align: left; }}
figure {{ display: inline-block; margin: 0.5rem; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
{_table(["", ""], [[k, str(v)] for k, v in summary.items()], header=False)}
{figures}
<h2>Per class (held-out split)</h2>
{_table(["class", "precision", "recall", "F1", "support"], per_class)}
<h2>Versions</h2>
{_table(["version", "deployed", "accuracy", "macro-F1", "rows train", "rows test", "trained"],
        versions)}
<p>The numbers behind these plots are in the <code>model_figures</code> table
(model_id {data.model.model_id}); versions are in the <code>model_summary</code> view.</p>
</body></html>
"""  # fmt: skip


def _table(columns: list[str], rows: list[list[str]], *, header: bool = True) -> str:
    head = (
        "<tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in columns) + "</tr>" if header else ""
    )
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>" for row in rows
    )
    return f"<table>{head}{body}</table>"
