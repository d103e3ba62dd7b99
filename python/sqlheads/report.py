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
queue_margin         unlabelled               bin's lower edge    rows in the queue
drift                set                      signal              its value
drift_shares         set|training             class               share of rows
===================  =======================  ==================  ==================

The queue and drift sections (``label_queue`` and ``drift`` views, with the verbs' additions)
are the deployed version's: a report of another version says so instead.

The version comparison needs no rows of its own: BI tools read ``model_summary`` directly.
This module sits above the store and the engine; matplotlib (the ``report`` extra) draws with
the Agg backend, so no display is needed.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sqlheads.errors import (
    InvalidParameterError,
    NotFoundError,
    SqlheadsError,
    StoredQueryOwnerError,
)
from sqlheads.store.figures import FIGURE_TEXT_LIMIT, prediction_scores, store_figures
from sqlheads.store.queue_drift import queue_margins
from sqlheads.store.repository import Model, Store
from sqlheads.verbs.drift import NO_SET_JUDGED, drift
from sqlheads.verbs.label_queue import EMPTY_QUEUE, label_queue
from sqlheads.verbs.rows import stored_source

SCORE_BINS = 20
FIGURES = (
    "confusion_matrix",
    "per_class",
    "score_histogram",
    "loss_curve",
    "versions",
    "baseline",
    "queue_margin",
    "drift_shares",
)
QUEUE_TOP = 10  # rows of the label queue the page lists
DRIFT_SIGNALS = (
    "rows_scored",
    "mean_top_probability",
    "top_probability_psi",
    "largest_share_gap",
    "embedding_shift",
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
    queue: dict[str, Any] | str = ""  # label_queue's result, or why there is none
    margins: np.ndarray = field(default_factory=lambda: np.empty(0))  # the whole queue's
    drift: dict[str, Any] | str = ""  # drift's result, or why there is none

    @property
    def classes(self) -> list[str]:
        return list(self.metrics["classes"])


def load_report_data(store: Store, head: str, version: int | None = None) -> ReportData:
    """The deployed version of ``head`` (or ``version``) with its metrics and predictions."""
    model = store.find_model(head, version)
    record = store.model_record(model.model_id)
    data = ReportData(
        model=model,
        record=record,
        metrics=json.loads(record["metrics_json"]),
        loss_curve=[float(v) for v in json.loads(record["loss_curve_json"])],
        scores=prediction_scores(store, model.model_id),
        versions=store.read_view("model_summary", head=head).sort_values("version"),
    )
    deployed = store.deployed_model(head)
    if deployed is None or deployed.model_id != model.model_id:
        data.queue = data.drift = "shown for the deployed version only"
        return data
    try:
        data.queue = label_queue(store, head=head, n=QUEUE_TOP)
        data.margins = queue_margins(store, model.model_id)
    except SqlheadsError as error:  # a version that recorded no labelled keys: say so
        data.queue = error.message
    data.drift = drift(store, head=head)
    return data


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
    if len(data.margins):
        counts, _ = np.histogram(data.margins, bins=edges)
        for edge, count in zip(edges[:-1], counts, strict=True):
            add("queue_margin", "unlabelled", f"{edge:.2f}", count)
    for found in data.drift["sets"] if isinstance(data.drift, dict) else []:
        for signal in (*DRIFT_SIGNALS, "drifted"):
            if found[signal] is not None:
                add("drift", found["set"], signal, float(found[signal]))
        for name, shares in found["class_shares"].items():
            add("drift_shares", found["set"], name, shares["predicted"])
            add("drift_shares", "training", name, shares["training"])
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
    """Write ``index.html`` and its PNG plots for a version; store the figures' numbers. A
    head with students also gets their figure: teacher, students, frozen heads and the
    baseline, accuracy against rows/s (:func:`student_points`)."""
    data = load_report_data(store, head, version)
    rows = figure_rows(data)
    store_figures(store, data.model.model_id, rows)
    out = Path(out_dir) if out_dir is not None else Path(f"report-{head}-v{data.model.version}")
    out.mkdir(parents=True, exist_ok=True)
    plots = draw(data, out)
    if data.versions["teacher_accuracy"].notna().any():
        plt = pyplot()
        figure, ax = plt.subplots(figsize=(6.4, 4.4))
        draw_students(ax, head, *student_points(store, head))
        figure.tight_layout()
        plots["students"] = "students.png"
        figure.savefig(out / plots["students"], dpi=100)
        plt.close(figure)
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
    files = {}
    for name in FIGURES:
        figure, ax = plt.subplots(figsize=(6.4, 4.4))
        DRAWERS[name](ax, data)
        figure.tight_layout()
        files[name] = f"{name}.png"
        figure.savefig(out / files[name], dpi=100)
        plt.close(figure)
    return files


def student_points(store: Store, head: str) -> tuple[list[dict[str, Any]], float | None]:
    """Each version of ``head`` and each version that taught one of them (a teacher head's,
    or a sidecar's fine-tuned teacher), with its held-out accuracy and its rows/s from text on
    this machine (scoring :data:`SPEED_ROWS` rows of its set's source, the encoder included
    for a model that reads vectors); and the TF-IDF baseline of the newest version."""
    from sqlheads.store.soft_labels import find_teacher

    versions = store.read_view("model_summary", head=head).sort_values("version")
    if versions.empty:
        raise NotFoundError(
            f"head {head!r} has no versions: train it with `sqlheads train --head {head} ...`"
        )
    points = []
    teachers: dict[int, str] = {}
    for row in versions.itertuples():
        model = store.find_model(head, int(row.version))
        role = "student" if pd.notna(row.teacher_accuracy) else "head"
        points.append(_speed(store, model, row.set_name, role))
        found = find_teacher(store, row.teacher) if isinstance(row.teacher, str) else None
        if found is not None and found.model_id is not None:
            teachers[found.model_id] = found.name
    for model_id in teachers:
        try:
            teacher = store.model_by_id(model_id)
        except Exception:  # noqa: BLE001 - a teacher head dropped since: nothing to time
            continue
        summary = store.read_view("model_summary", head=teacher.head)
        set_name = summary[summary["model_id"] == model_id]["set_name"].iloc[0]
        points.append(_speed(store, teacher, set_name, "teacher"))
    baseline = versions["baseline_accuracy"].dropna()
    return points, (float(baseline.iloc[-1]) if len(baseline) else None)


SPEED_ROWS = 256  # rows of a set scored to time a version


def _speed(store: Store, model: Model, set_name: str, role: str) -> dict[str, Any]:
    import time

    from sqlheads.compute.columns import EMBED_INPUT
    from sqlheads.engine.encoder import load_encoder
    from sqlheads.engine.kinds import model_kind

    found = store.find_set(set_name)
    point = {"head": model.head, "version": model.version, "kind": model.kind, "role": role,
             "accuracy": model.accuracy, "rows_per_second": None}  # fmt: skip
    try:  # the set's stored query runs for its author alone: for anyone else, no timing
        source = None if found is None else stored_source(store, found)
    except StoredQueryOwnerError:
        source = None
    if source is None:
        return point  # no text to time it on
    texts = next(store.run_query(source, EMBED_INPUT, "source", SPEED_ROWS))
    texts = texts["text"].astype(str).tolist()
    kind = model_kind(model.kind)
    scorer = kind.load(store.model_blob(model.model_id))
    encoder = None
    if kind.reads == "vector":
        registered = store.encoder(model.encoder_id)
        onnx, tokenizer_json = store.encoder_bytes(registered.encoder_id)
        encoder = load_encoder(registered.sha256, onnx=onnx, tokenizer_json=tokenizer_json,
                               dim=registered.dim, max_length=registered.max_length)  # fmt: skip

    def score(part: list[str]) -> None:
        scorer.predict_proba(part if encoder is None else encoder.encode(part).vectors)

    score(texts[:2])  # loaded once, outside the timing
    started = time.perf_counter()
    score(texts)
    point["rows_per_second"] = round(len(texts) / (time.perf_counter() - started), 1)
    return point


def draw_students(ax, head: str, points: list[dict[str, Any]], baseline: float | None) -> None:
    styles = {"teacher": ("*", 220, "gold"), "student": ("o", 60, "tab:blue"),
              "head": ("s", 60, "tab:green")}  # fmt: skip
    labelled = []
    for role, (marker, size, colour) in styles.items():
        shown = [p for p in points if p["role"] == role and p["rows_per_second"]]
        if not shown:  # no marker in the legend for a role with no point drawn
            continue
        ax.scatter([p["rows_per_second"] for p in shown], [p["accuracy"] for p in shown],
                   marker=marker, s=size, color=colour, edgecolors="black", label=role)  # fmt: skip
        labelled += [((p["rows_per_second"], p["accuracy"]),
                      f"{p['head']} v{p['version']} {p['kind']}") for p in shown]  # fmt: skip
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
        ax.annotate(label, (x, y), fontsize=7, textcoords="offset points",
                    xytext=(4 if right else -4, 4 if up else -4),
                    ha="left" if right else "right", va="bottom" if up else "top")  # fmt: skip


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


def _note(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, transform=ax.transAxes)
    ax.set_axis_off()


def _queue_words(data: ReportData) -> str:
    """Why the page lists no queue, as ``sqlheads label-queue`` says it."""
    return data.queue if isinstance(data.queue, str) and data.queue else EMPTY_QUEUE


def _drift_words(data: ReportData) -> str:
    """Why the page judges no set, as ``sqlheads drift`` says it."""
    if isinstance(data.drift, str):
        return data.drift or NO_SET_JUDGED
    notes = [data.drift[k] for k in ("reference", "sets_not_listed") if k in data.drift]
    return "; ".join(notes) or NO_SET_JUDGED


def _queue_margins(ax, data: ReportData) -> None:
    if not len(data.margins):
        _note(ax, f"no label queue:\n{_queue_words(data)}")
        return
    ax.hist(data.margins, bins=histogram_edges())
    ax.set(xlabel="margin (top class probability minus the runner-up's)", ylabel="rows",
           title=f"Label queue: margins of {len(data.margins):,} unlabelled rows")  # fmt: skip


def _drift_shares(ax, data: ReportData) -> None:
    sets = data.drift["sets"] if isinstance(data.drift, dict) else []
    if not sets or not sets[0]["class_shares"]:
        _note(ax, f"no drift figures:\n{_drift_words(data)}")
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


# ---------------------------------------------------------------------------------------------
# The page


# Each figure's alt text (what it is) and caption (how to read it: the plot has its title).
CAPTIONS = {
    "confusion_matrix": (
        "Confusion matrix",
        "The held-out rows by true class (rows) and predicted class (columns): the diagonal "
        "holds what this version got right.",
    ),
    "per_class": (
        "Per-class precision, recall and F1",
        "For each class, on the held-out rows: the share of its predictions that were right "
        "(precision), of its rows that were found (recall), and their harmonic mean (F1).",
    ),
    "score_histogram": (
        "Score distribution",
        "How sure this version was of each label it wrote into predictions: the scores near "
        "the low end are its uncertain rows.",
    ),
    "loss_curve": (
        "Training loss",
        "The mean cross-entropy on the training rows after each epoch; a curve still falling "
        "at its end could use more epochs.",
    ),
    "versions": (
        "Versions of this head",
        "Held-out accuracy and macro-F1 of every version of the head, this one circled and "
        "the deployed one starred.",
    ),
    "baseline": (
        "This version beside its baseline",
        "This version and a TF-IDF + logistic regression model fitted on the same training "
        "rows and scored on the same held-out rows: a version below it is not worth its "
        "encoder.",
    ),
    "students": (
        "Teacher, students, heads and baseline",
        "Held-out accuracy against rows scored per second from text on this machine: up and "
        "to the right is better; the dashed line is the TF-IDF + LR baseline.",
    ),
    "queue_margin": (
        "Label queue margins",
        "The unlabelled rows the deployed version scored, by the gap between its two likeliest "
        "classes: sqlheads label-queue lists the left end first.",
    ),
    "drift_shares": (
        "Drift: class shares",
        "The share of each predicted class in every set scored, beside the training labels' "
        "shares: a set far from the training bars has drifted.",
    ),
}


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
        "predictions of this version": f"{len(data.scores):,}",
    }
    parameters = [[k, _in_words(v)] for k, v in json.loads(record["params_json"]).items()]
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
    figures = "\n".join(
        f'<figure><img src="{html.escape(file)}" alt="{html.escape(CAPTIONS[name][0])}">'
        f"<figcaption>{html.escape(CAPTIONS[name][1])}</figcaption></figure>"
        for name, file in plots.items()
    )
    title = f"{data.model.head} v{data.model.version}"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)} - sqlheads report</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2rem; color: #222; }}
table {{ border-collapse: collapse; margin-bottom: 1.5rem; }}
td, th {{ border: 1px solid #ccc; padding: 0.25rem 0.6rem; text-align: left; }}
figure {{ display: inline-block; margin: 0.5rem; width: 640px; vertical-align: top; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
{_table(["", ""], [[k, str(v)] for k, v in summary.items()], header=False)}
<h2>Parameters</h2>
{_table(["parameter", "value"], parameters)}
{figures}
<h2>Per class (held-out split)</h2>
{_table(["class", "precision", "recall", "F1", "support"], per_class)}
<h2>Versions</h2>
{_table(["version", "deployed", "accuracy", "macro-F1", "rows train", "rows test", "trained"],
        versions)}
{_loop_sections(data)}
<p>The numbers behind these plots are in the <code>model_figures</code> table
(model_id {data.model.model_id}); versions are in the <code>model_summary</code> view.</p>
</body></html>
"""  # fmt: skip


def _in_words(value: Any) -> str:
    """A parameter's value as a cell: a list's items, a mapping's ``name value`` pairs."""
    if isinstance(value, dict):
        return ", ".join(f"{k} {_in_words(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(map(_in_words, value))
    return "none" if value is None else str(value)


def _table(columns: list[str], rows: list[list[str]], *, header: bool = True) -> str:
    head = (
        "<tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in columns) + "</tr>" if header else ""
    )
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>" for row in rows
    )
    return f"<table>{head}{body}</table>"


def _loop_sections(data: ReportData) -> str:
    """The label queue's first rows and the drift of each set, as HTML."""
    if isinstance(data.queue, dict) and data.queue["rows"]:
        queue = _table(
            ["#", "item_key", "set", "predicted", "probability", "margin"],
            [[str(r["queue_rank"]), r["item_key"], r["set"], r["predicted_label"],
              f"{r['probability']:.3f}", f"{r['margin']:.3f}"] for r in data.queue["rows"]],
        )  # fmt: skip
    else:
        queue = f"<p>{html.escape(_queue_words(data))}</p>"
    sets = data.drift["sets"] if isinstance(data.drift, dict) else []

    def shown(value: Any) -> str:
        return "not recorded" if value is None else f"{value:.3f}"

    drift_rows = [
        [r["set"], "yes" if r["drifted"] else "no", f"{r['rows_scored']:,}",
         f"{r['mean_top_probability']:.3f} / {shown(r['held_out_mean_top_probability'])}",
         shown(r["top_probability_psi"]), shown(r["largest_share_gap"]),
         shown(r["embedding_shift"]), "; ".join(r["reasons"])]
        for r in sets
    ]  # fmt: skip
    drifts = (
        _table(
            ["set", "drifted", "rows", "top p / held-out", "PSI", "share gap", "shift", "why"],
            drift_rows,
        )  # fmt: skip
        if drift_rows
        else f"<p>{html.escape(_drift_words(data))}</p>"
    )
    return (
        f"<h2>Label queue (first {QUEUE_TOP} rows of <code>sqlheads label-queue</code>)</h2>\n"
        f"{queue}\n<h2>Drift (<code>sqlheads drift</code>)</h2>\n{drifts}"
    )
