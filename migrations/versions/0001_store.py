"""store: encoders, sets, embeddings, rejects, models, deployments, predictions

Revision ID: 0001
Revises:
Create Date: 2026-11-22 12:07:23.647987
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from sqlheads.store.schema import SCHEMA as MSSQL_SCHEMA

# SQL Server keeps every object in its own schema; SQLite has none.
IS_MSSQL = op.get_context().dialect.name == "mssql"
SCHEMA = MSSQL_SCHEMA if IS_MSSQL else None


def _ref(column: str) -> str:
    return f"{SCHEMA}.{column}" if SCHEMA else column


revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    if IS_MSSQL:
        op.execute(f"IF SCHEMA_ID(N'{SCHEMA}') IS NULL EXEC(N'CREATE SCHEMA {SCHEMA}')")
    op.create_table(
        "encoders",
        sa.Column("encoder_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.Unicode(length=128), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("onnx", sa.LargeBinary(), nullable=False),
        sa.Column("tokenizer_json", sa.UnicodeText(), nullable=False),
        sa.Column("dim", sa.Integer(), nullable=False),
        sa.Column("max_length", sa.Integer(), nullable=False),
        sa.Column("quantization", sa.String(length=16), nullable=False),
        sa.Column("source", sa.Unicode(length=400), nullable=False),
        sa.Column("parity_cosine", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(), server_default=sa.func.now(), nullable=False),
        sa.CheckConstraint("dim > 0", name=op.f("ck_encoders_dim_positive")),
        sa.PrimaryKeyConstraint("encoder_id", name=op.f("pk_encoders")),
        sa.UniqueConstraint("name", name=op.f("uq_encoders_name")),
        sa.UniqueConstraint("sha256", name=op.f("uq_encoders_sha256")),
        schema=SCHEMA,
    )
    op.create_table(
        "embedding_sets",
        sa.Column("set_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.Unicode(length=128), nullable=False),
        sa.Column("encoder_id", sa.Integer(), nullable=False),
        sa.Column("long_text", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(), server_default=sa.func.now(), nullable=False),
        sa.CheckConstraint(
            "long_text IN ('window', 'truncate')", name=op.f("ck_embedding_sets_long_text_mode")
        ),
        sa.ForeignKeyConstraint(
            ["encoder_id"],
            [_ref("encoders.encoder_id")],
            name=op.f("fk_embedding_sets_encoder_id_encoders"),
        ),
        sa.PrimaryKeyConstraint("set_id", name=op.f("pk_embedding_sets")),
        sa.UniqueConstraint("name", name=op.f("uq_embedding_sets_name")),
        schema=SCHEMA,
    )
    op.create_table(
        "embeddings",
        sa.Column("set_id", sa.Integer(), nullable=False),
        sa.Column("item_key", sa.Unicode(length=450), nullable=False),
        sa.Column("text_sha256", sa.String(length=64), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.Column("windows", sa.Integer(), nullable=False),
        sa.Column("embedded_at", sa.DateTime(), server_default=sa.func.now(), nullable=False),
        sa.ForeignKeyConstraint(
            ["set_id"],
            [_ref("embedding_sets.set_id")],
            name=op.f("fk_embeddings_set_id_embedding_sets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("set_id", "item_key", name=op.f("pk_embeddings")),
        schema=SCHEMA,
    )
    op.create_table(
        "models",
        sa.Column("model_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("head", sa.Unicode(length=128), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("set_id", sa.Integer(), nullable=False),
        sa.Column("encoder_id", sa.Integer(), nullable=False),
        sa.Column("classes_json", sa.UnicodeText(), nullable=False),
        sa.Column("params_json", sa.UnicodeText(), nullable=False),
        sa.Column("metrics_json", sa.UnicodeText(), nullable=False),
        sa.Column("loss_curve_json", sa.UnicodeText(), nullable=False),
        sa.Column("accuracy", sa.Float(), nullable=False),
        sa.Column("macro_f1", sa.Float(), nullable=False),
        sa.Column("rows_train", sa.Integer(), nullable=False),
        sa.Column("rows_test", sa.Integer(), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("blob", sa.LargeBinary(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("onnx", sa.LargeBinary(), nullable=True),
        sa.Column("created_at", sa.DateTime(), server_default=sa.func.now(), nullable=False),
        sa.ForeignKeyConstraint(
            ["encoder_id"],
            [_ref("encoders.encoder_id")],
            name=op.f("fk_models_encoder_id_encoders"),
        ),
        sa.ForeignKeyConstraint(
            ["set_id"],
            [_ref("embedding_sets.set_id")],
            name=op.f("fk_models_set_id_embedding_sets"),
        ),
        sa.PrimaryKeyConstraint("model_id", name=op.f("pk_models")),
        sa.UniqueConstraint("head", "version", name=op.f("uq_models_head_version")),
        schema=SCHEMA,
    )
    op.create_table(
        "rejects",
        sa.Column("set_id", sa.Integer(), nullable=False),
        sa.Column("item_key", sa.Unicode(length=450), nullable=False),
        sa.Column("reason", sa.Unicode(length=400), nullable=False),
        sa.Column("rejected_at", sa.DateTime(), server_default=sa.func.now(), nullable=False),
        sa.ForeignKeyConstraint(
            ["set_id"],
            [_ref("embedding_sets.set_id")],
            name=op.f("fk_rejects_set_id_embedding_sets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("set_id", "item_key", name=op.f("pk_rejects")),
        schema=SCHEMA,
    )
    op.create_table(
        "deployments",
        sa.Column("deployment_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("head", sa.Unicode(length=128), nullable=False),
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Unicode(length=200), nullable=False),
        sa.Column("deployed_at", sa.DateTime(), server_default=sa.func.now(), nullable=False),
        sa.ForeignKeyConstraint(
            ["model_id"], [_ref("models.model_id")], name=op.f("fk_deployments_model_id_models")
        ),
        sa.PrimaryKeyConstraint("deployment_id", name=op.f("pk_deployments")),
        schema=SCHEMA,
    )
    op.create_table(
        "predictions",
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("set_id", sa.Integer(), nullable=False),
        sa.Column("item_key", sa.Unicode(length=450), nullable=False),
        sa.Column("label", sa.Unicode(length=400), nullable=False),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("probabilities_json", sa.UnicodeText(), nullable=False),
        sa.Column("predicted_at", sa.DateTime(), server_default=sa.func.now(), nullable=False),
        sa.ForeignKeyConstraint(
            ["model_id"],
            [_ref("models.model_id")],
            name=op.f("fk_predictions_model_id_models"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["set_id"],
            [_ref("embedding_sets.set_id")],
            name=op.f("fk_predictions_set_id_embedding_sets"),
        ),
        sa.PrimaryKeyConstraint("model_id", "set_id", "item_key", name=op.f("pk_predictions")),
        schema=SCHEMA,
    )
    op.create_table(
        "model_figures",
        sa.Column("point_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("figure", sa.Unicode(length=64), nullable=False),
        sa.Column("series", sa.Unicode(length=400), nullable=False),
        sa.Column("x", sa.Unicode(length=400), nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["model_id"],
            [_ref("models.model_id")],
            name=op.f("fk_model_figures_model_id_models"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("point_id", name=op.f("pk_model_figures")),
        schema=SCHEMA,
    )
    op.create_index(
        op.f("ix_model_figures_model_id_figure"),
        "model_figures",
        ["model_id", "figure"],
        unique=False,
        schema=SCHEMA,
    )
    _create_views()


def downgrade() -> None:
    _drop_views()
    op.drop_index(op.f("ix_model_figures_model_id_figure"), table_name="model_figures", schema=SCHEMA)
    op.drop_table("model_figures", schema=SCHEMA)
    op.drop_table("predictions", schema=SCHEMA)
    op.drop_table("deployments", schema=SCHEMA)
    op.drop_table("rejects", schema=SCHEMA)
    op.drop_table("models", schema=SCHEMA)
    op.drop_table("embeddings", schema=SCHEMA)
    op.drop_table("embedding_sets", schema=SCHEMA)
    op.drop_table("encoders", schema=SCHEMA)


# The views as this revision created them, frozen: a later revision that changes a view drops
# and recreates it with its own text, so upgrading from any revision gives the same database.
VIEWS_SQL = {
    "latest_predictions": """SELECT models.head, models.version, predictions.model_id, embedding_sets.name AS set_name, predictions.item_key, predictions.label, predictions.score, predictions.probabilities_json, predictions.predicted_at 
FROM predictions JOIN (SELECT deployments.head AS head, deployments.model_id AS model_id, deployments.deployed_at AS deployed_at 
FROM deployments JOIN (SELECT deployments.head AS head, max(deployments.deployment_id) AS deployment_id 
FROM deployments GROUP BY deployments.head) AS newest ON deployments.deployment_id = newest.deployment_id) AS current_deployments ON current_deployments.model_id = predictions.model_id JOIN models ON models.model_id = predictions.model_id JOIN embedding_sets ON embedding_sets.set_id = predictions.set_id""",
    "model_summary": """SELECT models.head, models.version, models.model_id, models.kind, embedding_sets.name AS set_name, encoders.name AS encoder_name, models.accuracy, models.macro_f1, models.rows_train, models.rows_test, models.seconds, models.created_at, CASE WHEN (current_deployments.model_id IS NOT NULL) THEN 1 ELSE 0 END AS is_deployed 
FROM models JOIN embedding_sets ON embedding_sets.set_id = models.set_id JOIN encoders ON encoders.encoder_id = models.encoder_id LEFT OUTER JOIN (SELECT deployments.head AS head, deployments.model_id AS model_id, deployments.deployed_at AS deployed_at 
FROM deployments JOIN (SELECT deployments.head AS head, max(deployments.deployment_id) AS deployment_id 
FROM deployments GROUP BY deployments.head) AS newest ON deployments.deployment_id = newest.deployment_id) AS current_deployments ON current_deployments.model_id = models.model_id""",
    "report_figures": """SELECT models.head, models.version, model_figures.model_id, model_figures.figure, model_figures.series, model_figures.x, model_figures.value 
FROM model_figures JOIN models ON models.model_id = model_figures.model_id""",
}


def _create_views() -> None:
    """SQLite's views; on SQL Server the views (with procedures and roles) come from sql/
    instead (see the SQL Server migrations)."""
    if IS_MSSQL:
        return
    for name, sql in VIEWS_SQL.items():
        op.execute(f"CREATE VIEW {name} AS {sql}")


def _drop_views() -> None:
    if IS_MSSQL:
        return
    for name in VIEWS_SQL:
        op.execute(f"DROP VIEW IF EXISTS {name}")
