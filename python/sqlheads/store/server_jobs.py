"""The job queue's writes on SQL Server: procedures of revision 0008 (the fourth audit).

A sidecar's login holds SELECT alone on ``heads.job_queue`` and ``heads.job_inputs``: every
transition of a job is a procedure that checks it (``heads.claim_job``, ``heads.heartbeat_job``,
``heads.finish_job``, ``heads.fail_job``, ``heads.release_job``: queued, or running with a stale
heartbeat, to running under this worker; running under this worker to done, failed, queued
again or cancelled), and a job is queued from Python through ``heads.enqueue_job``, which
records the caller as its requester. A numbered refusal comes back as the sqlheads error of its
number (50054: not held; 50072; 50074). :class:`sqlheads.store.jobs.JobQueue` calls these on
SQL Server and runs their equivalents on SQLite.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
from sqlalchemy import TextClause, text
from sqlalchemy.exc import DBAPIError

from sqlheads.errors import from_server
from sqlheads.store import schema as s
from sqlheads.store import staging
from sqlheads.store.repository import Store

CLAIM = text(
    "SET NOCOUNT ON; DECLARE @job_id int; "
    "EXEC heads.claim_job @worker = :worker, @kinds = :kinds, "
    "@stale_after_seconds = :stale_after_seconds, @job_id = @job_id OUTPUT; "
    "SELECT @job_id AS job_id"
)
HEARTBEAT = text(
    "SET NOCOUNT ON; DECLARE @cancel_requested bit; "
    "EXEC heads.heartbeat_job @job_id = :job_id, @worker = :worker, "
    "@record_progress = :record_progress, @progress_done = :progress_done, "
    "@progress_total = :progress_total, @stage = :stage, "
    "@cancel_requested = @cancel_requested OUTPUT; "
    "SELECT @cancel_requested AS cancel_requested"
)
FINISH = text(
    "SET NOCOUNT ON; "
    "EXEC heads.finish_job @job_id = :job_id, @worker = :worker, @result_json = :result_json, "
    "@record_progress = :record_progress, @progress_done = :progress_done, "
    "@progress_total = :progress_total"
)
FAIL = text(
    "SET NOCOUNT ON; DECLARE @state varchar(16); "
    "EXEC heads.fail_job @job_id = :job_id, @worker = :worker, @error_number = :error_number, "
    "@error = :error, @transient = :transient, @state = @state OUTPUT; "
    "SELECT @state AS state"
)
RELEASE = text(
    "SET NOCOUNT ON; "
    "EXEC heads.release_job @job_id = :job_id, @worker = :worker, @cancelled = :cancelled"
)
# heads.enqueue_job reads the caller's #job_parts and #job_inputs.
PARTS_STAGE, INPUTS_STAGE = "#job_parts", "#job_inputs"
PARTS_COLUMNS = {
    "part": "int NOT NULL",
    "key_from": f"nvarchar({s.KEY_LENGTH}) COLLATE DATABASE_DEFAULT NULL",
    "key_to": f"nvarchar({s.KEY_LENGTH}) COLLATE DATABASE_DEFAULT NULL",
}
INPUTS_COLUMNS = {
    "part": "int NOT NULL",
    "item_key": f"nvarchar({s.KEY_LENGTH}) COLLATE DATABASE_DEFAULT NOT NULL",
    "label": "nvarchar(400) COLLATE DATABASE_DEFAULT NULL",
    "text": "nvarchar(max) COLLATE DATABASE_DEFAULT NULL",
}
ENQUEUE = text(
    "SET NOCOUNT ON; "
    "EXEC heads.enqueue_job @kind = :kind, @set = :set, @head = :head, "
    "@parameters_json = :parameters_json, @max_attempts = :max_attempts; "
    f"DROP TABLE {PARTS_STAGE}; DROP TABLE {INPUTS_STAGE}"
)
_INSERT_ROWS = 5_000  # rows per executemany, as job_inputs.insert_inputs


def call(store: Store, statement: TextClause, parameters: dict[str, Any]) -> Any:
    """Run a procedure's batch in a transaction of its own; its one row, if it returns one.
    A procedure's numbered refusal comes back as that sqlheads error."""
    with store.engine.begin() as connection:
        try:
            result = connection.execute(statement, parameters)
            return result.first() if result.returns_rows else None
        except DBAPIError as error:
            raise from_server(str(error.orig)) or error from None


def claim(store: Store, worker: str, kinds: Sequence[str] | None, stale: int) -> int | None:
    """``heads.claim_job``: the id of the job now held by ``worker``; None when none is."""
    row = call(
        store,
        CLAIM,
        {
            "worker": worker,
            "kinds": ",".join(kinds) if kinds else None,
            "stale_after_seconds": stale,
        },
    )
    return None if row is None or row.job_id is None else int(row.job_id)


def heartbeat(
    store: Store, job_id: int, worker: str, progress: tuple[int, int | None, str | None] | None
) -> bool:
    """``heads.heartbeat_job`` (with ``progress``: done, total, stage); whether its cancel was
    requested."""
    done, total, stage = progress or (None, None, None)
    row = call(
        store,
        HEARTBEAT,
        {
            "job_id": job_id,
            "worker": worker,
            "record_progress": int(progress is not None),
            "progress_done": done,
            "progress_total": total,
            "stage": stage,
        },
    )
    return bool(row.cancel_requested)


def finish(
    store: Store,
    job_id: int,
    worker: str,
    result_json: str,
    progress: tuple[int, int | None] | None,
) -> None:
    """``heads.finish_job``."""
    done, total = progress or (None, None)
    call(
        store,
        FINISH,
        {
            "job_id": job_id,
            "worker": worker,
            "result_json": result_json,
            "record_progress": int(progress is not None),
            "progress_done": done,
            "progress_total": total,
        },
    )


def fail(
    store: Store, job_id: int, worker: str, number: int | None, message: str, transient: bool
) -> str:
    """``heads.fail_job``: the job's state after it (queued or failed)."""
    parameters = {
        "job_id": job_id,
        "worker": worker,
        "error_number": number,
        "error": message,
        "transient": int(transient),
    }
    return str(call(store, FAIL, parameters).state)


def release(store: Store, job_id: int, worker: str, *, cancelled: bool) -> None:
    """``heads.release_job``: back to the queue, or cancelled (its cancel was requested)."""
    call(store, RELEASE, {"job_id": job_id, "worker": worker, "cancelled": int(cancelled)})


def enqueue(
    store: Store,
    values: dict[str, Any],
    ranges: Sequence[tuple[str | None, str | None]],
    inputs: Sequence[pd.DataFrame] | None,
) -> list[int]:
    """``heads.enqueue_job``: one job a range of ``ranges`` (``values``: kind, set, head,
    parameters_json, max_attempts), each with its rows of ``inputs``; the job ids, by part."""
    parts = [
        {"part": part, "key_from": low, "key_to": high}
        for part, (low, high) in enumerate(ranges, start=1)
    ]
    rows = []
    for part, frame in enumerate(inputs or (), start=1):
        shaped = frame.reindex(columns=["item_key", "label", "text"])
        shaped = shaped.astype(object).where(shaped.notna(), None)
        rows += [
            {"part": part, "item_key": str(key), "label": label, "text": body}
            for key, label, body in shaped.itertuples(index=False, name=None)
        ]
    with store.engine.begin() as connection:
        connection.execute(staging.create(PARTS_STAGE, PARTS_COLUMNS))
        connection.execute(staging.create(INPUTS_STAGE, INPUTS_COLUMNS))
        connection.execute(staging.insert(PARTS_STAGE, PARTS_COLUMNS), parts)
        for start in range(0, len(rows), _INSERT_ROWS):
            connection.execute(
                staging.insert(INPUTS_STAGE, INPUTS_COLUMNS), rows[start : start + _INSERT_ROWS]
            )
        try:
            found = connection.execute(ENQUEUE, values).all()
        except DBAPIError as error:
            raise from_server(str(error.orig)) or error from None
    return [int(r.job_id) for r in sorted(found, key=lambda r: r.part)]
