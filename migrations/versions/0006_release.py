"""release: keys that stay keys

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24 12:00:00.000000

T-SQL objects of this release, from ``sql/0006/``; several issues add to it, each under a
comment naming it. No table changes on SQLite.
"""

from __future__ import annotations

from alembic import op

import sqlheads_sql
from sqlheads.procedures import SETTINGS

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

IS_MSSQL = op.get_context().dialect.name == "mssql"


def upgrade() -> None:
    # Issue 16, part 2: heads.embed rejects rows with a NULL or empty item_key (one rejects
    # row, under the empty key) instead of refusing the call; heads.predict refuses a keys
    # query returning one (50003), as the Python host does.
    if IS_MSSQL:
        sqlheads_sql.run(sqlheads_sql.upgrade_batches(revision, SETTINGS))


def downgrade() -> None:
    if IS_MSSQL:
        sqlheads_sql.run(sqlheads_sql.downgrade_batches(revision, SETTINGS))
