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
from sqlalchemy import LargeBinary, bindparam, insert, select, text, update
from sqlalchemy.exc import DBAPIError

from sqlheads.errors import TeacherDroppedError, from_server
from sqlheads.store import boundary, claims, staging
from sqlheads.store import schema as s
from sqlheads.store.repository import Store

# heads.write_transfer_rows (sql/0008/internal/write_transfer_rows.sql) reads #transfer_rows.
TRANSFER_ROWS_STAGE = "#transfer_rows"
TRANSFER_ROWS_COLUMNS = {
    "ordinal": "int NOT NULL",
    "origin_key": f"nvarchar({s.KEY_LENGTH}) COLLATE DATABASE_DEFAULT NOT NULL",
    "how": "varchar(16) COLLATE DATABASE_DEFAULT NOT NULL",
    "text": "nvarchar(max) COLLATE DATABASE_DEFAULT NOT NULL",
    "logits": "varbinary(max) NOT NULL",
}
INSERT_TRANSFER_ROW = staging.insert(  # logits are never NULL: always bound as bytes
    TRANSFER_ROWS_STAGE, TRANSFER_ROWS_COLUMNS
).bindparams(bindparam("logits", type_=LargeBinary))
WRITE_TRANSFER_ROWS = text(
    "SET NOCOUNT ON; DECLARE @transfer_set_id int; "
    "EXEC heads.write_transfer_rows @job_id = :job_id, @worker = :worker, "
    "@model_id = :model_id, @recipe_key = :recipe_key, @recipe_json = :recipe_json, "
    "@classes_json = :classes_json, @rows_max = :rows_max, "
    "@transfer_set_id = @transfer_set_id OUTPUT; "
    f"DROP TABLE {TRANSFER_ROWS_STAGE}; "
    "SELECT @transfer_set_id AS transfer_set_id"
)


@dataclass(frozen=True)
class TransferSet:
    transfer_set_id: int
    model_id: int
    recipe_key: str
    classes: list[str]
    rows_max: int | None  # the most rows the recipe can make from its rows, once known
    recipe_json: str = "{}"  # the recipe, as the set was made with it

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
    made = TransferSet(
        0, model_id, recipe_key, list(classes), None, json.dumps(recipe, sort_keys=True)
    )
    transfer_set_id = _write(store, made, teacher)
    ts = s.transfer_sets.c
    with store.engine.connect() as c:
        row = c.execute(
            select(ts.classes_json, ts.rows_max, ts.recipe_json).where(
                ts.transfer_set_id == transfer_set_id
            )
        ).one()
    return TransferSet(
        transfer_set_id,
        model_id,
        recipe_key,
        json.loads(row.classes_json),
        None if row.rows_max is None else int(row.rows_max),
        row.recipe_json,
    )


def _write(
    store: Store,
    transfer_set: TransferSet,
    teacher: str,
    rows: list[dict] | None = None,
    rows_max: int | None = None,
) -> int:
    """``heads.write_transfer_rows``: the set of ``transfer_set``'s teacher version and recipe,
    created if missing, its ``rows_max`` noted, ``rows`` added, in one transaction; its id. A
    sidecar writes only its job's teacher's (50072), and nobody a dropped teacher's (50028)."""
    if not store.is_sqlite:
        return _write_on_server(store, transfer_set, rows or [], rows_max)
    ts = s.transfer_sets.c
    with store.engine.begin() as c, boundary.procedure("heads.write_transfer_rows"):
        _require_teacher(c, transfer_set.model_id, teacher)
        if store.claim is not None:
            claims.check_transfer(c, store.claim, transfer_set.model_id)
        found = c.execute(
            select(ts.transfer_set_id).where(
                ts.model_id == transfer_set.model_id, ts.recipe_key == transfer_set.recipe_key
            )
        ).scalar_one_or_none()
        if found is None:
            found = c.execute(
                insert(s.transfer_sets).values(
                    model_id=transfer_set.model_id,
                    recipe_key=transfer_set.recipe_key,
                    recipe_json=transfer_set.recipe_json,
                    classes_json=json.dumps(transfer_set.classes),
                )
            ).inserted_primary_key[0]
        if rows_max is not None:
            c.execute(
                update(s.transfer_sets).where(ts.transfer_set_id == found).values(rows_max=rows_max)
            )
        if rows:
            c.execute(insert(s.transfer_rows), [{"transfer_set_id": found, **row} for row in rows])
    return int(found)


def _write_on_server(
    store: Store, transfer_set: TransferSet, rows: list[dict], rows_max: int | None
) -> int:
    claim = store.claim
    parameters = {
        "job_id": None if claim is None else claim.job_id,
        "worker": None if claim is None else claim.worker,
        "model_id": transfer_set.model_id,
        "recipe_key": transfer_set.recipe_key,
        "recipe_json": transfer_set.recipe_json,
        "classes_json": json.dumps(transfer_set.classes),
        "rows_max": rows_max,
    }
    with store.engine.begin() as c:
        c.execute(staging.create(TRANSFER_ROWS_STAGE, TRANSFER_ROWS_COLUMNS))
        if rows:
            c.execute(INSERT_TRANSFER_ROW, [{k: r[k] for k in TRANSFER_ROWS_COLUMNS} for r in rows])
        try:
            return int(c.execute(WRITE_TRANSFER_ROWS, parameters).scalar_one())
        except DBAPIError as error:
            raise from_server(str(error.orig)) or error from None


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
    (50028) if the teacher's version was dropped meanwhile. On SQL Server (a sidecar's
    fine-tuned teacher, which reads text) no vector is written: ``heads.write_transfer_rows``
    takes none."""
    if rows:
        _write(store, transfer_set, teacher, rows)


def note_rows_max(store: Store, transfer_set: TransferSet, teacher: str, rows: int) -> TransferSet:
    """Record that the recipe makes at most ``rows`` rows from its rows (a build asked for
    more and ran short), so that a later request for more builds nothing."""
    _write(store, transfer_set, teacher, rows_max=rows)
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
