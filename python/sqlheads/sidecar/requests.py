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
from typing import Any

import pandas as pd

from sqlheads import settings
from sqlheads.compute.columns import (
    EMBED_INPUT,
    present,
    refuse_duplicate_keys,
    refuse_unnamable_classes,
)
from sqlheads.engine.encoders.catalog import CATALOG
from sqlheads.engine.encoders.text_classifier import model_directory
from sqlheads.errors import SingleClassError
from sqlheads.store import job_inputs
from sqlheads.store.jobs import JobQueue, in_range, split_keys
from sqlheads.store.keys import required_keys
from sqlheads.store.repository import Store, validate_name
from sqlheads.verbs.embed import check_embedding_set
from sqlheads.verbs.encoders import resolve_encoder
from sqlheads.verbs.rows import READ_ROWS, RowSource, text_source


def request_embed(
    store: Store,
    *,
    set_name: str,
    source: str,
    encoder: str | None = None,
    long_text: str | None = None,
    parts: int | None = None,
    engine: str | None = None,
    batch_rows: int | None = None,
    batch_size: int | None = None,
) -> dict[str, Any]:
    """Queue the embedding of ``source`` into a set, split into ``parts`` jobs by key range.

    The source's rows are read now: their keys sorted and cut at their quantiles, so the
    parts are of about equal size, and each part's rows captured with it; the encoder is
    registered now, so that parts never race to register it.
    """
    validate_name("set", set_name)
    if long_text is not None:
        long_text = settings.choice("long_text", long_text)
    engine = settings.choice("embed.engine", engine)
    parts = settings.bounded("embed.parts", parts)
    batch_rows = settings.bounded("embed.batch_rows", batch_rows)
    batch_size = settings.bounded("embed.batch_size", batch_size)
    existing = check_embedding_set(store, set_name, encoder, long_text)
    frames = list(store.run_query(source, EMBED_INPUT, "source", READ_ROWS))
    rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["item_key"])
    keys = required_keys(rows["item_key"], "source")  # NULL: 50003, as heads.request_embed does
    rows["item_key"] = keys
    chosen = store.encoder(existing.encoder_id) if existing else resolve_encoder(store, encoder)
    parameters = {
        "source": source,
        "encoder": chosen.name,
        "long_text": long_text,
        "engine": engine,
        "batch_rows": batch_rows,
        "batch_size": batch_size,
    }
    ranges = split_keys(keys, parts)
    inputs = [rows[[in_range(k, low, high) for k in keys]] for low, high in ranges]
    jobs = JobQueue(store).enqueue("embed", set_name, parameters, ranges=ranges, inputs=inputs)
    return {
        "set": set_name,
        "group_id": jobs[0].group_id,
        "job_ids": [job.job_id for job in jobs],
        "parts": len(jobs),
        "rows": len(keys),
        "encoder": chosen.name,
        "engine": engine,
    }


def request_teacher(
    store: Store,
    *,
    head: str,
    set_name: str,
    labels: str,
    source: str | None = None,
    **knobs: Any,
) -> dict[str, Any]:
    """Queue fine-tuning a teacher for ``head`` on the set's rows (then its soft labels and
    students): the parameters checked and completed by the teacher job itself, and what the
    job would fail on checked now (:func:`check_teacher_request`)."""
    validate_name("head", head)
    texts = text_source(store, store.require_set(set_name), RowSource.optional(store, source))
    from sqlheads.sidecar.teacher import validate_teacher_request  # imports transformers: lazily

    given = {key: value for key, value in knobs.items() if value is not None}
    parameters = validate_teacher_request({"labels": labels, "source": texts.query, **given})
    labelled = RowSource(store, labels).labels()
    check_teacher_request(store, parameters, labelled)
    refuse_duplicate_keys(labelled["item_key"].tolist())
    captured = job_inputs.teacher_rows(labelled, texts.texts())
    (job,) = JobQueue(store).enqueue("teacher", set_name, parameters, head=head, inputs=[captured])
    return {"job_id": job.job_id, "head": head, "set": set_name, "parameters": parameters}


def check_teacher_request(store: Store, parameters: dict[str, Any], labelled: pd.DataFrame) -> None:
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
    models = [parameters["model"]]
    if "encoder" in parameters["students"]:
        models.append(parameters["student_model"])
    for model in models:
        if model in CATALOG:
            CATALOG[model].require_installed()
        else:
            model_directory(model)
    if "encoder" in parameters["students"] and parameters["student_layers"] is not None:
        from sqlheads.engine.students.encoder import check_layers  # as the job imports it

        check_layers(parameters["student_model"], parameters["student_layers"])


def jobs(store: Store, *, state: str | None = None, kind: str | None = None) -> dict[str, Any]:
    """The queue, newest first (``heads.jobs``), optionally of one state or kind."""
    frame = JobQueue(store).listing(state=state, kind=kind)
    frame = frame.drop(columns=["parameters_json"])
    return {"jobs": json.loads(frame.to_json(orient="records", date_format="iso"))}


def cancel_job(store: Store, *, job_id: int) -> dict[str, Any]:
    """Cancel a queued job at once, or ask a running job's sidecar to stop it."""
    return {"job_id": job_id, "state": JobQueue(store).cancel(job_id)}
