"""The job queue: work requested by analysts (``job_queue``), claimed by sidecars.

Several sidecars may claim at once, on several machines: a claim is one writer transaction
(SQLite: ``BEGIN IMMEDIATE``, so two claimers never read the same queued row; SQL Server:
``heads.claim_job``, ``SELECT TOP (1) ... WITH (UPDLOCK, READPAST, ROWLOCK, READCOMMITTEDLOCK)``
then ``UPDATE`` in one transaction, so a second claimer skips the row the first one holds).
Every time stamp is the database's own (``CURRENT_TIMESTAMP``), so machines with drifting clocks
agree on which heartbeat is stale.

On SQL Server every write of the queue is a procedure (:mod:`sqlheads.store.server_jobs`,
revision 0008): a sidecar's login may only read ``heads.job_queue``, and each transition checks
the state it leaves and the worker that holds the job, so that a finished, cancelled or other
worker's job is never revived or taken. On SQLite the same transitions run here, each under
:func:`sqlheads.store.boundary.procedure` of the procedure it stands for, with the same checks.

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
    JobScopeError,
    JobStaleError,
    JobStateError,
    NotFoundError,
    SqlheadsError,
    UnknownJobKindError,
    from_server,
)
from sqlheads.store import boundary, job_inputs, server_jobs
from sqlheads.store import schema as s
from sqlheads.store.frames import typed_frame
from sqlheads.store.repository import Store, validate_name
from sqlheads.store.set_writes import require_owner

FINISHED = ("done", "failed", "cancelled")
# SQL Server: analysts may not read or write heads.job_queue; they list through the view
# heads.jobs (each caller's own jobs; every job for heads_admin) and cancel through the
# procedure, which decides who may (sql/0008/procedures/cancel_job.sql: by USER_SID()).
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


def _or_default(name: str, given: int | None) -> int:
    return int(settings.default(name)) if given is None else given


class JobQueue:
    """The queue on one store; ``stale_after_seconds`` and ``max_attempts`` default to
    :data:`settings.SETTINGS` (``jobs.*``; a sidecar's options checked them against its
    bounds)."""

    def __init__(
        self,
        store: Store,
        *,
        stale_after_seconds: int | None = None,
        max_attempts: int | None = None,
    ) -> None:
        self.store = store
        self.stale_after_seconds = _or_default("jobs.stale_after_seconds", stale_after_seconds)
        self.max_attempts = _or_default("jobs.max_attempts", max_attempts)

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
        if not self.store.is_sqlite:
            values = {
                "kind": kind,
                "set": set_name,
                "head": head,
                "parameters_json": body,
                "max_attempts": self.max_attempts,
            }
            ids = server_jobs.enqueue(self.store, values, ranges, inputs)
            return [self.get(job_id) for job_id in ids]
        ids: list[int] = []
        with self.store.engine.begin() as c, boundary.procedure("heads.enqueue_job"):
            if kind == "embed":
                found = c.execute(
                    select(s.embedding_sets.c.set_id).where(s.embedding_sets.c.name == set_name)
                ).scalar_one_or_none()
                if found is not None:
                    require_owner(c, found, self.store.database_user())
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
        """The SELECT of :meth:`listing`: of the view ``jobs`` on both databases, which is all
        an analyst may read of the queue (on SQL Server it shows each caller their own jobs)."""
        jobs = _jobs_view(self.store)
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
        """The SELECT of the next claimable job's id (the first queued or stale one), on
        SQLite."""
        # CURRENT_TIMESTAMP's own text form on SQLite ('YYYY-MM-DD HH:MM:SS', UTC); SQL Server's
        # claim is heads.claim_job's.
        stale = q.heartbeat_at < func.datetime("now", f"-{int(self.stale_after_seconds)} seconds")
        query = (
            select(q.job_id, q.state, q.attempts, q.max_attempts, q.cancel_requested)
            .where(or_(q.state == "queued", and_(q.state == "running", stale)))
            .order_by(q.job_id)
            .limit(1)
        )
        if kinds:
            query = query.where(q.kind.in_([check_kind(k) for k in kinds]))
        return query

    def claim(self, worker: str, kinds: Sequence[str] | None = None) -> Job | None:
        """The next job, now running and held by ``worker``; None when nothing is claimable.

        A stale job is taken over (attempts + 1), unless its cancel was requested (it becomes
        cancelled) or it used its last attempt (it fails with 50057); then the claim looks on.
        SQL Server: ``heads.claim_job``.
        """
        kinds = [str(check_kind(k)) for k in kinds] if kinds else None
        if not self.store.is_sqlite:
            job_id = server_jobs.claim(self.store, worker, kinds, self.stale_after_seconds)
        else:
            with boundary.procedure("heads.claim_job"):
                job_id = self._claim(worker, kinds)
        return None if job_id is None else self.get(job_id)

    def _claim(self, worker: str, kinds: Sequence[str] | None) -> int | None:
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
                return int(row.job_id)

    def _writer(self):
        """One writer transaction: SQLite takes its write lock at BEGIN (IMMEDIATE), before
        the SELECT, so no two claimers see the same row as claimable."""
        return _WriterTransaction(self.store)

    # -- a running job -------------------------------------------------------------------------

    def heartbeat(self, job_id: int, worker: str) -> bool:
        """Beat for a claim; True when the job's cancel was requested. A claim taken over by
        another sidecar (or a job no longer running) raises :class:`JobClaimLostError`."""
        return self._beat(job_id, worker, None)

    def progress(
        self, job_id: int, worker: str, done: int, total: int | None, stage: str | None
    ) -> bool:
        """Record progress (and beat); True when the job's cancel was requested."""
        return self._beat(
            job_id,
            worker,
            (
                int(done),
                None if total is None else int(total),
                None if stage is None else stage[:200],
            ),
        )

    def _beat(
        self, job_id: int, worker: str, progress: tuple[int, int | None, str | None] | None
    ) -> bool:
        """``heads.heartbeat_job``, with ``progress`` (done, total, stage) when given."""
        if not self.store.is_sqlite:
            return server_jobs.heartbeat(self.store, job_id, worker, progress)
        values: dict[str, Any] = {"heartbeat_at": func.now()}
        if progress is not None:
            values |= {"progress_done": progress[0], "progress_total": progress[1]}
            if progress[2] is not None:
                values["stage"] = progress[2]
        with self.store.engine.begin() as c, boundary.procedure("heads.heartbeat_job"):
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
        body = json.dumps(result, default=str)
        if not self.store.is_sqlite:
            server_jobs.finish(self.store, job_id, worker, body, progress)
            return
        values: dict[str, Any] = {
            "state": "done",
            "result_json": body,
            "finished_at": func.now(),
            "stage": "done",
        }
        if progress is not None:
            values |= {"progress_done": progress[0], "progress_total": progress[1]}
        with self.store.engine.begin() as c, boundary.procedure("heads.finish_job"):
            self._held(c, job_id, worker, values)

    def fail(self, job_id: int, worker: str, error: BaseException) -> str:
        """Record the error; back to queued if it is transient and attempts remain, else
        failed. The state."""
        number = error.number if isinstance(error, SqlheadsError) else None
        message = error.message if isinstance(error, SqlheadsError) else repr(error)
        if not self.store.is_sqlite:
            return server_jobs.fail(
                self.store, job_id, worker, number, message, is_transient(error)
            )
        with self.store.engine.begin() as c, boundary.procedure("heads.fail_job"):
            row = c.execute(
                select(q.attempts, q.max_attempts).where(
                    q.job_id == job_id, q.claimed_by == worker, q.state == "running"
                )
            ).first()
            if row is None:
                raise _not_held(c, job_id, worker)
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
        self._release(job_id, worker, cancelled=False)

    def mark_cancelled(self, job_id: int, worker: str) -> None:
        """The sidecar stopped a job whose cancel was requested (only such a job: 50072)."""
        self._release(job_id, worker, cancelled=True)

    def _release(self, job_id: int, worker: str, *, cancelled: bool) -> None:
        """``heads.release_job``."""
        if not self.store.is_sqlite:
            server_jobs.release(self.store, job_id, worker, cancelled=cancelled)
            return
        with self.store.engine.begin() as c, boundary.procedure("heads.release_job"):
            asked = c.execute(
                select(q.cancel_requested).where(
                    q.job_id == job_id, q.claimed_by == worker, q.state == "running"
                )
            ).scalar_one_or_none()
            if asked is None:
                raise _not_held(c, job_id, worker)
            if cancelled and not asked:
                raise JobScopeError(
                    f"job {job_id} was not asked to be cancelled: a sidecar cancels only a job "
                    "whose requester cancelled it; release it to the queue, or fail it"
                )
            values: dict[str, Any] = (
                {"state": "cancelled", "finished_at": func.now(), "stage": "cancelled"}
                if cancelled
                else {"state": "queued", "claimed_by": None, "heartbeat_at": None}
                | {"stage": "released"}
            )
            self._held(c, job_id, worker, values)

    def _held(self, c: Connection, job_id: int, worker: str, values: dict[str, Any]) -> None:
        """Update a job only while ``worker`` still holds it as running (a finished job is
        never revived, another worker's never taken: 50054)."""
        changed = c.execute(
            update(s.job_queue)
            .where(q.job_id == job_id, q.claimed_by == worker, q.state == "running")
            .values(**values)
        ).rowcount
        if not changed:
            raise _not_held(c, job_id, worker)
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
        with self._writer() as c, boundary.procedure("heads.cancel_job"):
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


def _jobs_view(store: Store):
    """The view ``jobs`` (``heads.jobs`` on SQL Server), with :func:`schema.jobs_select`'s
    columns."""
    columns = [column(c.name, c.type) for c in s.jobs_select().selected_columns]
    return table("jobs", *columns, schema=None if store.is_sqlite else s.SCHEMA)


def _not_held(c: Connection, job_id: int, worker: str) -> JobClaimLostError:
    """``heads.job_not_held`` on SQLite: the refusal, saying what the job is now."""
    row = c.execute(select(q.state, q.claimed_by).where(q.job_id == job_id)).first()
    if row is None:
        now = "there is no such job"
    elif row.state == "running":
        now = f"another sidecar holds it: {row.claimed_by}"
    else:
        now = f"it is {row.state}"
    return JobClaimLostError(
        f"job {job_id} is not running under {worker} ({now}): a sidecar changes only a job it "
        "holds as running, and never revives a finished one; this sidecar leaves it"
    )


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
