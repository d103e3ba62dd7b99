"""release 0006: issue 19 (the sidecar runs no caller's SQL; the second SQL Server audit)

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24 12:00:00.000000

Several issues add to this revision; each one's ops are under a comment naming it. The T-SQL
objects it creates or changes are in ``sql/0006/``.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import sqlheads_sql
from sqlheads.procedures import SETTINGS
from sqlheads.store.schema import KEY_LENGTH, NAME_LENGTH
from sqlheads.store.schema import SCHEMA as MSSQL_SCHEMA

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

IS_MSSQL = op.get_context().dialect.name == "mssql"
SCHEMA = MSSQL_SCHEMA if IS_MSSQL else None

# Issue 19: the jobs view as this revision creates it on SQLite, frozen (see 0001's VIEWS_SQL);
# on SQL Server heads.jobs (sql/0006/views/jobs.sql) shows each caller their own jobs.
JOBS_VIEW = """SELECT job_queue.job_id, job_queue.kind, job_queue.state, job_queue.head, job_queue.set_name, job_queue.group_id, job_queue.part, job_queue.parts, job_queue.key_from, job_queue.key_to, job_queue.attempts, job_queue.max_attempts, job_queue.claimed_by, job_queue.heartbeat_at, job_queue.cancel_requested, job_queue.stage, job_queue.progress_done, job_queue.progress_total, job_queue.error_number, job_queue.error, job_queue.result_json, job_queue.parameters_json, job_queue.requested_at, job_queue.started_at, job_queue.finished_at, job_queue.requested_by, job_queue.requested_user 
FROM job_queue"""  # noqa: W291, E501
# The view as revision 0005 left it, restored on downgrade.
JOBS_VIEW_0005 = JOBS_VIEW.replace(", job_queue.requested_by, job_queue.requested_user", "")


def _ref(column: str) -> str:
    return f"{SCHEMA}.{column}" if SCHEMA else column


def upgrade() -> None:
    # -- issue 19: who asked, and the inputs captured at request time -------------------------
    if not IS_MSSQL:
        op.execute("DROP VIEW IF EXISTS jobs")
    op.add_column(
        "job_queue",
        sa.Column("requested_by", sa.Unicode(NAME_LENGTH), nullable=True),
        schema=SCHEMA,
    )
    op.add_column(
        "job_queue",
        sa.Column("requested_user", sa.Unicode(NAME_LENGTH), nullable=True),
        schema=SCHEMA,
    )
    op.create_table(
        "job_inputs",
        sa.Column("input_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("item_key", sa.Unicode(length=KEY_LENGTH), nullable=False),
        sa.Column("label", sa.Unicode(length=400), nullable=True),
        sa.Column("text", sa.UnicodeText(), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"],
            [_ref("job_queue.job_id")],
            name=op.f("fk_job_inputs_job_id_job_queue"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("input_id", name=op.f("pk_job_inputs")),
        schema=SCHEMA,
    )
    op.create_index(
        op.f("ix_job_inputs_job_id_item_key"),
        "job_inputs",
        ["job_id", "item_key"],
        schema=SCHEMA,
    )
    if IS_MSSQL:  # sql/0006: the capturing requests, heads.jobs, cancel, grants, STRING_AGG
        sqlheads_sql.run(sqlheads_sql.upgrade_batches(revision, SETTINGS))
    else:
        op.execute(f"CREATE VIEW jobs AS {JOBS_VIEW}")


def downgrade() -> None:
    # -- issue 19 ----------------------------------------------------------------------------
    if IS_MSSQL:
        sqlheads_sql.run(sqlheads_sql.downgrade_batches(revision, SETTINGS))
    else:
        op.execute("DROP VIEW IF EXISTS jobs")
    op.drop_index(op.f("ix_job_inputs_job_id_item_key"), table_name="job_inputs", schema=SCHEMA)
    op.drop_table("job_inputs", schema=SCHEMA)
    if IS_MSSQL:
        op.drop_column("job_queue", "requested_user", schema=SCHEMA)
        op.drop_column("job_queue", "requested_by", schema=SCHEMA)
    else:  # natively (SQLite 3.35+), as 0005 drops teachers.model_id
        op.execute("ALTER TABLE job_queue DROP COLUMN requested_user")
        op.execute("ALTER TABLE job_queue DROP COLUMN requested_by")
        op.execute(f"CREATE VIEW jobs AS {JOBS_VIEW_0005}")
