"""``sqlheads plot``: PNGs in the style of ``sqlheads report``, for slides and tickets.

- ``versions``: a head's versions over time (held-out accuracy and macro-F1 by creation time,
  the deployed one starred), from ``model_summary``;
- ``students``: a head's versions, the versions that taught its students and its TF-IDF
  baseline, held-out accuracy against rows/s from text, measured here by scoring a sample of
  each version's set (the encoder included for a model that reads vectors); an encoder
  student is labelled with its depth (``encoder_student L3``), the dial's one variable;
- ``job``: a sidecar job's progress (from ``jobs``) and, for a teacher job, the teacher's
  training loss curve.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sqlheads.errors import InvalidParameterError, NotFoundError
from sqlheads.report.data import student_points
from sqlheads.report.figures import DEPLOYED, draw_students, pyplot
from sqlheads.store.repository import Store

SIZE = (6.4, 4.4)  # as the report's figures


def plot_figure(
    store: Store,
    what: str,
    *,
    head: str | None = None,
    job_id: int | None = None,
    out: str | None = None,
) -> dict[str, Any]:
    """The command line's ``plot``: checks what is asked, then draws it."""
    if what in ("versions", "students"):
        if head is None:
            raise InvalidParameterError(f"plot {what} needs --head: pass the head to draw")
        draw = plot_versions if what == "versions" else plot_students
        return draw(store, head, Path(out or f"{what}-{head}.png"))
    if what == "job":
        if job_id is None:
            raise InvalidParameterError("plot job needs --job-id: list jobs with `sqlheads jobs`")
        return plot_job(store, job_id, Path(out or f"job-{job_id}.png"))
    raise InvalidParameterError(f"cannot plot {what!r}: pass versions, students or job")


def plot_versions(store: Store, head: str, out: Path) -> dict[str, Any]:
    """A head's versions over time: accuracy and macro-F1 by creation time."""
    versions = _versions(store, head)
    created = pd.to_datetime(versions["created_at"])
    plt = pyplot()
    figure, ax = plt.subplots(figsize=SIZE)
    ax.plot(created, versions["accuracy"], marker="o", label="accuracy")
    ax.plot(created, versions["macro_f1"], marker="s", label="macro-F1")
    for when, row in zip(created, versions.itertuples(), strict=True):
        ax.annotate(
            f"v{row.version} {row.kind}",
            (when, row.accuracy),
            fontsize=7,
            xytext=(3, 4),
            textcoords="offset points",
        )
    deployed = versions["is_deployed"] == 1
    ax.scatter(created[deployed], versions.loc[deployed, "accuracy"], **DEPLOYED)
    ax.set(xlabel="created", ylabel="held-out", title=f"Versions of {head} over time")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    figure.autofmt_xdate()
    return _saved(plt, figure, out, {"head": head, "versions": len(versions)})


def plot_students(store: Store, head: str, out: Path) -> dict[str, Any]:
    """A head's versions, the versions that taught its students and its TF-IDF baseline, as
    held-out accuracy against rows/s from text (:func:`sqlheads.report.data.student_points`)."""
    points, baseline = student_points(store, head)
    for point in points:
        if point["kind"] == "encoder_student":  # the dial's versions differ by their depth
            model = store.find_model(point["head"], point["version"])
            kept = json.loads(store.model_record(model.model_id)["metrics_json"]).get("layers_kept")
            point["kind"] += f" L{len(kept)}" if kept else ""
    plt = pyplot()
    figure, ax = plt.subplots(figsize=SIZE)
    draw_students(ax, head, points, baseline)
    return _saved(plt, figure, out, {"head": head, "points": points, "baseline": baseline})


def plot_job(store: Store, job_id: int, out: Path) -> dict[str, Any]:
    """A job's progress, and for a teacher job the teacher's training loss."""
    jobs = store.read_view("jobs", job_id=job_id)
    if jobs.empty:
        raise NotFoundError(f"job {job_id} does not exist: list jobs with `sqlheads jobs`")
    job = jobs.iloc[0]
    loss = _job_loss_curve(store, job)
    plt = pyplot()
    # A second panel only for a loss curve: a job without one (an embed part, a teacher still
    # running) is one panel, not half an image saying that there is nothing to draw.
    if loss:
        figure, (progress_ax, loss_ax) = plt.subplots(1, 2, figsize=(SIZE[0] * 1.6, SIZE[1]))
    else:
        figure, progress_ax = plt.subplots(figsize=(SIZE[0], SIZE[1] / 2))
    done = 0 if pd.isna(job["progress_done"]) else int(job["progress_done"])
    total = None if pd.isna(job["progress_total"]) else int(job["progress_total"])
    share = done / total if total else 0.0
    progress_ax.barh([0], [share], color="tab:blue")
    progress_ax.barh([0], [1 - share], left=[share], color="lightgray")
    progress_ax.set(
        xlim=(0, 1),
        yticks=[],
        xlabel="share done",
        title=f"job {job_id} ({job['kind']}): {job['state']}",
    )
    stage = "" if pd.isna(job["stage"]) else str(job["stage"])
    progress_ax.text(
        0.5,
        0.0,
        f"{done:,} / {'?' if total is None else f'{total:,}'}\n{stage}",
        ha="center",
        va="center",
        fontsize=9,
    )
    if loss:
        loss_ax.plot(np.arange(1, len(loss) + 1), loss, marker="o", markersize=3)
        loss_ax.set(xlabel="evaluation", ylabel="training loss", title="Teacher's training loss")
        loss_ax.grid(True, alpha=0.3)
    return _saved(
        plt, figure, out, {"job_id": job_id, "done": done, "total": total, "loss_curve": bool(loss)}
    )


def _versions(store: Store, head: str) -> pd.DataFrame:
    versions = store.read_view("model_summary", head=head).sort_values("version")
    if versions.empty:
        raise NotFoundError(
            f"head {head!r} has no versions: train it with `sqlheads train --head {head} ...`"
        )
    return versions


def _job_loss_curve(store: Store, job: pd.Series) -> list[float]:
    result = json.loads(job["result_json"]) if isinstance(job["result_json"], str) else {}
    teacher = result.get("teacher") or {}
    if "model_id" not in teacher:
        return []
    record = store.model_record(int(teacher["model_id"]))
    return [float(v) for v in json.loads(record["loss_curve_json"] or "[]")]


def _saved(plt, figure, out: Path, summary: dict[str, Any]) -> dict[str, Any]:
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(out, dpi=100)
    plt.close(figure)
    return summary | {"file": str(out)}
