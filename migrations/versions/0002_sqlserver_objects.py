"""sql server objects: the views, procedures and roles of sql/0002/ (a no-op on SQLite)

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 14:00:00.000000

On SQL Server this runs every file of ``sql/0002/`` (shipped in the package ``sqlheads_sql``)
batch by batch, in creation order: views, helper procedures, the procedures analysts call,
roles. That folder is frozen: what 0002 means never changes; later revisions carry their own
texts (see ``sqlheads_sql``). SQLite has no procedures or roles; its views come from 0001.
"""

from __future__ import annotations

from alembic import op

import sqlheads_sql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

IS_MSSQL = op.get_context().dialect.name == "mssql"


def upgrade() -> None:
    if IS_MSSQL:
        sqlheads_sql.run(sqlheads_sql.object_upgrade_batches(revision))


def downgrade() -> None:
    if IS_MSSQL:
        sqlheads_sql.run(sqlheads_sql.object_downgrade_batches(revision))
