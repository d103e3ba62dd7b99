"""The teacher's soft labels a ``distill`` learns from: a caller's soft-labels query (made
distill's input by :func:`sqlheads.compute.soft_labels.soft_labels_frame`, stored under the
teacher's name once the student is), or a teacher's stored earlier, by name."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pandas as pd

from sqlheads import settings
from sqlheads.compute.soft_labels import soft_labels_frame
from sqlheads.errors import (
    ForeignSoftLabelsError,
    InvalidParameterError,
    NotFoundError,
    QueryShapeError,
)
from sqlheads.store.repository import EmbeddingSet, Store, validate_name
from sqlheads.store.soft_labels import (
    Teacher,
    find_teacher,
    read_soft_labels,
    store_soft_labels,
)
from sqlheads.verbs.rows import READ_ROWS


@dataclass(frozen=True)
class SoftLabels:
    name: str  # the teacher's
    rows: pd.DataFrame  # item_key, logits (float32 bytes, in ``classes`` order)
    classes: list[str]
    stored: Teacher | None  # the teacher they were read from; None: a caller's query's
    model_id: int | None = None  # the version that scored them (``distill --teacher-head``)


def soft_labels_for(
    store: Store,
    embedding_set: EmbeddingSet,
    head: str,
    soft_labels: str | None,
    teacher: str | None,
) -> SoftLabels:
    """The soft labels of ``soft_labels`` (a SELECT returning ``item_key`` and one column per
    class, to be stored as teacher ``teacher``, default ``HEAD_teacher``), or those stored
    earlier as ``teacher``; soft labels of another set are refused (50021)."""
    if soft_labels is not None:
        suffix = settings.SETTINGS["teacher.suffix"].default
        name = validate_name("teacher", teacher or f"{head}{suffix}")
        refuse_foreign_teacher(find_teacher(store, name), embedding_set)
        rows, classes = read_soft_labels_query(store, soft_labels)
        return SoftLabels(name, rows, classes, stored=None)
    if teacher is None:
        raise InvalidParameterError(
            "distill needs a teacher's soft labels: pass --soft-labels \"SELECT item_key, ... AS "
            '<class>, ..." or --teacher NAME (soft labels stored earlier)'
        )
    found = find_teacher(store, teacher)
    if found is None:
        raise NotFoundError(
            f"teacher {teacher!r} has no stored soft labels: store them with "
            "`sqlheads distill ... --soft-labels QUERY --teacher NAME`"
        )
    refuse_foreign_teacher(found, embedding_set)
    return SoftLabels(
        found.name, read_soft_labels(store, found.teacher_id), found.classes, stored=found
    )


def refuse_foreign_teacher(found: Teacher | None, embedding_set: EmbeddingSet) -> None:
    if found is not None and found.set_id != embedding_set.set_id:
        raise ForeignSoftLabelsError(
            f"teacher {found.name!r} holds soft labels of another set, not of "
            f"{embedding_set.name!r}: distil on that set, or store this set's soft labels under "
            "another --teacher name"
        )


def read_soft_labels_query(store: Store, sql: str) -> tuple[pd.DataFrame, list[str]]:
    """A caller's soft-labels query: ``item_key`` and one numeric column per class."""
    frames = list(store.run_query(sql, ("item_key",), "soft labels", READ_ROWS, all_columns=True))
    if not frames:
        raise QueryShapeError("the soft labels query returned no rows: check its WHERE clause")
    soft = soft_labels_frame(pd.concat(frames, ignore_index=True))
    return soft[["item_key", "logits"]], json.loads(soft["classes_json"].iloc[0])


def refuse_foreign_keys(
    store: Store, embedding_set: EmbeddingSet, soft: SoftLabels, known: set[str]
) -> None:
    """A caller's soft labels must be of rows the set holds: rows of its text source or its
    vectors (a stored teacher's were checked when they were stored)."""
    if soft.stored is not None:
        return
    keys = soft.rows["item_key"]
    candidates = [k for k in keys if k not in known]
    embedded = store.stored_hashes(embedding_set.set_id, candidates)
    outside = [k for k in candidates if k not in embedded]
    if outside:
        raise ForeignSoftLabelsError(
            f"{len(outside)} of {len(keys)} soft-labelled key(s) are not in set "
            f"{embedding_set.name!r} "
            f"(e.g. {outside[0]!r}): they belong to another set; filter the soft labels query, "
            "or pass --source returning their text"
        )


def stored_teacher(store: Store, embedding_set: EmbeddingSet, soft: SoftLabels) -> Teacher:
    """The teacher the soft labels are stored as: stored now if they came from a query."""
    if soft.stored is not None:
        return soft.stored
    return store_soft_labels(
        store,
        soft.name,
        embedding_set.set_id,
        soft.classes,
        soft.rows["item_key"].tolist(),
        soft.rows["logits"].tolist(),
        model_id=soft.model_id,
    )
