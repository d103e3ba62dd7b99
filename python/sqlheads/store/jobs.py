"""The job queue: work requested by analysts (``job_queue``), claimed by sidecars.

Several sidecars may claim at once, on several machines: a claim is one writer transaction
(SQLite: ``BEGIN IMMEDIATE``, so two claimers never read the same queued row; SQL Server:
``SELECT TOP (1) ... WITH (UPDLOCK, READPAST, ROWLOCK)`` then ``UPDATE`` in one transaction, so
a second claimer skips the row the first one holds). Every time stamp is the database's own
(``CURRENT_TIMESTAMP``), so machines with drifting clocks agree on which heartbeat is stale.

A job's life: queued -> running (claimed; ``attempts`` + 1) -> done | failed | cancelled.
A transient fault (:func:`is_transient`: a lost connection, out of memory, a busy lock) goes
back to queued while attempts < max_attempts; any other failure, a numbered user error above
all, fails the job at once: trying again would only fail again. A running job whose heartbeat
is older than the stale limit (its sidecar was killed) is claimable again, by the same claim.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
from sqlalchemy import (
    Connection,
    and_,
    column,
    func,
    insert,
    literal_column,
    or_,
    select,
    table,
    text,
    update,
)
from sqlalchemy.exc import DBAPIError, DisconnectionError, OperationalError

from sqlheads import settings
from sqlheads.errors import (
    BusyError,
    JobClaimLostError,
    JobStaleError,
    JobStateError,
    NotFoundError,
    SqlheadsError,
    UnknownJobKindError,
    from_server,
)
from sqlheads.store import job_inputs
from sqlheads.store import schema as s
from sqlheads.store.frames import typed_frame
from sqlheads.store.repository import Store, validate_name

FINISHED = ("done", "failed", "cancelled")
# SQL Server: take the first claimable row with an update lock, skipping rows another
# claimer holds (READPAST) instead of waiting for them.
CLAIM_HINT = "WITH (UPDLOCK, READPAST, ROWLOCK)"
# SQL Server: analysts may not read or write heads.job_queue; they list through the view
# heads.jobs (each caller's own jobs; every job for heads_admin) and cancel through the
# procedure, which decides who may (sql/0007/procedures/cancel_job.sql).
CANCEL_JOB = text("EXEC heads.cancel_job @job_id = :job_id")

q = s.job_queue.c


@dataclass(frozen=True)
class Job:
    """One row of the queue, as a sidecar needs it."""

    job_id: int
    kind: str
    state: str
    head: str | None
    set_name: str
    parameters: dict[str, Any]
    group_id: int | None
    part: int
    parts: int
    key_from: str | None
    key_to: str | None
    attempts: int
    max_attempts: int
    claimed_by: str | None
    cancel_requested: bool
    requested_user: str | None  # who asked: the author of the queries the job records


def worker_name() -> str:
    """``host:pid``: who holds a claim, readable in ``heads.jobs``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def check_kind(kind: str | None) -> str | None:
    if kind is not None and kind not in s.JOB_KINDS:
        raise UnknownJobKindError(
            f"job kind {kind!r} is not known: pass {' or '.join(s.JOB_KINDS)}"
        )
    return kind


def check_state(state: str | None) -> str | None:
    if state is not None and state not in s.JOB_STATES:
        raise UnknownJobKindError(
            f"job state {state!r} is not known: pass one of {', '.join(s.JOB_STATES)}"
        )
    return state


def is_transient(error: BaseException) -> bool:
    """A fault that may go away on its own, so that the job is worth another attempt: a lost
    connection or an operational database error (DB-API's class for disconnects and the
    server's own resource errors), out of memory (host or GPU), a lock another process holds."""
    if isinstance(error, DBAPIError):
        return error.connection_invalidated or isinstance(error, OperationalError)
    if isinstance(error, SqlheadsError):
        return isinstance(error, BusyError)
    # torch.OutOfMemoryError by name: the queue does not import torch.
    out_of_memory = any(c.__name__ == "OutOfMemoryError" for c in type(error).__mro__)
    return out_of_memory or isinstance(error, MemoryError | ConnectionError | DisconnectionError)


def split_keys(keys: Sequence[str], parts: int) -> list[tuple[str | None, str | None]]:
    """``[key_from, key_to)`` ranges that cut the sorted distinct keys at their quantiles.

    Keys compare as Python strings (code points) both here and where a part filters its rows
    (sidecar/embed.py), never with a database collation that might order them otherwise. Fewer
    distinct keys than parts give fewer parts; the first range is open below, the last above.
    """
    distinct = sorted(set(keys))
    parts = max(1, min(parts, len(distinct)))
    cuts = [distinct[(i * len(distinct)) // parts] for i in range(1, parts)]
    bounds: list[str | None] = [None, *cuts, None]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def in_range(key: str, key_from: str | None, key_to: str | None) -> bool:
    return (key_from is None or key >= key_from) and (key_to is None or key < key_to)


class JobQueue:
    """The queue on one store; ``stale_after_seconds`` and ``max_attempts`` default to
    :data:`settings.SETTINGS` (``jobs.*``)."""

    def __init__(
        self,
        store: Store,
        *,
        stale_after_seconds: int | None = None,
        max_attempts: int | None = None,
    ) -> None:
        self.store = store
        self.stale_after_seconds = settings.bounded("jobs.stale_after_seconds", stale_after_seconds)
        self.max_attempts = settings.bounded("jobs.max_attempts", max_attempts)

    # -- requests ------------------------------------------------------------------------------

    def enqueue(
        self,
        kind: str,
        set_name: str,
        parameters: dict[str, Any],
        *,
        head: str | None = None,
        ranges: Sequence[tuple[str | None, str | None]] = ((None, None),),
        inputs: Sequence[pd.DataFrame] | None = None,
    ) -> list[Job]:
        """One job, or one part per key range (parts share ``group_id``: the first part's id);
        ``inputs``, one frame per range, are stored with each part in the same transaction
        (:mod:`sqlheads.store.job_inputs`), so no sidecar claims a job before its inputs."""
        check_kind(kind)
        validate_name("set", set_name)
        if head is not None:
            validate_name("head", head)
        body = json.dumps(parameters, sort_keys=True)
        ids: list[int] = []
        with self.store.engine.begin() as c:
            for part, (key_from, key_to) in enumerate(ranges, start=1):
                values = {
                    "kind": kind,
                    "state": "queued",
                    "head": head,
                    "set_name": set_name,
                    "parameters_json": body,
                    "group_id": ids[0] if ids else None,
                    "part": part,
                    "parts": len(ranges),
                    "key_from": key_from,
                    "key_to": key_to,
                    "max_attempts": self.max_attempts,
                    **job_inputs.requester(self.store),
                }
                ids.append(c.execute(insert(s.job_queue).values(**values)).inserted_primary_key[0])
                if inputs is not None:
                    job_inputs.insert_inputs(c, ids[-1], inputs[part - 1])
            if len(ids) > 1:
                c.execute(update(s.job_queue).where(q.job_id == ids[0]).values(group_id=ids[0]))
        return [self.get(job_id) for job_id in ids]

    # -- reading -------------------------------------------------------------------------------

    def get(self, job_id: int) -> Job:
        with self.store.engine.connect() as c:
            row = c.execute(select(s.job_queue).where(q.job_id == job_id)).first()
        if row is None:
            raise NotFoundError(
                f"job {job_id} does not exist: list the jobs with `sqlheads jobs` "
                "(SELECT * FROM heads.jobs)"
            )
        return _job(row._mapping)

    def listing(self, *, state: str | None = None, kind: str | None = None) -> pd.DataFrame:
        """Every job the caller may see (newest first), or those in ``state`` / of ``kind``:
        on SQL Server through ``heads.jobs``, which shows each caller the jobs they requested
        (heads_admin every job), as SSMS does."""
        query = self.listing_query(state=state, kind=kind)
        with self.store.engine.connect() as c:
            rows = c.execute(query).all()
        return typed_frame(rows, query.selected_columns)

    def listing_query(self, *, state: str | None = None, kind: str | None = None):
        """The SELECT of :meth:`listing`."""
        jobs = s.job_queue if self.store.is_sqlite else _jobs_view()
        query = select(jobs).order_by(jobs.c.job_id.desc())
        if check_state(state) is not None:
            query = query.where(jobs.c.state == state)
        if check_kind(kind) is not None:
            query = query.where(jobs.c.kind == kind)
        return query

    def count(self) -> int:
        """Jobs in the queue, of every state."""
        with self.store.engine.connect() as c:
            return int(c.execute(select(func.count()).select_from(s.job_queue)).scalar_one())

    # -- claims --------------------------------------------------------------------------------

    def claimable(self, kinds: Sequence[str] | None = None):
        """The SELECT of the next claimable job's id (the first queued or stale one)."""
        stale = q.heartbeat_at < self._now_minus(self.stale_after_seconds)
        query = (
            select(q.job_id, q.state, q.attempts, q.max_attempts, q.cancel_requested)
            .where(or_(q.state == "queued", and_(q.state == "running", stale)))
            .order_by(q.job_id)
            .limit(1)
            .with_hint(s.job_queue, CLAIM_HINT, "mssql")
        )
        if kinds:
            query = query.where(q.kind.in_([check_kind(k) for k in kinds]))
        return query

    def claim(self, worker: str, kinds: Sequence[str] | None = None) -> Job | None:
        """The next job, now running and held by ``worker``; None when nothing is claimable.

        A stale job is taken over (attempts + 1), unless its cancel was requested (it becomes
        cancelled) or it used its last attempt (it fails with 50057); then the claim looks on.
        """
        while True:
            with self._writer() as c:
                row = c.execute(self.claimable(kinds)).first()
                if row is None:
                    return None
                if row.state == "running" and row.cancel_requested:
                    self._close(c, row.job_id, "cancelled", stage="cancelled")
                    continue
                if row.state == "running" and row.attempts >= row.max_attempts:
                    error = JobStaleError(
                        f"job {row.job_id} stopped heartbeating on its last attempt "
                        f"({row.attempts} of {row.max_attempts}): its sidecar was killed or "
                        "lost; see the sidecar's log, then request the job again"
                    )
                    self._close(c, row.job_id, "failed", error=error)
                    continue
                c.execute(
                    update(s.job_queue)
                    .where(q.job_id == row.job_id)
                    .values(
                        state="running",
                        claimed_by=worker,
                        attempts=q.attempts + 1,
                        heartbeat_at=func.now(),
                        started_at=func.now(),
                        error=None,
                        error_number=None,
                    )
                )
                job_id = row.job_id
            return self.get(job_id)

    def _writer(self):
        """One writer transaction: SQLite takes its write lock at BEGIN (IMMEDIATE), before
        the SELECT, so no two claimers see the same row as claimable."""
        return _WriterTransaction(self.store)

    def _now_minus(self, seconds: int):
        if self.store.is_sqlite:
            # CURRENT_TIMESTAMP's own text form ('YYYY-MM-DD HH:MM:SS', UTC).
            return func.datetime("now", f"-{int(seconds)} seconds")
        return func.dateadd(literal_column("second"), -int(seconds), func.now())

    # -- a running job -------------------------------------------------------------------------

    def heartbeat(self, job_id: int, worker: str) -> bool:
        """Beat for a claim; True when the job's cancel was requested. A claim taken over by
        another sidecar raises :class:`JobClaimLostError`."""
        with self.store.engine.begin() as c:
            self._held(c, job_id, worker, {"heartbeat_at": func.now()})
            return bool(
                c.execute(select(q.cancel_requested).where(q.job_id == job_id)).scalar_one()
            )

    def progress(
        self, job_id: int, worker: str, done: int, total: int | None, stage: str | None
    ) -> bool:
        """Record progress (and beat); True when the job's cancel was requested."""
        values: dict[str, Any] = {
            "heartbeat_at": func.now(),
            "progress_done": int(done),
            "progress_total": None if total is None else int(total),
        }
        if stage is not None:
            values["stage"] = stage[:200]
        with self.store.engine.begin() as c:
            self._held(c, job_id, worker, values)
            return bool(
                c.execute(select(q.cancel_requested).where(q.job_id == job_id)).scalar_one()
            )

    def finish(
        self,
        job_id: int,
        worker: str,
        result: dict[str, Any],
        progress: tuple[int, int | None] | None = None,
    ) -> None:
        """Done, with its result and its last progress (which the throttle may have held)."""
        values: dict[str, Any] = {
            "state": "done",
            "result_json": json.dumps(result, default=str),
            "finished_at": func.now(),
            "stage": "done",
        }
        if progress is not None:
            values |= {"progress_done": progress[0], "progress_total": progress[1]}
        with self.store.engine.begin() as c:
            self._held(c, job_id, worker, values)

    def fail(self, job_id: int, worker: str, error: BaseException) -> str:
        """Record the error; back to queued if it is transient and attempts remain, else
        failed. The state."""
        number = error.number if isinstance(error, SqlheadsError) else None
        message = error.message if isinstance(error, SqlheadsError) else repr(error)
        with self.store.engine.begin() as c:
            row = c.execute(select(q.attempts, q.max_attempts).where(q.job_id == job_id)).one()
            retry = is_transient(error) and row.attempts < row.max_attempts
            values: dict[str, Any] = {
                "state": "queued" if retry else "failed",
                "error": message,
                "error_number": number,
                "heartbeat_at": None,
            }
            if retry:
                values["claimed_by"] = None
            else:
                values["finished_at"] = func.now()
            self._held(c, job_id, worker, values)
        return str(values["state"])

    def release(self, job_id: int, worker: str) -> None:
        """Give a running job back to the queue at once (a sidecar told to stop: SIGTERM,
        Ctrl-C), rather than leave it to go stale; the attempt it used still counts."""
        with self.store.engine.begin() as c:
            self._held(
                c,
                job_id,
                worker,
                {"state": "queued", "claimed_by": None, "heartbeat_at": None, "stage": "released"},
            )

    def mark_cancelled(self, job_id: int, worker: str) -> None:
        """The sidecar stopped a job whose cancel was requested."""
        with self.store.engine.begin() as c:
            self._held(
                c,
                job_id,
                worker,
                {"state": "cancelled", "finished_at": func.now(), "stage": "cancelled"},
            )

    def _held(self, c: Connection, job_id: int, worker: str, values: dict[str, Any]) -> None:
        """Update a job only while ``worker`` still holds its claim."""
        changed = c.execute(
            update(s.job_queue)
            .where(q.job_id == job_id, q.claimed_by == worker, q.state == "running")
            .values(**values)
        ).rowcount
        if not changed:
            raise JobClaimLostError(
                f"job {job_id} is no longer held by {worker}: its heartbeat went stale and "
                "another sidecar took it over (or it was cancelled); this sidecar leaves it"
            )
        if values.get("state") in FINISHED:
            job_inputs.forget(c, job_id)

    @staticmethod
    def _close(
        c: Connection,
        job_id: int,
        state: str,
        *,
        error: SqlheadsError | None = None,
        stage: str | None = None,
    ) -> None:
        values: dict[str, Any] = {"state": state, "finished_at": func.now()}
        if error is not None:
            values |= {"error": error.message, "error_number": error.number}
        if stage is not None:
            values["stage"] = stage
        c.execute(update(s.job_queue).where(q.job_id == job_id).values(**values))
        job_inputs.forget(c, job_id)

    # -- cancel --------------------------------------------------------------------------------

    def cancel(self, job_id: int) -> str:
        """Queued: cancelled at once. Running: cancel requested, its sidecar stops it at its
        next heartbeat. Finished: refused (50050). Only its requester may (50070; on SQL Server
        heads_admin too). The job's state after the call. On SQL Server ``heads.cancel_job``
        decides, outside any transaction of ours (it refuses one: 50017)."""
        if not self.store.is_sqlite:
            with self.store.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
                try:
                    return str(c.execute(CANCEL_JOB, {"job_id": job_id}).one().state)
                except DBAPIError as error:
                    raise from_server(str(error.orig)) or error from None
        with self._writer() as c:
            row = c.execute(select(q.state, q.requested_user).where(q.job_id == job_id)).first()
            if row is None:
                raise NotFoundError(
                    f"job {job_id} does not exist: list the jobs with `sqlheads jobs`"
                )
            job_inputs.refuse_other_requester(self.store, job_id, row.requested_user)
            if row.state in FINISHED:
                raise JobStateError(
                    f"job {job_id} is {row.state}: only queued or running jobs can be "
                    "cancelled; request the work again if you need it"
                )
            if row.state == "queued":
                self._close(c, job_id, "cancelled", stage="cancelled")
                return "cancelled"
            c.execute(update(s.job_queue).where(q.job_id == job_id).values(cancel_requested=1))
            return "cancel_requested"


class _WriterTransaction:
    """``with``: a connection in one transaction that holds the database's write lock from
    its first statement on SQLite (``BEGIN IMMEDIATE``); a plain transaction elsewhere."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def __enter__(self) -> Connection:
        self.connection = self.store.engine.connect()
        if self.store.is_sqlite:
            # pysqlite begins transactions lazily, before its first write; an explicit BEGIN
            # IMMEDIATE takes the write lock now (waiting up to the engine's busy timeout).
            self.connection.exec_driver_sql("BEGIN IMMEDIATE")
        return self.connection

    def __exit__(self, kind, value, traceback) -> None:
        try:
            if kind is None:
                self.connection.commit()
            else:
                self.connection.rollback()
        finally:
            self.connection.close()


def _jobs_view():
    """``heads.jobs`` (SQL Server), with the columns of :func:`schema.jobs_select`."""
    columns = [column(c.name, c.type) for c in s.jobs_select().selected_columns]
    return table("jobs", *columns, schema=s.SCHEMA)


def _job(row: Any) -> Job:
    return Job(
        job_id=int(row["job_id"]),
        kind=row["kind"],
        state=row["state"],
        head=row["head"],
        set_name=row["set_name"],
        parameters=json.loads(row["parameters_json"]),
        group_id=row["group_id"],
        part=int(row["part"]),
        parts=int(row["parts"]),
        key_from=row["key_from"],
        key_to=row["key_to"],
        attempts=int(row["attempts"]),
        max_attempts=int(row["max_attempts"]),
        claimed_by=row["claimed_by"],
        cancel_requested=bool(row["cancel_requested"]),
        requested_user=row["requested_user"],
    )
