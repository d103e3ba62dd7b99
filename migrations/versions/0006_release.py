"""release 0006: every version beside its TF-IDF baseline (issue 21)

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24 12:00:00.000000

Issue 21: on ``models``, the TF-IDF + logistic regression baseline fitted on the version's own
training rows and scored on its held-out rows (``baseline_accuracy``, ``baseline_macro_f1``,
``baseline_seconds``) or why it was not (``baseline_skipped``); ``model_summary`` shows them
with ``below_baseline`` (SQLite here; SQL Server from ``sql/0006/views/model_summary.sql``).
"""

from __future__ import annotations

import sqlalchemy as sa
import sqlheads_sql
from alembic import op

from sqlheads.procedures import SETTINGS
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


def _replace_model_summary(sql: str) -> None:
    op.execute("DROP VIEW IF EXISTS model_summary")
    op.execute(f"CREATE VIEW model_summary AS {sql}")


def upgrade() -> None:
    # issue 21: the baseline beside every version
    for name, type_ in BASELINE_COLUMNS:
        op.add_column("models", sa.Column(name, type_, nullable=True), schema=SCHEMA)
    if IS_MSSQL:  # sql/0006: heads.model_summary with the baseline's columns
        sqlheads_sql.run(sqlheads_sql.upgrade_batches(revision, SETTINGS))
    else:
        _replace_model_summary(MODEL_SUMMARY_AFTER)


def downgrade() -> None:
    # issue 21
    if IS_MSSQL:
        sqlheads_sql.run(sqlheads_sql.downgrade_batches(revision, SETTINGS))
        for name, _ in reversed(BASELINE_COLUMNS):
            op.drop_column("models", name, schema=SCHEMA)
        return
    op.execute("DROP VIEW IF EXISTS model_summary")
    for name, _ in reversed(BASELINE_COLUMNS):  # natively (SQLite 3.35+), as 0005 does
        op.execute(f"ALTER TABLE models DROP COLUMN {name}")
    _replace_model_summary(MODEL_SUMMARY_BEFORE)
