"""What a report shows, read from the store once: a version's metrics, its predictions'
scores, the head's other versions, the label queue and drift, and the students' speed; and the
numbers behind the plots, as ``model_figures`` rows (the table in :mod:`sqlheads.report`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from sqlheads.errors import NotFoundError, SqlheadsError, StoredQueryOwnerError
from sqlheads.store.figures import FIGURE_TEXT_LIMIT, prediction_scores
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


def queue_words(data: ReportData) -> str:
    """Why the page lists no queue, as ``sqlheads label-queue`` says it."""
    return data.queue if isinstance(data.queue, str) and data.queue else EMPTY_QUEUE


def drift_words(data: ReportData) -> str:
    """Why the page judges no set, as ``sqlheads drift`` says it."""
    if isinstance(data.drift, str):
        return data.drift or NO_SET_JUDGED
    notes = [data.drift[k] for k in ("reference", "sets_not_listed") if k in data.drift]
    return "; ".join(notes) or NO_SET_JUDGED


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
    for series, metrics in against_baseline(data).items():
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


def against_baseline(data: ReportData) -> dict[str, dict[str, float]]:
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
    from sqlheads.engine.encoders.onnx_encoder import load_encoder
    from sqlheads.engine.kinds import model_kind
    from sqlheads.verbs.encoders import encoder_ref

    found = store.find_set(set_name)
    point = {
        "head": model.head,
        "version": model.version,
        "kind": model.kind,
        "role": role,
        "accuracy": model.accuracy,
        "rows_per_second": None,
    }
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
        encoder = load_encoder(encoder_ref(store, store.encoder(model.encoder_id)))

    def score(part: list[str]) -> None:
        scorer.predict_proba(part if encoder is None else encoder.encode(part).vectors)

    score(texts[:2])  # loaded once, outside the timing
    started = time.perf_counter()
    score(texts)
    point["rows_per_second"] = round(len(texts) / (time.perf_counter() - started), 1)
    return point
