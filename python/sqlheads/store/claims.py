"""The job a sidecar holds while it writes for it (the third SQL Server audit, points 1 and 2).

On SQL Server the sidecar's login writes sets, versions and soft labels only through procedures
that check it still holds that job as running and write only what the job asked for
(``heads.assert_job_held``; ``heads.job_set``, ``heads.add_version``,
``heads.store_soft_labels``): its table grants do not reach ``embedding_sets``, ``models``,
``deployments``, ``teachers`` or ``soft_labels``. On SQLite the claim names the author of the
source query a job records: its requester, as on SQL Server.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Connection, text


@dataclass(frozen=True)
class JobClaim:
    job_id: int
    worker: str  # claimed_by: host:pid of the sidecar
    requested_user: str | None  # the job's requester: the author of the query it records


# heads.job_set (sql/0007/internal/job_set.sql): the embed job's set, created if missing, and
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
