"""sql server objects: the views, procedures and roles of sql/ (a no-op on SQLite)

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 14:00:00.000000

On SQL Server this runs every file of sql/ (shipped as the ``sqlheads_sql`` package) batch by
batch, in creation order: views, helper procedures, the procedures analysts call, roles. The
files use CREATE OR ALTER and idempotent role checks, so a re-run after editing them replaces
the objects in place. SQLite has no procedures or roles; its views come from 0001.
"""

from __future__ import annotations

from alembic import op

import sqlheads_sql

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

IS_MSSQL = op.get_context().dialect.name == "mssql"

# Dropping a role needs its members removed first; member names come from the catalog and are
# QUOTENAME'd. ROLE_NAME is one of sql/roles/, never a caller's value.
DROP_ROLE = """
DECLARE @drop_members nvarchar(max) = N'';
SELECT @drop_members = @drop_members + N'ALTER ROLE ' + QUOTENAME(r.name)
    + N' DROP MEMBER ' + QUOTENAME(m.name) + N'; '
FROM sys.database_role_members AS rm
INNER JOIN sys.database_principals AS r ON rm.role_principal_id = r.principal_id
INNER JOIN sys.database_principals AS m ON rm.member_principal_id = m.principal_id
WHERE r.name = N'ROLE_NAME';
EXEC sys.sp_executesql @drop_members;
IF DATABASE_PRINCIPAL_ID(N'ROLE_NAME') IS NOT NULL DROP ROLE ROLE_NAME
"""


def _run(batch: str) -> None:
    if op.get_context().as_sql:
        op.execute(batch)  # written to the script, followed by GO
    else:
        op.get_bind().exec_driver_sql(batch)  # as written: no bind-parameter parsing


def upgrade() -> None:
    if not IS_MSSQL:
        return
    for path in sqlheads_sql.object_files():
        for batch in sqlheads_sql.batches(path):
            _run(batch)


def downgrade() -> None:
    if not IS_MSSQL:
        return
    for path in reversed(sqlheads_sql.object_files()):
        kind, name = sqlheads_sql.object_name(path)
        if kind == "role":
            _run(DROP_ROLE.replace("ROLE_NAME", name))
        else:
            _run(f"DROP {kind.upper()} IF EXISTS {name}")
