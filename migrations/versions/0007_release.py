"""release 0007

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25 00:00:00.000000

Several changes add to this revision, each in a function of its own called from ``upgrade()``
and ``downgrade()``.

Declared types of the views' flags: SQLite gives a view column a declared type only when it is
a table's column, so ``model_summary``'s ``is_deployed`` and ``below_baseline`` (0/1 from a
CASE) had none, and a BI tool that reads declared types saw NULL. They are now read from
``bit_values``, a two-row table (0 and 1) made for that, and are INTEGER. SQL Server infers its
view's types itself (``sql/0006/views/model_summary.sql`` is unchanged); the table exists there
too, because the one metadata (and the Python read of ``model_summary``) has it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from sqlheads.store.schema import BITS
from sqlheads.store.schema import SCHEMA as MSSQL_SCHEMA

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

IS_MSSQL = op.get_context().dialect.name == "mssql"
SCHEMA = MSSQL_SCHEMA if IS_MSSQL else None

# -- the views' flags get a declared type (SQLite) ------------------------------------------------

# model_summary as revision 0006 left it on SQLite, and as this revision makes it (frozen).
MODEL_SUMMARY_0006 = """SELECT models.head, models.version, models.model_id, models.kind, embedding_sets.name AS set_name, encoders.name AS encoder_name, models.accuracy, models.macro_f1, models.rows_train, models.rows_test, models.seconds, models.created_at, CASE WHEN (current_deployments.model_id IS NOT NULL) THEN 1 ELSE 0 END AS is_deployed, models.parameters, teachers.name AS teacher, models.teacher_accuracy, models.baseline_accuracy, models.baseline_macro_f1, models.baseline_seconds, models.baseline_skipped, CASE WHEN (models.accuracy < models.baseline_accuracy) THEN 1 ELSE 0 END AS below_baseline 
FROM models JOIN embedding_sets ON embedding_sets.set_id = models.set_id JOIN encoders ON encoders.encoder_id = models.encoder_id LEFT OUTER JOIN teachers ON teachers.teacher_id = models.teacher_id LEFT OUTER JOIN (SELECT deployments.head AS head, deployments.model_id AS model_id, deployments.deployed_at AS deployed_at 
FROM deployments JOIN (SELECT deployments.head AS head, max(deployments.deployment_id) AS deployment_id 
FROM deployments GROUP BY deployments.head) AS newest ON deployments.deployment_id = newest.deployment_id) AS current_deployments ON current_deployments.model_id = models.model_id"""  # noqa: W291, E501

MODEL_SUMMARY_TYPED = """SELECT models.head, models.version, models.model_id, models.kind, embedding_sets.name AS set_name, encoders.name AS encoder_name, models.accuracy, models.macro_f1, models.rows_train, models.rows_test, models.seconds, models.created_at, deployed_bit.bit AS is_deployed, models.parameters, teachers.name AS teacher, models.teacher_accuracy, models.baseline_accuracy, models.baseline_macro_f1, models.baseline_seconds, models.baseline_skipped, below_bit.bit AS below_baseline 
FROM models JOIN embedding_sets ON embedding_sets.set_id = models.set_id JOIN encoders ON encoders.encoder_id = models.encoder_id LEFT OUTER JOIN teachers ON teachers.teacher_id = models.teacher_id LEFT OUTER JOIN (SELECT deployments.head AS head, deployments.model_id AS model_id, deployments.deployed_at AS deployed_at 
FROM deployments JOIN (SELECT deployments.head AS head, max(deployments.deployment_id) AS deployment_id 
FROM deployments GROUP BY deployments.head) AS newest ON deployments.deployment_id = newest.deployment_id) AS current_deployments ON current_deployments.model_id = models.model_id JOIN bit_values AS deployed_bit ON deployed_bit.bit = CASE WHEN (current_deployments.model_id IS NOT NULL) THEN 1 ELSE 0 END JOIN bit_values AS below_bit ON below_bit.bit = CASE WHEN (models.accuracy < models.baseline_accuracy) THEN 1 ELSE 0 END"""  # noqa: W291, E501


def _replace_model_summary(sql: str) -> None:
    op.execute("DROP VIEW IF EXISTS model_summary")
    op.execute(f"CREATE VIEW model_summary AS {sql}")


def _view_types_upgrade() -> None:
    op.create_table(
        "bit_values",
        sa.Column("bit", sa.Integer(), autoincrement=False, nullable=False),
        sa.CheckConstraint("bit IN (0, 1)", name=op.f("ck_bit_values_zero_or_one")),
        sa.PrimaryKeyConstraint("bit", name=op.f("pk_bit_values")),
        schema=SCHEMA,
    )
    # A plain INSERT: bulk_insert's SQL Server script would turn IDENTITY_INSERT on for a table
    # that has no identity column.
    table = f"{SCHEMA}.bit_values" if SCHEMA else "bit_values"
    values = ", ".join(f"({bit})" for bit in BITS)
    op.execute(f"INSERT INTO {table} (bit) VALUES {values}")
    if not IS_MSSQL:
        _replace_model_summary(MODEL_SUMMARY_TYPED)


def _view_types_downgrade() -> None:
    if not IS_MSSQL:
        _replace_model_summary(MODEL_SUMMARY_0006)
    op.drop_table("bit_values", schema=SCHEMA)


def upgrade() -> None:
    _view_types_upgrade()


def downgrade() -> None:
    _view_types_downgrade()
