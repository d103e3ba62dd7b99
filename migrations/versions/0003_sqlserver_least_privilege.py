"""sql server: signed procedures, Python-decided settings, normalised locks (issue 10)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23 00:30:00.000000

- ``heads.settings`` (SQL Server only): the defaults, bounds and choices of the procedures'
  parameters, copied from ``sqlheads.settings.SETTINGS`` on every upgrade and downgrade, so
  that T-SQL carries out Python's policy instead of restating it;
- an index on ``predictions(set_id)`` for ``drop_set`` (every dialect);
- the objects of ``sql/0003/`` (new versions of the verbs, the lock, guard, settings and
  staging helpers; ``heads.cache_dir`` dropped), then ``heads.sign_external_scripts`` signs every
  procedure that calls ``sp_execute_external_script`` with a fresh certificate whose user alone
  holds EXECUTE ANY EXTERNAL SCRIPT (its private key is removed once the modules are signed).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import sqlheads_sql
from sqlheads.settings import SETTINGS
from sqlheads.store.schema import SCHEMA as MSSQL_SCHEMA

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

IS_MSSQL = op.get_context().dialect.name == "mssql"
SCHEMA = MSSQL_SCHEMA if IS_MSSQL else None


def upgrade() -> None:
    op.create_index(
        op.f("ix_predictions_set_id"), "predictions", ["set_id"], unique=False, schema=SCHEMA
    )
    if not IS_MSSQL:
        return
    op.create_table(
        "settings",
        sa.Column("name", sa.Unicode(length=64), nullable=False),
        sa.Column("default_value", sa.Unicode(length=400), nullable=True),
        sa.Column("choices", sa.Unicode(length=400), nullable=True),
        sa.Column("minimum", sa.BigInteger(), nullable=True),
        sa.Column("maximum", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_settings")),
        schema=SCHEMA,
    )
    sqlheads_sql.run(sqlheads_sql.upgrade_batches(revision, SETTINGS))


def downgrade() -> None:
    if IS_MSSQL:
        sqlheads_sql.run(sqlheads_sql.downgrade_batches(revision, SETTINGS))
        op.drop_table("settings", schema=SCHEMA)
    op.drop_index(op.f("ix_predictions_set_id"), table_name="predictions", schema=SCHEMA)
