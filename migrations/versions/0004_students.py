"""students: teachers and their soft labels, model kinds, parameters, a set's source query

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23 00:10:00.000000

Adds what ``distill`` needs: ``teachers`` (a named source of soft labels for one set) and
``soft_labels`` (one float32 logit per class and key); on ``models`` the parameter count, the
teacher and its accuracy on the same held-out rows; on ``embedding_sets`` the last source
query, through which text models read the rows' text. Heads were stored with kind
``mlp_head``; the registry of model kinds calls them ``head``. The view ``model_summary``
gains the new columns (SQLite here; SQL Server from ``sql/0004/``, which also holds
``heads.distill``, the text path of ``heads.predict`` and the procedures they use).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from alembic import op

import sqlheads_sql
from sqlheads.settings import SETTINGS
from sqlheads.store.schema import SCHEMA as MSSQL_SCHEMA

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

IS_MSSQL = op.get_context().dialect.name == "mssql"
SCHEMA = MSSQL_SCHEMA if IS_MSSQL else None


def _ref(column: str) -> str:
    return f"{SCHEMA}.{column}" if SCHEMA else column


MODEL_SUMMARY_BEFORE = """SELECT models.head, models.version, models.model_id, models.kind, embedding_sets.name AS set_name, encoders.name AS encoder_name, models.accuracy, models.macro_f1, models.rows_train, models.rows_test, models.seconds, models.created_at, CASE WHEN (current_deployments.model_id IS NOT NULL) THEN 1 ELSE 0 END AS is_deployed 
FROM models JOIN embedding_sets ON embedding_sets.set_id = models.set_id JOIN encoders ON encoders.encoder_id = models.encoder_id LEFT OUTER JOIN (SELECT deployments.head AS head, deployments.model_id AS model_id, deployments.deployed_at AS deployed_at 
FROM deployments JOIN (SELECT deployments.head AS head, max(deployments.deployment_id) AS deployment_id 
FROM deployments GROUP BY deployments.head) AS newest ON deployments.deployment_id = newest.deployment_id) AS current_deployments ON current_deployments.model_id = models.model_id"""

MODEL_SUMMARY_AFTER = """SELECT models.head, models.version, models.model_id, models.kind, embedding_sets.name AS set_name, encoders.name AS encoder_name, models.accuracy, models.macro_f1, models.rows_train, models.rows_test, models.seconds, models.created_at, CASE WHEN (current_deployments.model_id IS NOT NULL) THEN 1 ELSE 0 END AS is_deployed, models.parameters, teachers.name AS teacher, models.teacher_accuracy 
FROM models JOIN embedding_sets ON embedding_sets.set_id = models.set_id JOIN encoders ON encoders.encoder_id = models.encoder_id LEFT OUTER JOIN teachers ON teachers.teacher_id = models.teacher_id LEFT OUTER JOIN (SELECT deployments.head AS head, deployments.model_id AS model_id, deployments.deployed_at AS deployed_at 
FROM deployments JOIN (SELECT deployments.head AS head, max(deployments.deployment_id) AS deployment_id 
FROM deployments GROUP BY deployments.head) AS newest ON deployments.deployment_id = newest.deployment_id) AS current_deployments ON current_deployments.model_id = models.model_id"""


def _replace_model_summary(sql: str) -> None:
    if IS_MSSQL:
        return
    op.execute("DROP VIEW IF EXISTS model_summary")
    op.execute(f"CREATE VIEW model_summary AS {sql}")


@contextmanager
def _rebuilding_views() -> Iterator[None]:
    """SQLite rebuilds a table to alter it (copy, drop, rename): with legacy_alter_table the
    rename leaves the views that name the table alone instead of refusing, and they read the
    rebuilt table afterwards (https://www.sqlite.org/lang_altertable.html)."""
    if IS_MSSQL:
        yield
        return
    op.execute("PRAGMA legacy_alter_table = ON")
    try:
        yield
    finally:
        op.execute("PRAGMA legacy_alter_table = OFF")


def upgrade() -> None:
    op.create_table(
        "teachers",
        sa.Column("teacher_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.Unicode(length=128), nullable=False),
        sa.Column("set_id", sa.Integer(), nullable=False),
        sa.Column("classes_json", sa.UnicodeText(), nullable=False),
        sa.Column("created_at", sa.DateTime(), server_default=sa.func.now(), nullable=False),
        sa.ForeignKeyConstraint(
            ["set_id"],
            [_ref("embedding_sets.set_id")],
            name=op.f("fk_teachers_set_id_embedding_sets"),
        ),
        sa.PrimaryKeyConstraint("teacher_id", name=op.f("pk_teachers")),
        sa.UniqueConstraint("name", name=op.f("uq_teachers_name")),
        schema=SCHEMA,
    )
    op.create_table(
        "soft_labels",
        sa.Column("teacher_id", sa.Integer(), nullable=False),
        sa.Column("item_key", sa.Unicode(length=450), nullable=False),
        sa.Column("logits", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["teacher_id"],
            [_ref("teachers.teacher_id")],
            name=op.f("fk_soft_labels_teacher_id_teachers"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("teacher_id", "item_key", name=op.f("pk_soft_labels")),
        schema=SCHEMA,
    )
    with _rebuilding_views(), op.batch_alter_table("models", schema=SCHEMA) as batch:
        batch.add_column(sa.Column("parameters", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("teacher_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("teacher_accuracy", sa.Float(), nullable=True))
        batch.create_foreign_key(
            op.f("fk_models_teacher_id_teachers"),
            "teachers",
            ["teacher_id"],
            ["teacher_id"],
            referent_schema=SCHEMA,
        )
    with op.batch_alter_table("embedding_sets", schema=SCHEMA) as batch:
        batch.add_column(sa.Column("source_query", sa.UnicodeText(), nullable=True))
    models = sa.table("models", sa.column("kind", sa.String(32)), schema=SCHEMA)
    op.execute(models.update().where(models.c.kind == "mlp_head").values(kind="head"))
    _replace_model_summary(MODEL_SUMMARY_AFTER)
    if IS_MSSQL:  # sql/0004: heads.distill, the text path of heads.predict, and what they use
        sqlheads_sql.run(sqlheads_sql.upgrade_batches(revision, SETTINGS))


def downgrade() -> None:
    if IS_MSSQL:
        sqlheads_sql.run(sqlheads_sql.downgrade_batches(revision, SETTINGS))
    models = sa.table("models", sa.column("kind", sa.String(32)), schema=SCHEMA)
    op.execute(models.update().where(models.c.kind == "head").values(kind="mlp_head"))
    with _rebuilding_views(), op.batch_alter_table("embedding_sets", schema=SCHEMA) as batch:
        batch.drop_column("source_query")
    with _rebuilding_views(), op.batch_alter_table("models", schema=SCHEMA) as batch:
        batch.drop_constraint(op.f("fk_models_teacher_id_teachers"), type_="foreignkey")
        batch.drop_column("teacher_accuracy")
        batch.drop_column("teacher_id")
        batch.drop_column("parameters")
    op.drop_table("soft_labels", schema=SCHEMA)
    op.drop_table("teachers", schema=SCHEMA)
    _replace_model_summary(MODEL_SUMMARY_BEFORE)
