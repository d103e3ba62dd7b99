"""release 0007

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25 12:00:00.000000

Several issues add to this revision, each in functions of its own called from ``upgrade()`` and
``downgrade()``. The T-SQL objects it creates or changes are in ``sql/0007/``.

Transfer sets (students that carry their teacher): ``transfer_sets`` and ``transfer_rows`` hold
the rows a teacher version labelled for distillation (sentences of long rows, augmented copies
of training rows) with its logits, keyed by teacher version and recipe, so that a second
student of the same teacher reuses them; dropping the teacher's head drops them.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import sqlheads_sql
from sqlheads.settings import SETTINGS
from sqlheads.store.schema import KEY_LENGTH
from sqlheads.store.schema import SCHEMA as MSSQL_SCHEMA

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

IS_MSSQL = op.get_context().dialect.name == "mssql"
SCHEMA = MSSQL_SCHEMA if IS_MSSQL else None


def _ref(column: str) -> str:
    return f"{SCHEMA}.{column}" if SCHEMA else column


def _transfer_upgrade() -> None:
    op.create_table(
        "transfer_sets",
        sa.Column("transfer_set_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("model_id", sa.Integer(), nullable=False),
        sa.Column("recipe_key", sa.String(length=64), nullable=False),
        sa.Column("recipe_json", sa.UnicodeText(), nullable=False),
        sa.Column("classes_json", sa.UnicodeText(), nullable=False),
        sa.Column("rows_max", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(), server_default=sa.func.now(), nullable=False),
        sa.ForeignKeyConstraint(
            ["model_id"],
            [_ref("models.model_id")],
            name=op.f("fk_transfer_sets_model_id_models"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("transfer_set_id", name=op.f("pk_transfer_sets")),
        sa.UniqueConstraint(
            "model_id", "recipe_key", name=op.f("uq_transfer_sets_model_id_recipe_key")
        ),
        schema=SCHEMA,
    )
    op.create_table(
        "transfer_rows",
        sa.Column("transfer_set_id", sa.Integer(), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("origin_key", sa.Unicode(length=KEY_LENGTH), nullable=False),
        sa.Column("how", sa.String(length=16), nullable=False),
        sa.Column("text", sa.UnicodeText(), nullable=False),
        sa.Column("logits", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(
            ["transfer_set_id"],
            [_ref("transfer_sets.transfer_set_id")],
            name=op.f("fk_transfer_rows_transfer_set_id_transfer_sets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("transfer_set_id", "ordinal", name=op.f("pk_transfer_rows")),
        schema=SCHEMA,
    )


def _transfer_downgrade() -> None:
    op.drop_table("transfer_rows", schema=SCHEMA)
    op.drop_table("transfer_sets", schema=SCHEMA)


def upgrade() -> None:
    _transfer_upgrade()
    # the T-SQL objects of sql/0007 (all issues), after every table they use
    if IS_MSSQL:
        sqlheads_sql.run(sqlheads_sql.upgrade_batches(revision, SETTINGS))


def downgrade() -> None:
    if IS_MSSQL:
        sqlheads_sql.run(sqlheads_sql.downgrade_batches(revision, SETTINGS))
    _transfer_downgrade()
