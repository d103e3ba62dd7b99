"""``distill``: a teacher's soft labels distilled into a new version of a head.

The rows are read here (the gold labels, the soft labels, the student's input: texts or the
set's vectors), put side by side in one frame, one row per key, and handed to
:func:`sqlheads.compute.distill.distill`; its row becomes the new version, and soft labels
that came from a caller's query are stored under the teacher's name.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import pandas as pd

from sqlheads.compute.distill import Distillation
from sqlheads.compute.distill import distill as distill_rows
from sqlheads.engine.constraints import MISSING, Instance, Params, Rule, Text, allowed_of, param
from sqlheads.engine.encoders.onnx_encoder import EncoderRef
from sqlheads.engine.kinds import ModelKind
from sqlheads.engine.progress import Progress
from sqlheads.engine.students.transfer import TransferRecipe
from sqlheads.store.keys import required_keys
from sqlheads.store.repository import EmbeddingSet, Encoder, Store, validate_name
from sqlheads.store.soft_labels import find_teacher
from sqlheads.verbs import baselines, teach
from sqlheads.verbs.encoders import encoder_ref
from sqlheads.verbs.locks import holding
from sqlheads.verbs.rows import RowSource, text_source
from sqlheads.verbs.soft_labels import (
    SoftLabels,
    refuse_foreign_keys,
    refuse_foreign_teacher,
    soft_labels_for,
    stored_teacher,
)
from sqlheads.verbs.versions import record_version

QUERY = Text("a SELECT")
ROWS = (QUERY, Instance((RowSource,), "a SELECT, or the rows a job captured"))


@dataclass(frozen=True, kw_only=True)
class Teaching(Params):
    """What a student learns from, as a door names it: the gold ``labels``, the rows' texts
    (``source``: a text student's input and the baseline's; None: the set's own source query),
    the rows it is distilled on (``transfer``: a query of keys; None: every row but the held-out
    ones), and its one teacher, named one way: a ``soft_labels`` query (stored as ``teacher``,
    default ``HEAD_teacher``), a teacher stored earlier (``teacher`` alone), or a head whose
    deployed version scores the rows (``teacher_head``; its soft labels stored as ``teacher``,
    default ``HEAD.vN``) with ``transfer_rows`` rows made from them (None: the student kind's
    count; a stored fine-tuned teacher's cached ones are read the same way). A sidecar job
    passes the rows its request captured as ``labels`` and ``source``."""

    labels: str | RowSource = param(MISSING, *ROWS)
    source: str | RowSource | None = param(None, *ROWS, None)
    transfer: str | None = param(None, QUERY, None)
    soft_labels: str | None = param(None, QUERY, None)
    teacher: str | None = param(None, Text("a teacher's name"), None)
    teacher_head: str | None = param(None, Text("a head's name"), None)
    transfer_rows: int | None = param(None, *allowed_of(TransferRecipe, "rows"), None)

    RULES = (
        Rule(
            "teacher_head",
            lambda t: t.soft_labels is None or t.teacher_head is None,
            "pass --teacher-head (a deployed version scores the rows) or --soft-labels (a "
            "query gives them), not both",
            named=False,
        ),
        Rule(
            "teacher",
            lambda t: any((t.soft_labels, t.teacher, t.teacher_head)),
            "distill needs a teacher's soft labels: pass --soft-labels \"SELECT item_key, ... "
            'AS <class>, ..." or --teacher NAME (soft labels stored earlier), or '
            "--teacher-head HEAD (a head's deployed version scores the rows)",
            named=False,
        ),
        Rule(
            "transfer_rows",
            lambda t: t.transfer_rows is None or t.soft_labels is None,
            "are scored by a teacher, and --soft-labels gives soft labels alone: pass "
            "--teacher-head (or a stored --teacher alone), or drop --transfer-rows",
        ),
    )


@holding(("set", True))  # as train: the head's lock only while the version is written
def distill(
    store: Store,
    *,
    head: str,
    set_name: str,
    params: Distillation,
    teaching: Teaching,
    progress: Progress | None = None,
    teacher_progress: Progress | None = None,
) -> dict[str, Any]:
    """Distil a teacher's soft labels into a new version of ``head``: the student ``params``
    names, learning from what ``teaching`` names.

    A word student reads the rows' text through ``teaching.source``, or the set's own last
    source query; a head student reads the set's vectors. ``progress`` hears of the student's
    run in its kind's ``progress_unit`` (epochs, optimiser steps or L-BFGS iterations); with a
    teacher head, ``teacher_progress`` hears of the rows it scores (:mod:`sqlheads.verbs.teach`).
    The head's lock is taken only to write the version, waiting up to the parameters'
    ``lock_timeout_ms`` for it, as train's.
    """
    started = time.perf_counter()
    validate_name("head", head)
    kind = params.kind
    embedding_set = store.require_set(set_name)
    set_encoder = store.encoder(embedding_set.encoder_id)
    labelled = RowSource.of(store, teaching.labels).labels()
    texts = RowSource.optional(store, teaching.source)
    wanted = kind.transfer_rows if teaching.transfer_rows is None else teaching.transfer_rows
    student_rows = teach.StudentRows(
        store,
        embedding_set,
        set_encoder,
        labelled,
        texts,
        # a head student reads no transfer rows
        TransferRecipe(rows=wanted if kind.reads == "text" else 0, seed=params.learning.seed),
        params.version.test_fraction,
        teacher_progress,
    )
    soft, taught = _soft_labels(store, head, teaching, student_rows)
    frame = _gold_beside_soft(labelled, soft)
    student_encoder, known, no_text = _student_input(
        store, embedding_set, set_encoder, kind, frame, texts
    )
    refuse_foreign_keys(store, embedding_set, soft, known)
    if teaching.transfer is not None:
        frame["in_transfer"] = _in_transfer(store, frame, teaching.transfer)
    if taught is not None:
        frame = taught.with_transfer_rows(frame)
    deployed = store.deployed_model(head)
    result = distill_rows(
        frame,
        params=params,
        teacher_classes_json=json.dumps(soft.classes),
        deployed_macro_f1=deployed.macro_f1 if deployed else None,
        set_encoder=student_encoder,
        no_text=no_text,
        progress=progress,
    ).iloc[0]
    if taught is not None:
        taught.require_teacher()  # dropped while the student learnt: 50028, nothing stored
    stored = stored_teacher(store, embedding_set, soft)
    teacher_accuracy = _none_if_nan(result["teacher_accuracy"])
    summary = record_version(
        store,
        head,
        embedding_set,
        result,
        params.version,
        extra={"teacher_id": stored.teacher_id, "teacher_accuracy": teacher_accuracy},
        texts=frame["text"].tolist() if "text" in frame.columns else None,
        labelled=frame.loc[frame["label"].notna(), "item_key"].tolist(),
    )
    return summary | {
        "teacher": soft.name,
        "teacher_accuracy": round(teacher_accuracy, 4) if teacher_accuracy is not None else None,
        "rows_without_input": int(result["rows_without_input"]),
        "seconds": round(time.perf_counter() - started, 3),
        **({} if taught is None else taught.report),
    }


def _soft_labels(
    store: Store, head: str, teaching: Teaching, student_rows: teach.StudentRows
) -> tuple[SoftLabels, teach.Taught | None]:
    """The soft labels, and what a teaching version made: a head's deployed one
    (``teacher_head``), else soft labels from a caller's query or a stored teacher, with, given
    ``transfer_rows``, the transfer rows a stored teacher's fine-tuned version (a sidecar's)
    scored and cached."""
    embedding_set = student_rows.embedding_set
    if teaching.teacher_head is not None:
        taught = student_rows.taught(teach.load_teacher_head(store, teaching.teacher_head))
        name = validate_name("teacher", teaching.teacher or taught.teacher_name)
        refuse_foreign_teacher(find_teacher(store, name), embedding_set)
        model_id = taught.teacher.model.model_id
        return SoftLabels(name, taught.soft, taught.teacher.classes, None, model_id), taught
    soft = soft_labels_for(store, embedding_set, head, teaching.soft_labels, teaching.teacher)
    fine_tuned = None if soft.stored is None else soft.stored.model_id
    if not teaching.transfer_rows or fine_tuned is None:
        return soft, None
    taught = student_rows.taught(teach.teacher_version(store, fine_tuned), soft=soft.rows)
    return soft, taught


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
) -> tuple[EncoderRef, set[str], str]:
    """Add the student's input to ``frame`` (``text`` or ``vector``, and the texts the
    baseline reads); what the student reads of the set's encoder (a text student's tokenizer
    and graph, a head student's width), the keys the set holds, and why the baseline has no
    text (empty when it has)."""
    if kind.reads == "text":
        texts = text_source(store, embedding_set, source).texts()
        frame["text"] = frame["item_key"].map(texts)
        encoder = encoder_ref(store, set_encoder, with_bytes=True)  # a word student's start
        return encoder, set(texts), ""
    keys = frame["item_key"].tolist()
    vectors = store.vectors_for_keys(embedding_set.set_id, keys)
    frame["vector"] = frame["item_key"].map(vectors)
    baseline_texts, no_text = baselines.read_texts(store, embedding_set, source, keys)
    if baseline_texts is not None:
        frame["text"] = baseline_texts
    return EncoderRef(dim=set_encoder.dim), set(vectors), no_text


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
