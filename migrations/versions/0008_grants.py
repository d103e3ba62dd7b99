"""release 0008: the sidecar starts on SQL Server, job transitions through procedures, sets
have owners, authors by security identifier (the fourth SQL Server audit)

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02 12:00:00.000000

Tables, both databases: ``embedding_sets.owner_user`` and ``owner_sid`` (who made the set:
only its owner, or heads_admin on SQL Server, writes into it), ``embedding_sets.source_sid``
and ``job_queue.requested_sid`` (SQL Server's ``USER_SID()`` of a stored query's author and of
a job's requester: a user dropped and made again under the same name is another principal).
On SQLite the SID columns stay NULL: its users are the OS users, by name. Rows written before
this revision are given the owner and SIDs their recorded names have now (SQL Server: the
database principal of that name, if it still exists; SQLite: ``owner_user = source_user``).

The T-SQL objects it creates or changes are in ``sql/0008/``: the sidecar's job transitions
(``heads.claim_job``, ``heartbeat_job``, ``finish_job``, ``fail_job``, ``release_job``), its
scoped batch writes (``heads.write_embeddings``, ``heads.write_transfer_rows``), set ownership
(``heads.assert_set_owner``, ``heads.store_set``), the Python CLI's queue (``heads.enqueue_job``),
the authors by SID (``heads.set_source``, ``heads.job_set``, ``heads.cancel_job``, ``heads.jobs``)
and the four roles' new grant lists.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import sqlheads_sql
from sqlheads.settings import SETTINGS
from sqlheads.store.schema import NAME_LENGTH, SID_LENGTH
from sqlheads.store.schema import SCHEMA as MSSQL_SCHEMA

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

IS_MSSQL = op.get_context().dialect.name == "mssql"
SCHEMA = MSSQL_SCHEMA if IS_MSSQL else None

COLUMNS = (
    ("embedding_sets", "source_sid", sa.LargeBinary(SID_LENGTH)),
    ("embedding_sets", "owner_user", sa.Unicode(NAME_LENGTH)),
    ("embedding_sets", "owner_sid", sa.LargeBinary(SID_LENGTH)),
    ("job_queue", "requested_sid", sa.LargeBinary(SID_LENGTH)),
)

# SQL Server: the principals the recorded names stand for now. A name whose user was dropped
# gets no SID (its query runs for no one, its set is taken by its next writer, its job is
# heads_admin's to cancel); one dropped and made again before this upgrade is the new user.
BACKFILL_MSSQL = (
    """UPDATE es
SET
    es.source_sid = dp.sid,
    es.owner_sid = dp.sid,
    es.owner_user = dp.name
FROM heads.embedding_sets AS es
INNER JOIN sys.database_principals AS dp ON es.source_user = dp.name""",
    """UPDATE q
SET q.requested_sid = dp.sid
FROM heads.job_queue AS q
INNER JOIN sys.database_principals AS dp ON q.requested_user = dp.name""",
)
BACKFILL_SQLITE = ("UPDATE embedding_sets SET owner_user = source_user",)


def upgrade() -> None:
    for table, name, type_ in COLUMNS:
        op.add_column(table, sa.Column(name, type_, nullable=True), schema=SCHEMA)
    for statement in BACKFILL_MSSQL if IS_MSSQL else BACKFILL_SQLITE:
        op.execute(statement)
    if IS_MSSQL:  # after the columns the objects read
        sqlheads_sql.run(sqlheads_sql.upgrade_batches(revision, SETTINGS))


def downgrade() -> None:
    if IS_MSSQL:
        sqlheads_sql.run(sqlheads_sql.downgrade_batches(revision, SETTINGS))
    for table, name, _ in reversed(COLUMNS):
        if IS_MSSQL:
            op.drop_column(table, name, schema=SCHEMA)
        else:  # natively (SQLite 3.35+), as 0007 drops its column
            op.execute(f"ALTER TABLE {table} DROP COLUMN {name}")
