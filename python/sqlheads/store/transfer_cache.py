"""Cached transfer sets: rows a teacher version labelled, kept for the next student.

A transfer set is named by its teacher version (``models.model_id``) and its recipe key
(:meth:`engine.students.transfer.TransferRecipe.key`, which also hashes the rows it was made
from). Each row keeps the teacher's logits and, for a teacher that reads vectors, the vector its
encoder made of the row (float16), for a student's feature loss: nothing is embedded twice. Rows
are numbered in the order the recipe makes them, and a count of rows is always the first rows,
so one set serves every count: a student asking for fewer rows than are cached reads the first
ones, one asking for more has only the rest scored. Rows are written in chunks as the teacher
scores them, so a run that stops half-way resumes where it stopped. The rows go with their
teacher: dropping its head drops them (ON DELETE CASCADE from ``models``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import pandas as pd
from sqlalchemy import insert, select, update

from sqlheads.errors import TeacherDroppedError
from sqlheads.store import schema as s
from sqlheads.store.repository import Store


@dataclass(frozen=True)
class TransferSet:
    transfer_set_id: int
    model_id: int
    recipe_key: str
    classes: list[str]
    rows_max: int | None  # the most rows the recipe can make from its rows, once known

    def rows_for(self, wanted: int) -> int:
        """The rows a request for ``wanted`` gets: fewer where the recipe cannot make more."""
        return wanted if self.rows_max is None else min(wanted, self.rows_max)


def open_transfer_set(
    store: Store,
    *,
    model_id: int,
    teacher: str,
    recipe_key: str,
    recipe: dict,
    classes: list[str],
) -> TransferSet:
    """The cached set of this teacher version and recipe, created empty if there is none.
    ``teacher`` names the head in the error raised when its version is gone (50028)."""
    ts = s.transfer_sets.c
    with store.engine.begin() as c:
        _require_teacher(c, model_id, teacher)
        row = c.execute(
            select(ts.transfer_set_id, ts.classes_json, ts.rows_max).where(
                ts.model_id == model_id, ts.recipe_key == recipe_key
            )
        ).first()
        if row is not None:
            return TransferSet(
                int(row.transfer_set_id),
                model_id,
                recipe_key,
                json.loads(row.classes_json),
                None if row.rows_max is None else int(row.rows_max),
            )
        created = c.execute(
            insert(s.transfer_sets).values(
                model_id=model_id,
                recipe_key=recipe_key,
                recipe_json=json.dumps(recipe, sort_keys=True),
                classes_json=json.dumps(classes),
            )
        ).inserted_primary_key[0]
    return TransferSet(int(created), model_id, recipe_key, list(classes), None)


def scored_ordinals(store: Store, transfer_set: TransferSet) -> set[int]:
    """Ordinals of the rows the teacher has scored already."""
    tr = s.transfer_rows.c
    with store.engine.connect() as c:
        return {
            int(r.ordinal)
            for r in c.execute(
                select(tr.ordinal).where(tr.transfer_set_id == transfer_set.transfer_set_id)
            )
        }


def add_transfer_rows(
    store: Store, transfer_set: TransferSet, teacher: str, rows: list[dict]
) -> None:
    """Write scored rows (``ordinal``, ``origin_key``, ``how``, ``text``, ``logits`` bytes and
    ``vector``: the teacher encoder's, float16 bytes, or None) in one transaction, refusing
    (50028) if the teacher's version was dropped meanwhile."""
    if not rows:
        return
    with store.engine.begin() as c:
        _require_teacher(c, transfer_set.model_id, teacher)
        c.execute(
            insert(s.transfer_rows),
            [{"transfer_set_id": transfer_set.transfer_set_id, **row} for row in rows],
        )


def note_rows_max(store: Store, transfer_set: TransferSet, rows: int) -> TransferSet:
    """Record that the recipe makes at most ``rows`` rows from its rows (a build asked for
    more and ran short), so that a later request for more builds nothing."""
    with store.engine.begin() as c:
        c.execute(
            update(s.transfer_sets)
            .where(s.transfer_sets.c.transfer_set_id == transfer_set.transfer_set_id)
            .values(rows_max=rows)
        )
    return replace(transfer_set, rows_max=rows)


def read_transfer_rows(store: Store, transfer_set: TransferSet, rows: int) -> pd.DataFrame:
    """The first ``rows`` rows: ``ordinal``, ``origin_key``, ``how``, ``text``, ``logits`` and
    ``vector`` (None where the teacher kept none)."""
    tr = s.transfer_rows.c
    with store.engine.connect() as c:
        found = c.execute(
            select(tr.ordinal, tr.origin_key, tr.how, tr.text, tr.logits, tr.vector)
            .where(tr.transfer_set_id == transfer_set.transfer_set_id, tr.ordinal < rows)
            .order_by(tr.ordinal)
        ).all()
    return pd.DataFrame(
        {
            "ordinal": [int(r.ordinal) for r in found],
            "origin_key": [r.origin_key for r in found],
            "how": [r.how for r in found],
            "text": [r.text for r in found],
            "logits": [bytes(r.logits) for r in found],
            "vector": [None if r.vector is None else bytes(r.vector) for r in found],
        }
    )


def _require_teacher(c, model_id: int, teacher: str) -> None:  # in a transaction
    exists = c.execute(
        select(s.models.c.model_id).where(s.models.c.model_id == model_id)
    ).scalar_one_or_none()
    if exists is None:
        raise TeacherDroppedError(
            f"teacher head {teacher!r} was dropped while this student was distilled (the version "
            "that taught it is gone): no student version was stored; train and deploy a "
            "teacher head again and re-run distill"
        )


def require_teacher(store: Store, model_id: int, teacher: str) -> None:
    """50028 unless the teacher's version ``model_id`` is still stored."""
    with store.engine.connect() as c:
        _require_teacher(c, model_id, teacher)
