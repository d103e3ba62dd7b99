"""sidecar: the job queue, and soft labels that name the teacher model they came from

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23 03:00:00.000000

Adds ``job_queue`` (work requested by analysts and claimed by sidecars: teacher fine-tuning and
GPU embedding) and, on ``teachers``, ``model_id``: the fine-tuned model (kind ``teacher``)
whose predictions the soft labels are. ``model_id`` is a plain column: ``models.teacher_id``
already names ``teachers``, and a foreign key back would make a cycle that stops either table
being dropped. The view ``jobs`` shows the queue (SQLite here; SQL Server from ``sql/0005/``,
which also holds ``heads.request_embed``, ``heads.request_teacher``, ``heads.cancel_job`` and
the grants of ``heads_analyst`` and ``heads_sidecar``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import sqlheads_sql
from sqlheads.settings import SETTINGS
from sqlheads.store.schema import JOB_KINDS, JOB_STATES
from sqlheads.store.schema import SCHEMA as MSSQL_SCHEMA

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

IS_MSSQL = op.get_context().dialect.name == "mssql"
SCHEMA = MSSQL_SCHEMA if IS_MSSQL else None

# The view as this revision creates it on SQLite, frozen (see 0001's VIEWS_SQL).
JOBS_VIEW = """SELECT job_queue.job_id, job_queue.kind, job_queue.state, job_queue.head, job_queue.set_name, job_queue.group_id, job_queue.part, job_queue.parts, job_queue.key_from, job_queue.key_to, job_queue.attempts, job_queue.max_attempts, job_queue.claimed_by, job_queue.heartbeat_at, job_queue.cancel_requested, job_queue.stage, job_queue.progress_done, job_queue.progress_total, job_queue.error_number, job_queue.error, job_queue.result_json, job_queue.parameters_json, job_queue.requested_at, job_queue.started_at, job_queue.finished_at 
FROM job_queue"""  # noqa: W291, E501


def upgrade() -> None:
    op.create_table(
        "job_queue",
        sa.Column("job_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("state", sa.String(length=16), server_default="queued", nullable=False),
        sa.Column("head", sa.Unicode(length=128), nullable=True),
        sa.Column("set_name", sa.Unicode(length=128), nullable=False),
        sa.Column("parameters_json", sa.UnicodeText(), nullable=False),
        sa.Column("group_id", sa.Integer(), nullable=True),
        sa.Column("part", sa.Integer(), server_default=sa.text("1"), nullable=False),
        sa.Column("parts", sa.Integer(), server_default=sa.text("1"), nullable=False),
        sa.Column("key_from", sa.Unicode(length=450), nullable=True),
        sa.Column("key_to", sa.Unicode(length=450), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("max_attempts", sa.Integer(), server_default=sa.text("3"), nullable=False),
        sa.Column("claimed_by", sa.Unicode(length=200), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(), nullable=True),
        sa.Column("cancel_requested", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("stage", sa.Unicode(length=200), nullable=True),
        sa.Column("progress_done", sa.Integer(), nullable=True),
        sa.Column("progress_total", sa.Integer(), nullable=True),
        sa.Column("result_json", sa.UnicodeText(), nullable=True),
        sa.Column("error_number", sa.Integer(), nullable=True),
        sa.Column("error", sa.UnicodeText(), nullable=True),
        sa.Column("requested_at", sa.DateTime(), server_default=sa.func.now(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=True),
        sa.Column("finished_at", sa.DateTime(), nullable=True),
        sa.CheckConstraint(f"kind IN {JOB_KINDS}", name=op.f("ck_job_queue_job_kind")),
        sa.CheckConstraint(f"state IN {JOB_STATES}", name=op.f("ck_job_queue_job_state")),
        sa.CheckConstraint("cancel_requested IN (0, 1)", name=op.f("ck_job_queue_cancel_flag")),
        sa.PrimaryKeyConstraint("job_id", name=op.f("pk_job_queue")),
        schema=SCHEMA,
    )
    op.create_index(
        op.f("ix_job_queue_state_job_id"), "job_queue", ["state", "job_id"], schema=SCHEMA
    )
    op.add_column("teachers", sa.Column("model_id", sa.Integer(), nullable=True), schema=SCHEMA)
    if IS_MSSQL:  # sql/0005: heads.jobs, the request and cancel verbs, the sidecar's grants
        sqlheads_sql.run(sqlheads_sql.upgrade_batches(revision, SETTINGS))
    else:
        op.execute(f"CREATE VIEW jobs AS {JOBS_VIEW}")


def downgrade() -> None:
    if IS_MSSQL:
        sqlheads_sql.run(sqlheads_sql.downgrade_batches(revision, SETTINGS))
    else:
        op.execute("DROP VIEW IF EXISTS jobs")
    if IS_MSSQL:
        op.drop_column("teachers", "model_id", schema=SCHEMA)
    else:  # natively (SQLite 3.35+): a batch rebuild would trip over the views naming teachers
        op.execute("ALTER TABLE teachers DROP COLUMN model_id")
    op.drop_index(op.f("ix_job_queue_state_job_id"), table_name="job_queue", schema=SCHEMA)
    op.drop_table("job_queue", schema=SCHEMA)
