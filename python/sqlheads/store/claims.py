"""The job a sidecar holds while it writes for it (the third and fourth SQL Server audits).

On SQL Server the sidecar's login writes sets, vectors, versions, soft labels and transfer rows
only through procedures that check it still holds that job as running and write only what the
job asked for (``heads.assert_job_held``; ``heads.job_set``, ``heads.write_embeddings``,
``heads.add_version``, ``heads.store_soft_labels``, ``heads.write_transfer_rows``): its table
grants do not reach ``embedding_sets``, ``embeddings``, ``models``, ``deployments``,
``teachers``, ``soft_labels`` or the transfer tables. On SQLite the same checks run here, in
the equivalents of those procedures, with the same numbers (50072), so that both hosts refuse
the same writes; the source query a job records is its requester's, as on SQL Server.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, exists, select, text

from sqlheads import settings
from sqlheads.errors import JobScopeError
from sqlheads.store import schema as s


@dataclass(frozen=True)
class JobClaim:
    job_id: int
    worker: str  # claimed_by: host:pid of the sidecar
    requested_user: str | None  # the job's requester: the author of the query it records


@dataclass(frozen=True)
class HeldJob:
    """What ``heads.assert_job_held`` hands back: the job's own head, set, parameters and
    requester, read from its row (which no sidecar can rewrite)."""

    job_id: int
    head: str | None
    set_name: str
    parameters: dict[str, Any]
    requested_user: str | None

    @property
    def teacher_head(self) -> str:
        """The head its teacher versions go to: its head plus ``teacher.suffix``."""
        return f"{self.head}{settings.SETTINGS['teacher.suffix'].default}"


# heads.job_set (sql/0008/internal/job_set.sql): the embed job's set, created if missing, and
# with record_source = 1 the request's source query recorded with its requester as author.
JOB_SET = text(
    "SET NOCOUNT ON; DECLARE @set_id int; "
    "EXEC heads.job_set @job_id = :job_id, @worker = :worker, "
    "@record_source = :record_source, @set_id = @set_id OUTPUT; "
    "SELECT @set_id AS set_id"
)


def job_set(connection: Connection, claim: JobClaim, *, record_source: bool) -> int:
    """The set_id of the embed job's set on SQL Server (``heads.job_set``)."""
    return int(
        connection.execute(
            JOB_SET,
            {"job_id": claim.job_id, "worker": claim.worker, "record_source": int(record_source)},
        ).scalar_one()
    )


def held(connection: Connection, claim: JobClaim, kind: str) -> HeldJob:
    """``heads.assert_job_held`` on SQLite: the job ``claim`` names, of ``kind``, running and
    claimed by its worker; 50072 otherwise."""
    q = s.job_queue.c
    row = connection.execute(
        select(q.head, q.set_name, q.parameters_json, q.requested_user).where(
            q.job_id == claim.job_id,
            q.kind == kind,
            q.state == "running",
            q.claimed_by == claim.worker,
        )
    ).first()
    if row is None:
        raise JobScopeError(
            f"job {claim.job_id} is not a running {kind} job held by {claim.worker}: a sidecar "
            "writes only for the job it claimed, while it holds it; claim the job again "
            "(sqlheads sidecar) if its claim went stale"
        )
    return HeldJob(
        claim.job_id,
        row.head,
        row.set_name,
        json.loads(row.parameters_json),
        row.requested_user,
    )


def outside(job: HeldJob, what: str) -> JobScopeError:
    """The refusal of a write the held job did not ask for."""
    return JobScopeError(
        f"job {job.job_id} writes {what} only: a sidecar writes only what the job it holds "
        "asked for"
    )


def is_job_set(connection: Connection, job: HeldJob, set_id: int) -> bool:
    """Whether ``set_id`` is the held job's own set."""
    es = s.embedding_sets.c
    return bool(
        connection.execute(
            select(exists().where(es.set_id == set_id, es.name == job.set_name))
        ).scalar()
    )


def is_teacher_version(connection: Connection, job: HeldJob, model_id: int, set_id: int) -> bool:
    """Whether ``model_id`` is a version of the held job's teacher head on ``set_id``."""
    m = s.models.c
    return bool(
        connection.execute(
            select(
                exists().where(
                    m.model_id == model_id, m.head == job.teacher_head, m.set_id == set_id
                )
            )
        ).scalar()
    )


def check_version(connection: Connection, claim: JobClaim, values: dict[str, Any]) -> str | None:
    """``heads.add_version``'s scope on SQLite: a version of the held teacher job's head or
    of its teacher, on its set, naming only that set's teacher of the job; the job's deploy
    policy, which decides instead of the caller's."""
    job = held(connection, claim, "teacher")
    teacher_id = values.get("teacher_id")
    t = s.teachers.c
    allowed = (
        values.get("head") in (job.head, job.teacher_head)
        and is_job_set(connection, job, values.get("set_id"))
        and (
            teacher_id is None
            or connection.execute(
                select(
                    exists().where(
                        t.teacher_id == teacher_id,
                        t.set_id == values["set_id"],
                        t.name == job.teacher_head,
                    )
                )
            ).scalar()
        )
    )
    if not allowed:
        raise outside(
            job,
            f"versions of head {job.head!r} and of its teacher {job.teacher_head!r} on set "
            f"{job.set_name!r}, not of head {values.get('head')!r}",
        )
    return job.parameters.get("deploy")


def check_soft_labels(
    connection: Connection, claim: JobClaim, teacher: str, set_id: int, model_id: int | None
) -> None:
    """``heads.store_soft_labels``' scope on SQLite: the held teacher job's teacher, on its
    set, from a version of that teacher."""
    job = held(connection, claim, "teacher")
    allowed = (
        teacher == job.teacher_head
        and is_job_set(connection, job, set_id)
        and (model_id is None or is_teacher_version(connection, job, model_id, set_id))
    )
    if not allowed:
        raise outside(
            job,
            f"the soft labels of teacher {job.teacher_head!r} on set {job.set_name!r}, not of "
            f"teacher {teacher!r}",
        )


def check_transfer(connection: Connection, claim: JobClaim, model_id: int) -> None:
    """``heads.write_transfer_rows``' scope on SQLite: transfer rows of a version of the held
    teacher job's teacher, on its set."""
    job = held(connection, claim, "teacher")
    set_id = connection.execute(
        select(s.models.c.set_id).where(s.models.c.model_id == model_id)
    ).scalar_one_or_none()
    if set_id is None or not is_teacher_version(connection, job, model_id, set_id):
        raise outside(
            job,
            f"the transfer rows of teacher {job.teacher_head!r} on set {job.set_name!r}, not "
            f"of version {model_id}",
        )
