"""A job's inputs, captured at request time (``job_inputs``): what the sidecar reads instead of
running a caller's query, which would run with the sidecar's rights rather than the caller's.

A request reads the caller's queries once, with the caller's own permissions, and stores their
rows with the job in the transaction that queues it; the sidecar reads them back in key order.
Dropping the caller's tables after the request changes nothing for the job.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pandas as pd
from sqlalchemy import Connection, delete, func, insert, select

from sqlheads.errors import JobOwnerError
from sqlheads.store import schema as s
from sqlheads.store.repository import Store

COLUMNS = ("item_key", "label", "text")
_INSERT_ROWS = 5_000  # rows per executemany: bounded memory, few round trips
c = s.job_inputs.c


def requester(store: Store) -> dict[str, object]:
    """``requested_by`` and ``requested_user`` for a job queued now on SQLite: the OS user, or
    ``local`` where there is none (on SQL Server ``heads.enqueue_job`` records the login, the
    database user and its SID itself: no role may write them)."""
    user = store.database_user()
    return {"requested_by": user, "requested_user": user}


def refuse_other_requester(store: Store, job_id: int, requested_user: str | None) -> None:
    """On SQLite, only a job's requester may cancel it (50070), as heads.cancel_job has it on
    SQL Server (where heads_admin may too, and the procedure decides). A job queued before
    requesters were recorded names none: on SQLite anyone who may write the file may cancel
    it, since the file has no other owner to defer to. The refusal names no other user."""
    if requested_user is not None and requested_user != store.database_user():
        raise JobOwnerError(
            f"job {job_id} was not requested by you: only its requester or heads_admin may "
            "cancel it"
        )


def insert_inputs(connection: Connection, job_id: int, rows: pd.DataFrame) -> int:
    """Store ``rows`` (``item_key`` and ``label`` and/or ``text``) as the job's inputs, on the
    connection of the transaction that queues the job; the rows stored."""
    frame = rows.reindex(columns=list(COLUMNS))
    frame = frame.astype(object).where(frame.notna(), None)
    records = [
        {"job_id": job_id, "item_key": str(key), "label": label, "text": text}
        for key, label, text in frame.itertuples(index=False, name=None)
    ]
    for start in range(0, len(records), _INSERT_ROWS):
        connection.execute(insert(s.job_inputs), records[start : start + _INSERT_ROWS])
    return len(records)


def forget(connection: Connection, job_id: int) -> None:
    """Delete a finished job's inputs (an IMDB-sized request captures about 40 MiB), in the
    transaction that finishes it: nothing can resume from them any more."""
    connection.execute(delete(s.job_inputs).where(c.job_id == job_id))


def read_chunks(
    store: Store, job_id: int, chunk_rows: int, columns: Sequence[str] = COLUMNS
) -> Iterator[pd.DataFrame]:
    """The job's inputs (``columns`` of them) in key order, ``chunk_rows`` at a time."""
    query = (
        select(*(c[name] for name in columns))
        .where(c.job_id == job_id)
        .order_by(c.item_key, c.input_id)
        .execution_options(yield_per=chunk_rows)
    )
    with store.engine.connect() as connection:
        for part in connection.execute(query).partitions(chunk_rows):
            yield pd.DataFrame([tuple(r) for r in part], columns=list(columns))


def count(store: Store, job_id: int) -> int:
    with store.engine.connect() as connection:
        return int(
            connection.execute(
                select(func.count()).select_from(s.job_inputs).where(c.job_id == job_id)
            ).scalar_one()
        )


def duplicate_keys(store: Store, job_id: int) -> set[str]:
    """Keys captured more than once (an embed source's duplicates, rejected whole)."""
    query = (
        select(c.item_key).where(c.job_id == job_id).group_by(c.item_key).having(func.count() > 1)
    )
    with store.engine.connect() as connection:
        return {str(key) for (key,) in connection.execute(query)}


def teacher_rows(labelled: pd.DataFrame, texts: dict[str, object]) -> pd.DataFrame:
    """A teacher request's inputs: every source row with its label (None: unlabelled), and
    labelled keys the source lacks (no text: the job refuses them, naming one)."""
    labels = dict(zip(labelled["item_key"], labelled["label"], strict=True))
    keys = list(dict.fromkeys([*texts, *labels]))
    return pd.DataFrame(
        {
            "item_key": keys,
            "label": [labels.get(k) for k in keys],
            "text": [texts.get(k) for k in keys],
        }
    )
