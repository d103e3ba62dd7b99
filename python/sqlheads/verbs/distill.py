"""``distill``: a teacher's soft labels distilled into a new version of a head.

The rows are read here (the gold labels, the soft labels, the student's input: texts or the
set's vectors), put side by side in one frame, one row per key, and handed to
:func:`sqlheads.compute.distill.distill`; its row becomes the new version, and soft labels
that came from a caller's query are stored under the teacher's name.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from typing import Any

import pandas as pd

from sqlheads import settings
from sqlheads.compute.distill import distill as distill_rows
from sqlheads.engine.kinds import ModelKind, StudentParams
from sqlheads.engine.progress import Progress
from sqlheads.engine.students.distillation import DistillParams
from sqlheads.store.keys import required_keys
from sqlheads.store.repository import EmbeddingSet, Encoder, Store, validate_name
from sqlheads.store.soft_labels import find_teacher
from sqlheads.verbs import baselines, teach
from sqlheads.verbs.locks import LOCK_TIMEOUT_MS, holding
from sqlheads.verbs.rows import RowSource, text_source
from sqlheads.verbs.soft_labels import (
    SoftLabels,
    refuse_foreign_keys,
    refuse_foreign_teacher,
    soft_labels_for,
    stored_teacher,
)
from sqlheads.verbs.versions import record_version


@holding(("set", True))  # as train: the head's lock only while the version is written
def distill(
    store: Store,
    *,
    head: str,
    set_name: str,
    labels: str | RowSource,
    student_params: StudentParams,
    params: DistillParams,
    soft_labels: str | None = None,
    teacher: str | None = None,
    teacher_head: str | None = None,
    transfer_rows: int | None = None,
    source: str | RowSource | None = None,
    transfer: str | None = None,
    test_fraction: float = settings.TEST_FRACTION,
    deploy: str = settings.DEFAULT_DEPLOY,
    lock_timeout_ms: int = LOCK_TIMEOUT_MS,
    progress: Progress | None = None,
    teacher_progress: Progress | None = None,
) -> dict[str, Any]:
    """Distil a teacher's soft labels into a new version of ``head``: the student
    ``student_params`` names, learning as ``params`` says.

    Soft labels come from ``soft_labels`` (a SELECT returning ``item_key`` and one column per
    class, stored as teacher ``teacher``, default ``HEAD_teacher``) or from a teacher stored
    earlier (``teacher`` alone). A word student reads the rows' text through ``source``, or the
    set's own last source query; a head student reads the set's vectors. ``transfer`` (a SELECT
    returning ``item_key``) restricts the rows distilled on. A sidecar job passes the rows its
    request captured (``labels`` and ``source`` as a :class:`~sqlheads.verbs.rows.RowSource`
    of the job) and so runs no caller's query. ``progress`` hears of the student's run in its
    kind's ``progress_unit`` (epochs, optimiser steps or L-BFGS iterations). ``teacher_head``:
    a head's deployed version scores the rows and ``transfer_rows`` transfer rows instead (a
    stored teacher's fine-tuned version's cached ones with ``teacher``), ``teacher_progress``
    hearing of the rows it scores (:mod:`sqlheads.verbs.teach`). The head's lock is taken only
    to write the version, waiting up to ``lock_timeout_ms`` for it, as train's.
    """
    started = time.perf_counter()
    validate_name("head", head)
    student_params, params = student_params.validate(), params.validate()
    kind = student_params.kind
    # Refused now, before a teacher scores a row; a head student reads no transfer rows.
    wanted = kind.transfer_rows if transfer_rows is None else transfer_rows
    recipe = teach.recipe(wanted if kind.reads == "text" else 0, params.seed)
    embedding_set = store.require_set(set_name)
    set_encoder = store.encoder(embedding_set.encoder_id)
    labelled = RowSource.of(store, labels).labels()
    texts = RowSource.optional(store, source)
    teaching = functools.partial(
        teach.taught_rows,
        store,
        embedding_set,
        set_encoder,
        labelled,
        texts,
        recipe=recipe,
        test_fraction=test_fraction,
        progress=teacher_progress,
    )
    soft, taught = _teaching(
        store, embedding_set, head, soft_labels, teacher, teacher_head, transfer_rows, teaching
    )
    frame = _gold_beside_soft(labelled, soft)
    arguments, known, no_text = _student_input(
        store, embedding_set, set_encoder, kind, frame, texts
    )
    refuse_foreign_keys(store, embedding_set, soft, known)
    if transfer is not None:
        frame["in_transfer"] = _in_transfer(store, frame, transfer)
    if taught is not None:
        frame = taught.with_transfer_rows(frame)
    deployed = store.deployed_model(head)
    result = distill_rows(
        frame,
        student_params=student_params,
        params=params,
        teacher_classes_json=json.dumps(soft.classes),
        test_fraction=test_fraction,
        deploy=deploy,
        deployed_macro_f1=deployed.macro_f1 if deployed else None,
        no_text=no_text,
        progress=progress,
        **arguments,
    ).iloc[0]
    if taught is not None:
        taught.require_teacher()  # dropped while the student learnt: 50028, nothing stored
    summary = _write_version(
        store, head, embedding_set, set_encoder, frame, result, soft, deploy, lock_timeout_ms
    )
    return summary | {
        "seconds": round(time.perf_counter() - started, 3),
        **({} if taught is None else taught.report),
    }


def _write_version(
    store: Store,
    head: str,
    embedding_set: EmbeddingSet,
    set_encoder: Encoder,
    frame: pd.DataFrame,
    result: pd.Series,
    soft: SoftLabels,
    deploy: str,
    lock_timeout_ms: int,
) -> dict[str, Any]:
    """The student's row written as a new version of ``head``, with the teacher it learnt from
    (stored under its name when a caller's query gave its soft labels)."""
    stored = stored_teacher(store, embedding_set, soft)
    teacher_accuracy = _none_if_nan(result["teacher_accuracy"])
    summary = record_version(
        store,
        head,
        embedding_set,
        set_encoder,
        result,
        deploy,
        {"teacher_id": stored.teacher_id, "teacher_accuracy": teacher_accuracy},
        frame["text"].tolist() if "text" in frame.columns else None,
        lock_timeout_ms,
        labelled=frame.loc[frame["label"].notna(), "item_key"].tolist(),
    )
    return summary | {
        "teacher": soft.name,
        "teacher_accuracy": round(teacher_accuracy, 4) if teacher_accuracy is not None else None,
        "rows_without_input": int(result["rows_without_input"]),
    }


Teaching = Callable[..., teach.Taught]  # teach.taught_rows with the student's rows bound


def _teaching(
    store: Store,
    embedding_set: EmbeddingSet,
    head: str,
    soft_labels: str | None,
    teacher: str | None,
    teacher_head: str | None,
    transfer_rows: int | None,
    teaching: Teaching,
) -> tuple[SoftLabels, teach.Taught | None]:
    """The soft labels, and what a teaching version made: a head's deployed one
    (``teacher_head``), else soft labels from a caller's query or a stored teacher, with, given
    ``transfer_rows``, the transfer rows a stored teacher's fine-tuned version (a sidecar's)
    scored and cached."""
    if teacher_head is not None:
        return _head_teaching(store, embedding_set, soft_labels, teacher, teacher_head, teaching)
    soft = soft_labels_for(store, embedding_set, head, soft_labels, teacher)
    fine_tuned = None if soft.stored is None else soft.stored.model_id
    if not transfer_rows or fine_tuned is None:
        return soft, None
    return soft, teaching(teacher=teach.teacher_version(store, fine_tuned), soft=soft.rows)


def _head_teaching(
    store: Store,
    embedding_set: EmbeddingSet,
    soft_labels: str | None,
    teacher: str | None,
    teacher_head: str,
    teaching: Teaching,
) -> tuple[SoftLabels, teach.Taught]:
    """``--teacher-head``: the head's deployed version scores the rows and the transfer rows;
    its soft labels are stored under ``teacher`` (default ``HEAD.vN``)."""
    teach.refuse_two_teachers(soft_labels)
    taught = teaching(teacher=teach.load_teacher_head(store, teacher_head), soft=None)
    name = validate_name("teacher", teacher or taught.teacher_name)
    refuse_foreign_teacher(find_teacher(store, name), embedding_set)
    model_id = taught.teacher.model.model_id
    return SoftLabels(name, taught.soft, taught.teacher.classes, None, model_id), taught


def _gold_beside_soft(labelled: pd.DataFrame, soft: SoftLabels) -> pd.DataFrame:
    """One row per key of the gold labels or the soft labels: ``item_key``, ``label`` (None
    where only the teacher labelled it), ``logits`` (None where the teacher did not) and, from
    a teacher head that reads vectors, ``teacher_vector`` (its encoder's, float16 bytes)."""
    keys = list(dict.fromkeys(labelled["item_key"].tolist() + soft.rows["item_key"].tolist()))
    frame = pd.DataFrame({"item_key": keys})
    frame["label"] = frame["item_key"].map(
        dict(zip(labelled["item_key"], labelled["label"], strict=True))
    )
    for column, name in (("logits", "logits"), ("vector", "teacher_vector")):
        if column in soft.rows.columns:
            frame[name] = frame["item_key"].map(
                dict(zip(soft.rows["item_key"], soft.rows[column], strict=True))
            )
    return frame


def _student_input(
    store: Store,
    embedding_set: EmbeddingSet,
    set_encoder: Encoder,
    kind: ModelKind,
    frame: pd.DataFrame,
    source: RowSource | None,
) -> tuple[dict[str, Any], set[str], str]:
    """Add the student's input to ``frame`` (``text`` or ``vector``, and the texts the
    baseline reads); the arguments it needs besides, the keys the set holds, and why the
    baseline has no text (empty when it has)."""
    arguments: dict[str, Any] = {"dim": set_encoder.dim}
    if kind.reads == "text":
        texts = text_source(store, embedding_set, source).texts()
        frame["text"] = frame["item_key"].map(texts)
        onnx, tokenizer_json = store.encoder_bytes(set_encoder.encoder_id)
        return arguments | {"tokenizer_json": tokenizer_json, "encoder_onnx": onnx}, set(texts), ""
    keys = frame["item_key"].tolist()
    vectors = store.vectors_for_keys(embedding_set.set_id, keys)
    frame["vector"] = frame["item_key"].map(vectors)
    baseline_texts, no_text = baselines.read_texts(store, embedding_set, source, keys)
    if baseline_texts is not None:
        frame["text"] = baseline_texts
    return arguments, set(vectors), no_text


def _in_transfer(store: Store, frame: pd.DataFrame, transfer: str) -> pd.Series:
    """1 for the rows the caller's transfer query names, 0 for the others."""
    chosen = {
        k
        for c in store.run_query(transfer, ("item_key",), "transfer")
        for k in required_keys(c["item_key"], "transfer")
    }
    return frame["item_key"].isin(chosen).astype(int)


def _none_if_nan(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)
