"""The sidecar's verbs for analysts: request work, list jobs, cancel one.

The same verbs and parameters as ``heads.request_embed``, ``heads.request_teacher``,
``heads.cancel_job`` and the ``heads.jobs`` view on SQL Server. A request runs the caller's
queries once, now, with the caller's own permissions, and captures their rows with the job
(:mod:`sqlheads.store.job_inputs`): the sidecar reads those rows and never runs a caller's query,
which would run with the sidecar's rights. The query texts stay in the parameters as the record
of what was asked.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from sqlheads.compute.columns import (
    EMBED_INPUT,
    present,
    refuse_duplicate_keys,
    refuse_unnamable_classes,
)
from sqlheads.compute.versions import VersionParams
from sqlheads.engine import kinds
from sqlheads.engine.constraints import MISSING, Names, Params, Text, allowed_of, param
from sqlheads.engine.encoders.catalog import CATALOG
from sqlheads.engine.encoders.text_classifier import model_directory
from sqlheads.engine.students.encoder import EncoderStudentParams
from sqlheads.engine.students.transfer import DEFAULT_ROWS, TransferRecipe
from sqlheads.engine.training.params import TeacherParams
from sqlheads.errors import QueryShapeError, SingleClassError, UnknownKindError
from sqlheads.keywords import spread
from sqlheads.sidecar.embed import EmbedRequest
from sqlheads.store import job_inputs
from sqlheads.store.jobs import JobQueue, in_range, split_keys
from sqlheads.store.keys import required_keys
from sqlheads.store.repository import Store, validate_name
from sqlheads.verbs.embed import check_embedding_set
from sqlheads.verbs.encoders import resolve_encoder
from sqlheads.verbs.rows import READ_ROWS, RowSource, text_source

# The students a teacher job distils: those that read the rows' text, as the teacher does.
TEXT_STUDENTS = tuple(
    sorted(s for s, kind in kinds.STUDENTS.items() if kinds.KINDS[kind].reads == "text")
)
MODEL = Text("a catalogue model name or a directory path")


@dataclass(frozen=True, kw_only=True)
class TeacherRequest(Params):
    """A teacher job's parameters, as ``request-teacher`` (or ``heads.request_teacher``) asks
    and the queue stores them, completed: the labels and texts (queries: the record of what was
    asked; the job reads the rows captured with it), the teacher's model and fine-tuning, the
    students distilled from it (the two measured against this teacher by default; tfidf on
    request, for long texts), the encoder student's model, the transfer rows the teacher labels
    beyond the set's own for its text students (scored on the GPU and cached for them), and how
    its versions are judged and written (train's and distill's split: the same held-out rows)."""

    labels: str = param(
        MISSING,
        Text(
            "a SELECT returning item_key and label, e.g. SELECT id AS item_key, sentiment AS "
            "label FROM dbo.reviews"
        ),
        error=QueryShapeError,
    )
    source: str | None = param(None, Text("a SELECT returning item_key and text"), None)
    model: str = param("all-mpnet-base-v2", MODEL)
    students: tuple[str, ...] = param(
        ("encoder", "word"), Names(TEXT_STUDENTS), error=UnknownKindError
    )
    student_model: str = param(
        "all-MiniLM-L6-v2", MODEL, about="Encoder the encoder student starts from."
    )
    # at most the student model's layers: checked where the model is (check_teacher_request)
    student_layers: int | None = param(
        None,
        *allowed_of(EncoderStudentParams, "layers"),
        about="Transformer layers the encoder student keeps of its model's (fewer: faster; "
        "none: all of them).",
    )
    transfer_rows: int = param(
        DEFAULT_ROWS,
        *allowed_of(TransferRecipe, "rows"),
        about="Rows the teacher labels beyond the set's, for the text students (cached).",
    )
    tuning: TeacherParams = param(factory=TeacherParams)
    version: VersionParams = param(factory=VersionParams)


@spread
def request_embed(store: Store, *, set_name: str, request: EmbedRequest) -> dict[str, Any]:
    """Queue the embedding of the request's source into a set, split into its ``parts`` jobs by
    key range.

    The source's rows are read now: their keys sorted and cut at their quantiles, so the
    parts are of about equal size, and each part's rows captured with it; the encoder is
    registered now, so that parts never race to register it.
    """
    validate_name("set", set_name)
    existing = check_embedding_set(store, set_name, request.embed)
    frames = list(store.run_query(request.source, EMBED_INPUT, "source", READ_ROWS))
    rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["item_key"])
    keys = required_keys(rows["item_key"], "source")  # NULL: 50003, as heads.request_embed does
    rows["item_key"] = keys
    encoder = request.embed.encoder
    chosen = store.encoder(existing.encoder_id) if existing else resolve_encoder(store, encoder)
    stored = replace(request, embed=replace(request.embed, encoder=chosen.name))
    ranges = split_keys(keys, request.parts)
    inputs = [rows[[in_range(k, low, high) for k in keys]] for low, high in ranges]
    jobs = JobQueue(store).enqueue(
        "embed", set_name, stored.to_flat(), ranges=ranges, inputs=inputs
    )
    return {
        "set": set_name,
        "group_id": jobs[0].group_id,
        "job_ids": [job.job_id for job in jobs],
        "parts": len(jobs),
        "rows": len(keys),
        "encoder": chosen.name,
        "engine": request.engine,
    }


@spread
def request_teacher(
    store: Store, *, head: str, set_name: str, request: TeacherRequest
) -> dict[str, Any]:
    """Queue fine-tuning a teacher for ``head`` on the set's rows (then its soft labels and
    students), as ``request`` asks, completed with its defaults; what the job would fail on is
    checked now (:func:`check_teacher_request`)."""
    validate_name("head", head)
    texts = text_source(
        store, store.require_set(set_name), RowSource.optional(store, request.source)
    )
    request = replace(request, source=texts.query)
    labelled = RowSource(store, request.labels).labels()
    check_teacher_request(store, request, labelled)
    refuse_duplicate_keys(labelled["item_key"].tolist())
    captured = job_inputs.teacher_rows(labelled, texts.texts())
    parameters = request.to_flat()
    (job,) = JobQueue(store).enqueue("teacher", set_name, parameters, head=head, inputs=[captured])
    return {"job_id": job.job_id, "head": head, "set": set_name, "parameters": parameters}


def check_teacher_request(store: Store, request: TeacherRequest, labelled: pd.DataFrame) -> None:
    """Refuse now a teacher job that could only fail: labels (read by
    :meth:`RowSource.labels`, which refuses NULL keys with 50003) of fewer than two
    classes (50004), and, on SQLite (whose sidecar runs on this machine), a model that is not
    installed (50041) or not a model directory (50012), and an encoder student of more layers
    than its model has (50012). A server's sidecar runs elsewhere:
    there the job fails at its first attempt instead."""
    classes = sorted({str(v) for v in labelled["label"][present(labelled["label"], "text")]})
    refuse_unnamable_classes(classes)  # the teacher's classes name its soft-label columns
    if len(classes) < 2:
        raise SingleClassError(
            f"the teacher's labels hold {len(classes)} class(es) ({', '.join(classes) or 'none'}): "
            "a classifier needs at least two; label rows of another class"
        )
    if not store.is_sqlite:
        return
    models = [request.model]
    if "encoder" in request.students:
        models.append(request.student_model)
    for model in models:
        if model in CATALOG:
            CATALOG[model].require_installed()
        else:
            model_directory(model)
    if "encoder" in request.students and request.student_layers is not None:
        # as the job builds it: a depth its model has not is refused (50012)
        EncoderStudentParams(model=request.student_model, layers=request.student_layers)


def jobs(store: Store, *, state: str | None = None, kind: str | None = None) -> dict[str, Any]:
    """The queue, newest first (``heads.jobs``), optionally of one state or kind."""
    frame = JobQueue(store).listing(state=state, kind=kind)
    frame = frame.drop(columns=["parameters_json"])
    return {"jobs": json.loads(frame.to_json(orient="records", date_format="iso"))}


def cancel_job(store: Store, *, job_id: int) -> dict[str, Any]:
    """Cancel a queued job at once, or ask a running job's sidecar to stop it."""
    return {"job_id": job_id, "state": JobQueue(store).cancel(job_id)}
