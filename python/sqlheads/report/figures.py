"""The report's plots: one matplotlib figure per name in :data:`~sqlheads.report.data.FIGURES`,
and the students' accuracy against speed. matplotlib (the ``report`` extra) draws with the Agg
backend, so no display is needed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from sqlheads.errors import InvalidParameterError
from sqlheads.report.data import (
    FIGURES,
    SPEED_ROWS,
    ReportData,
    against_baseline,
    drift_words,
    histogram_edges,
    queue_words,
)

# How a deployed version is marked, here and in ``sqlheads plot``.
DEPLOYED = {
    "marker": "*",
    "s": 160,
    "color": "gold",
    "edgecolors": "black",
    "label": "deployed",
    "zorder": 3,
}


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
    files = {}
    for name in FIGURES:
        figure, ax = plt.subplots(figsize=(6.4, 4.4))
        DRAWERS[name](ax, data)
        figure.tight_layout()
        files[name] = f"{name}.png"
        figure.savefig(out / files[name], dpi=100)
        plt.close(figure)
    return files


def draw_students(ax, head: str, points: list[dict[str, Any]], baseline: float | None) -> None:
    styles = {
        "teacher": ("*", 220, "gold"),
        "student": ("o", 60, "tab:blue"),
        "head": ("s", 60, "tab:green"),
    }
    labelled = []
    for role, (marker, size, colour) in styles.items():
        shown = [p for p in points if p["role"] == role and p["rows_per_second"]]
        if not shown:  # no marker in the legend for a role with no point drawn
            continue
        ax.scatter(
            [p["rows_per_second"] for p in shown],
            [p["accuracy"] for p in shown],
            marker=marker,
            s=size,
            color=colour,
            edgecolors="black",
            label=role,
        )
        labelled += [
            ((p["rows_per_second"], p["accuracy"]), f"{p['head']} v{p['version']} {p['kind']}")
            for p in shown
        ]
    if baseline is not None:
        ax.axhline(baseline, color="gray", linestyle="--", label="TF-IDF + LR baseline")
    ax.set(
        xscale="log",
        xlabel=f"rows/s from text ({SPEED_ROWS} rows of the set, this machine)",
        ylabel="held-out accuracy",
        title=f"{head}: teacher, students, heads, baseline",
    )
    ax.grid(True, which="both", alpha=0.3)
    # Room around the points for their labels: a label beside the fastest or the most accurate
    # point ran past the axes and was cut off ("v1 head").
    ax.margins(x=0.25, y=0.15)
    _label_inside(ax, labelled)
    ax.legend(fontsize=8)


def _label_inside(ax, labelled: list[tuple[tuple[float, float], str]]) -> None:
    """Label each point on the side of it that faces the middle of the axes, so that no label
    runs past the frame whatever the point's place."""
    ax.figure.canvas.draw()  # fixes the limits the margins made
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    middle_x = np.sqrt(x0 * x1) if ax.get_xscale() == "log" else (x0 + x1) / 2
    for (x, y), label in labelled:
        right, up = x <= middle_x, y <= (y0 + y1) / 2
        ax.annotate(
            label,
            (x, y),
            fontsize=7,
            textcoords="offset points",
            xytext=(4 if right else -4, 4 if up else -4),
            ha="left" if right else "right",
            va="bottom" if up else "top",
        )


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
            ax.text(
                j,
                i,
                f"{int(matrix[i, j]):,}",
                ha="center",
                va="center",
                fontsize=8,
                color="white" if matrix[i, j] > threshold else "black",
            )
    ax.set(
        xlabel="predicted",
        ylabel="true",
        title=f"Confusion matrix, held-out split ({int(matrix.sum()):,} rows)",
    )


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
        ax.text(
            0.5,
            0.5,
            "no predictions of this version yet:\nrun `sqlheads predict`",
            ha="center",
            va="center",
            transform=ax.transAxes,
        )
        ax.set_axis_off()
        return
    edges = histogram_edges()
    groups = [(str(k), g["score"].to_numpy(dtype=float)) for k, g in data.scores.groupby("label")]
    ax.hist([g for _, g in groups], bins=edges, stacked=True, label=[k for k, _ in groups])
    ax.set(
        xlabel="score (probability of the predicted label)",
        ylabel="predictions",
        title=f"Score distribution ({len(data.scores):,} predictions)",
    )
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
    ax.scatter(
        this["version"],
        this["macro_f1"],
        s=160,
        facecolors="none",
        edgecolors="red",
        label="this version",
        zorder=3,
    )
    deployed = versions[versions["is_deployed"] == 1]
    ax.scatter(deployed["version"], deployed["accuracy"], **DEPLOYED)
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
    bars = against_baseline(data)
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


def _note(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, transform=ax.transAxes)
    ax.set_axis_off()


def _queue_margins(ax, data: ReportData) -> None:
    if not len(data.margins):
        _note(ax, f"no label queue:\n{queue_words(data)}")
        return
    ax.hist(data.margins, bins=histogram_edges())
    ax.set(
        xlabel="margin (top class probability minus the runner-up's)",
        ylabel="rows",
        title=f"Label queue: margins of {len(data.margins):,} unlabelled rows",
    )


def _drift_shares(ax, data: ReportData) -> None:
    sets = data.drift["sets"] if isinstance(data.drift, dict) else []
    if not sets or not sets[0]["class_shares"]:
        _note(ax, f"no drift figures:\n{drift_words(data)}")
        return
    classes = list(sets[0]["class_shares"])
    groups = [("training", [sets[0]["class_shares"][c]["training"] for c in classes])]
    for found in sets:
        shift = found["embedding_shift"]
        name = f"{found['set']}{' (drifted)' if found['drifted'] else ''}"
        name += f", shift {shift:.3f}" if shift is not None else ""
        groups.append((name, [found["class_shares"][c]["predicted"] for c in classes]))
    width = 0.8 / len(groups)
    positions = np.arange(len(classes))
    for offset, (name, shares) in enumerate(groups):
        ax.bar(positions + (offset - (len(groups) - 1) / 2) * width, shares, width, label=name)
    ax.set_xticks(positions, classes, rotation=45 if len(classes) > 3 else 0, ha="right")
    ax.set(ylim=(0, 1.05), ylabel="share of rows", title="Drift: predicted class shares per set")
    ax.legend(fontsize=7)


DRAWERS = {  # each figure's drawing, on one Axes
    "confusion_matrix": _confusion,
    "per_class": _per_class,
    "score_histogram": _scores,
    "loss_curve": _loss,
    "versions": _versions,
    "baseline": _baseline,
    "queue_margin": _queue_margins,
    "drift_shares": _drift_shares,
}
