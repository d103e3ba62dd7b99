"""release 0007

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25 12:00:00.000000

Several concerns add to this revision; each one's ops are in a function of its own, called from
:func:`upgrade` and :func:`downgrade`. The T-SQL objects it creates or changes are in
``sql/0007/``, applied once, after every concern's table changes (and reverted before them).

- audit (the third SQL Server audit, :func:`_audit_upgrade`): ``embedding_sets.source_user``,
  the database user (SQL Server) or OS user (SQLite) who stored the set's source query, which
  then runs for that user alone; on SQL Server, stored queries checked by ``heads.set_source``,
  the sidecar's writes scoped to the job it holds (``heads.assert_job_held``,
  ``heads.add_version``, ``heads.store_soft_labels``, ``heads.job_set``) and its table grants
  narrowed, the sets view ``heads.sets`` without query texts for analysts, and the smaller fixes
  of ``sql/0007/``.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import sqlheads_sql
from sqlheads.settings import SETTINGS
from sqlheads.store.schema import NAME_LENGTH
from sqlheads.store.schema import SCHEMA as MSSQL_SCHEMA

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

IS_MSSQL = op.get_context().dialect.name == "mssql"
SCHEMA = MSSQL_SCHEMA if IS_MSSQL else None


def upgrade() -> None:
    _audit_upgrade()
    if IS_MSSQL:
        sqlheads_sql.run(sqlheads_sql.upgrade_batches(revision, SETTINGS))


def downgrade() -> None:
    if IS_MSSQL:
        sqlheads_sql.run(sqlheads_sql.downgrade_batches(revision, SETTINGS))
    _audit_downgrade()


# -- audit: who stored a set's source query ------------------------------------------------------


def _audit_upgrade() -> None:
    # NULL for queries stored before this revision: no author is known, so they run for no one
    # until the set is embedded again (or the caller passes a source of their own).
    op.add_column(
        "embedding_sets",
        sa.Column("source_user", sa.Unicode(NAME_LENGTH), nullable=True),
        schema=SCHEMA,
    )


def _audit_downgrade() -> None:
    if IS_MSSQL:
        op.drop_column("embedding_sets", "source_user", schema=SCHEMA)
    else:  # natively (SQLite 3.35+), as 0006 drops its columns
        op.execute("ALTER TABLE embedding_sets DROP COLUMN source_user")
