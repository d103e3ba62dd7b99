"""Teachers and their soft labels: the store's side of ``distill``.

A teacher is a name bound to one set, with its classes; its soft labels are one float32 logit
per class and key. ``distill --soft-labels QUERY`` writes them from a caller's query; the GPU
sidecar's teacher will write them from its own predictions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pandas as pd
from sqlalchemy import delete, insert, select, update

from sqlheads.store import boundary, claims, server_versions
from sqlheads.store import schema as s
from sqlheads.store.repository import Store, validate_name


@dataclass(frozen=True)
class Teacher:
    teacher_id: int
    name: str
    set_id: int
    classes: list[str]
    model_id: int | None = None  # the fine-tuned version they came from, if any


def find_teacher(store: Store, name: str) -> Teacher | None:
    validate_name("teacher", name)
    t = s.teachers.c
    with store.engine.connect() as c:
        row = c.execute(
            select(t.teacher_id, t.name, t.set_id, t.classes_json, t.model_id).where(t.name == name)
        ).first()
    if row is None:
        return None
    return Teacher(row.teacher_id, row.name, row.set_id, json.loads(row.classes_json), row.model_id)


def store_soft_labels(
    store: Store,
    name: str,
    set_id: int,
    classes: list[str],
    keys: list[str],
    logits: list[bytes],
    *,
    model_id: int | None = None,
) -> Teacher:
    """Create teacher ``name`` or replace all of its soft labels (``logits``: float32 bytes, one
    per class in ``classes`` order, as :func:`sqlheads.store.vectors.pack_rows` makes them), in
    one transaction. ``model_id``: the fine-tuned teacher version they come from, if any."""
    if not store.is_sqlite:  # through heads.store_soft_labels, scoped to a sidecar's job
        rows = [{"item_key": k, "logits": bytes(b)} for k, b in zip(keys, logits, strict=True)]
        teacher_id = server_versions.store_soft_labels(
            store, name, set_id, json.dumps(classes), rows, model_id
        )
        return Teacher(teacher_id, name, set_id, list(classes))
    t = s.teachers.c
    values = {"set_id": set_id, "classes_json": json.dumps(classes), "model_id": model_id}
    with store.engine.begin() as c, boundary.procedure("heads.store_soft_labels"):
        if store.claim is not None:  # a sidecar's: its job's teacher on its set (50072)
            claims.check_soft_labels(c, store.claim, name, set_id, model_id)
        teacher_id = c.execute(select(t.teacher_id).where(t.name == name)).scalar_one_or_none()
        if teacher_id is None:
            teacher_id = c.execute(
                insert(s.teachers).values(name=name, **values)
            ).inserted_primary_key[0]
        else:
            c.execute(update(s.teachers).where(t.teacher_id == teacher_id).values(**values))
            c.execute(delete(s.soft_labels).where(s.soft_labels.c.teacher_id == teacher_id))
        if keys:
            c.execute(
                insert(s.soft_labels),
                [
                    {"teacher_id": teacher_id, "item_key": key, "logits": blob}
                    for key, blob in zip(keys, logits, strict=True)
                ],
            )
    return Teacher(int(teacher_id), name, set_id, list(classes), model_id)


def read_soft_labels(store: Store, teacher_id: int) -> pd.DataFrame:
    """``item_key`` and ``logits`` (float32 bytes in the teacher's classes' order)."""
    sl = s.soft_labels.c
    with store.engine.connect() as c:
        rows = c.execute(select(sl.item_key, sl.logits).where(sl.teacher_id == teacher_id)).all()
    return pd.DataFrame(
        {"item_key": [r.item_key for r in rows], "logits": [bytes(r.logits) for r in rows]}
    )
