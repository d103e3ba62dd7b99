"""release 0006: baselines (21); the sidecar runs no caller's SQL (19); deploys that never
blank latest_predictions (20); NULL keys rejected (16)

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24 12:00:00.000000

Several issues add to this revision; each one's ops are under a comment naming it. The T-SQL
objects it creates or changes are in ``sql/0006/``.

Issue 21: on ``models``, the TF-IDF + logistic regression baseline fitted on the version's own
training rows and scored on its held-out rows (``baseline_accuracy``, ``baseline_macro_f1``,
``baseline_seconds``) or why it was not (``baseline_skipped``); ``model_summary`` shows them
with ``below_baseline`` (SQLite here; SQL Server from ``sql/0006/views/model_summary.sql``).

Issue 19: ``job_queue`` records who asked (``requested_by``, ``requested_user``), and
``job_inputs`` holds each job's inputs captured at request time under the requester's rights,
so that the sidecar never runs a caller's query text.

Issue 20 (point 1): ``latest_predictions`` shows each row's prediction by the most recently
deployed version of its head that has one, so that the predictions a deploy could not replace
(a text model whose set has no known source) stay in view until ``predict`` runs (SQLite here;
SQL Server from ``sql/0006/``, which also holds ``heads.deploy`` and ``heads.roll_back`` that
re-score the replaced rows in the deploy's transaction and prune the predictions they replace).

Issue 16 (part 2), SQL Server only: ``heads.embed`` rejects rows with a NULL or empty item_key
(one rejects row, under the empty key) instead of refusing the call; ``heads.predict`` refuses
a keys query returning one (50003), as the Python host does.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import sqlheads_sql
from sqlheads.settings import SETTINGS
from sqlheads.store.schema import KEY_LENGTH, NAME_LENGTH
from sqlheads.store.schema import SCHEMA as MSSQL_SCHEMA

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

IS_MSSQL = op.get_context().dialect.name == "mssql"
SCHEMA = MSSQL_SCHEMA if IS_MSSQL else None

# issue 21: the baseline's columns, and model_summary before and after them (SQLite, frozen)
BASELINE_COLUMNS = (
    ("baseline_accuracy", sa.Float()),
    ("baseline_macro_f1", sa.Float()),
    ("baseline_seconds", sa.Float()),
    ("baseline_skipped", sa.Unicode(length=400)),
)
MODEL_SUMMARY_BEFORE = """SELECT models.head, models.version, models.model_id, models.kind, embedding_sets.name AS set_name, encoders.name AS encoder_name, models.accuracy, models.macro_f1, models.rows_train, models.rows_test, models.seconds, models.created_at, CASE WHEN (current_deployments.model_id IS NOT NULL) THEN 1 ELSE 0 END AS is_deployed, models.parameters, teachers.name AS teacher, models.teacher_accuracy 
FROM models JOIN embedding_sets ON embedding_sets.set_id = models.set_id JOIN encoders ON encoders.encoder_id = models.encoder_id LEFT OUTER JOIN teachers ON teachers.teacher_id = models.teacher_id LEFT OUTER JOIN (SELECT deployments.head AS head, deployments.model_id AS model_id, deployments.deployed_at AS deployed_at 
FROM deployments JOIN (SELECT deployments.head AS head, max(deployments.deployment_id) AS deployment_id 
FROM deployments GROUP BY deployments.head) AS newest ON deployments.deployment_id = newest.deployment_id) AS current_deployments ON current_deployments.model_id = models.model_id"""  # noqa: W291, E501

MODEL_SUMMARY_AFTER = """SELECT models.head, models.version, models.model_id, models.kind, embedding_sets.name AS set_name, encoders.name AS encoder_name, models.accuracy, models.macro_f1, models.rows_train, models.rows_test, models.seconds, models.created_at, CASE WHEN (current_deployments.model_id IS NOT NULL) THEN 1 ELSE 0 END AS is_deployed, models.parameters, teachers.name AS teacher, models.teacher_accuracy, models.baseline_accuracy, models.baseline_macro_f1, models.baseline_seconds, models.baseline_skipped, CASE WHEN (models.accuracy < models.baseline_accuracy) THEN 1 ELSE 0 END AS below_baseline 
FROM models JOIN embedding_sets ON embedding_sets.set_id = models.set_id JOIN encoders ON encoders.encoder_id = models.encoder_id LEFT OUTER JOIN teachers ON teachers.teacher_id = models.teacher_id LEFT OUTER JOIN (SELECT deployments.head AS head, deployments.model_id AS model_id, deployments.deployed_at AS deployed_at 
FROM deployments JOIN (SELECT deployments.head AS head, max(deployments.deployment_id) AS deployment_id 
FROM deployments GROUP BY deployments.head) AS newest ON deployments.deployment_id = newest.deployment_id) AS current_deployments ON current_deployments.model_id = models.model_id"""  # noqa: W291, E501


# Issue 19: the jobs view as this revision creates it on SQLite, frozen (see 0001's VIEWS_SQL);
# on SQL Server heads.jobs (sql/0006/views/jobs.sql) shows each caller their own jobs.
JOBS_VIEW = """SELECT job_queue.job_id, job_queue.kind, job_queue.state, job_queue.head, job_queue.set_name, job_queue.group_id, job_queue.part, job_queue.parts, job_queue.key_from, job_queue.key_to, job_queue.attempts, job_queue.max_attempts, job_queue.claimed_by, job_queue.heartbeat_at, job_queue.cancel_requested, job_queue.stage, job_queue.progress_done, job_queue.progress_total, job_queue.error_number, job_queue.error, job_queue.result_json, job_queue.parameters_json, job_queue.requested_at, job_queue.started_at, job_queue.finished_at, job_queue.requested_by, job_queue.requested_user 
FROM job_queue"""  # noqa: W291, E501
# The view as revision 0005 left it, restored on downgrade.
JOBS_VIEW_0005 = JOBS_VIEW.replace(", job_queue.requested_by, job_queue.requested_user", "")


def _ref(column: str) -> str:
    return f"{SCHEMA}.{column}" if SCHEMA else column


def _replace_model_summary(sql: str) -> None:
    op.execute("DROP VIEW IF EXISTS model_summary")
    op.execute(f"CREATE VIEW model_summary AS {sql}")


# Issue 20: latest_predictions as 0001 created it, and as this revision makes it (frozen).
LATEST_PREDICTIONS_BEFORE = """SELECT models.head, models.version, predictions.model_id, embedding_sets.name AS set_name, predictions.item_key, predictions.label, predictions.score, predictions.probabilities_json, predictions.predicted_at 
FROM predictions JOIN (SELECT deployments.head AS head, deployments.model_id AS model_id, deployments.deployed_at AS deployed_at 
FROM deployments JOIN (SELECT deployments.head AS head, max(deployments.deployment_id) AS deployment_id 
FROM deployments GROUP BY deployments.head) AS newest ON deployments.deployment_id = newest.deployment_id) AS current_deployments ON current_deployments.model_id = predictions.model_id JOIN models ON models.model_id = predictions.model_id JOIN embedding_sets ON embedding_sets.set_id = predictions.set_id"""  # noqa: W291, E501

LATEST_PREDICTIONS_AFTER = """SELECT models.head, models.version, predictions.model_id, embedding_sets.name AS set_name, predictions.item_key, predictions.label, predictions.score, predictions.probabilities_json, predictions.predicted_at 
FROM predictions JOIN (SELECT deployments.model_id AS model_id, deployments.head AS head, max(deployments.deployment_id) AS deployment_id 
FROM deployments GROUP BY deployments.model_id, deployments.head) AS shown ON shown.model_id = predictions.model_id JOIN (SELECT deployments.head AS head, max(deployments.deployment_id) AS deployment_id 
FROM deployments GROUP BY deployments.head) AS newest ON newest.head = shown.head JOIN models ON models.model_id = predictions.model_id JOIN embedding_sets ON embedding_sets.set_id = predictions.set_id 
WHERE shown.deployment_id = newest.deployment_id OR NOT (EXISTS (SELECT newer_predictions.model_id 
FROM predictions AS newer_predictions 
WHERE newer_predictions.model_id IN (SELECT later.model_id 
FROM deployments AS later 
WHERE later.head = shown.head AND later.deployment_id > shown.deployment_id) AND newer_predictions.set_id = predictions.set_id AND newer_predictions.item_key = predictions.item_key))"""  # noqa: W291, E501


def _replace_latest_predictions(sql: str) -> None:
    op.execute("DROP VIEW IF EXISTS latest_predictions")
    op.execute(f"CREATE VIEW latest_predictions AS {sql}")


def upgrade() -> None:
    # -- issue 21: the baseline beside every version -------------------------------------------
    for name, type_ in BASELINE_COLUMNS:
        op.add_column("models", sa.Column(name, type_, nullable=True), schema=SCHEMA)
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
    # -- the T-SQL objects of sql/0006 (all issues), or SQLite's views --------------------------
    if IS_MSSQL:
        sqlheads_sql.run(sqlheads_sql.upgrade_batches(revision, SETTINGS))
    else:
        _replace_model_summary(MODEL_SUMMARY_AFTER)
        op.execute(f"CREATE VIEW jobs AS {JOBS_VIEW}")
        _replace_latest_predictions(LATEST_PREDICTIONS_AFTER)  # issue 20


def downgrade() -> None:
    if IS_MSSQL:
        sqlheads_sql.run(sqlheads_sql.downgrade_batches(revision, SETTINGS))
    else:
        op.execute("DROP VIEW IF EXISTS jobs")
        op.execute("DROP VIEW IF EXISTS model_summary")
        _replace_latest_predictions(LATEST_PREDICTIONS_BEFORE)  # issue 20
    # -- issue 19 ----------------------------------------------------------------------------
    op.drop_index(op.f("ix_job_inputs_job_id_item_key"), table_name="job_inputs", schema=SCHEMA)
    op.drop_table("job_inputs", schema=SCHEMA)
    if IS_MSSQL:
        op.drop_column("job_queue", "requested_user", schema=SCHEMA)
        op.drop_column("job_queue", "requested_by", schema=SCHEMA)
    else:  # natively (SQLite 3.35+), as 0005 drops teachers.model_id
        op.execute("ALTER TABLE job_queue DROP COLUMN requested_user")
        op.execute("ALTER TABLE job_queue DROP COLUMN requested_by")
        op.execute(f"CREATE VIEW jobs AS {JOBS_VIEW_0005}")
    # -- issue 21 ----------------------------------------------------------------------------
    for name, _ in reversed(BASELINE_COLUMNS):
        if IS_MSSQL:
            op.drop_column("models", name, schema=SCHEMA)
        else:  # natively (SQLite 3.35+), as 0005 does
            op.execute(f"ALTER TABLE models DROP COLUMN {name}")
    if not IS_MSSQL:
        _replace_model_summary(MODEL_SUMMARY_BEFORE)
