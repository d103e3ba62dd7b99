"""Alembic environment: SQLite (the embedded default), SQL Server through mssql-python or pyodbc.

The URL comes, in order, from a connection handed over by ``sqlheads init``, ``-x url=...``,
``SQLHEADS_URL``, then ``sqlalchemy.url`` in alembic.ini. Offline mode (``--sql``) writes a
reviewable script for the dialect of that URL.
"""

from __future__ import annotations

import os

from alembic import context

from sqlheads.store.schema import metadata
from sqlheads.store.server_checks import COMPATIBILITY_GUARD, check_compatibility

config = context.config

MSSQL_SCHEMA = "heads"
# SQL Server: the heads schema must exist before Alembic creates its version table in it.
CREATE_SCHEMA = f"IF SCHEMA_ID(N'{MSSQL_SCHEMA}') IS NULL EXEC(N'CREATE SCHEMA {MSSQL_SCHEMA}')"


def _url() -> str:
    return (
        context.get_x_argument(as_dictionary=True).get("url")
        or os.environ.get("SQLHEADS_URL")
        or config.get_main_option("sqlalchemy.url")
        or "sqlite:///sqlheads.db"
    )


def run_offline() -> None:
    url = _url()
    is_mssql = url.startswith("mssql")
    options = {"deprecate_large_types": True} if is_mssql else {}
    context.configure(
        url=url,
        target_metadata=metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named", **options},
        # SQLite cannot ALTER most things; batch mode rebuilds tables instead.
        render_as_batch=url.startswith("sqlite"),
        version_table_schema=MSSQL_SCHEMA if is_mssql else None,
    )
    with context.begin_transaction():
        if is_mssql:  # a database below level 160 stops the reviewed script here, with the fix
            context.execute(COMPATIBILITY_GUARD)
            context.execute(CREATE_SCHEMA)
        context.run_migrations()


def run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is None:
        from sqlheads.store.repository import make_engine

        # One transaction, committed at the end (SQL Server's DDL is transactional).
        with make_engine(_url()).begin() as fresh:
            _run_with(fresh)
    else:
        _run_with(connection)


def _run_with(connection) -> None:
    is_mssql = connection.dialect.name == "mssql"
    if is_mssql:
        check_compatibility(connection)  # 50075 with the fix, before anything is created
        connection.exec_driver_sql(CREATE_SCHEMA)
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        version_table_schema=MSSQL_SCHEMA if is_mssql else None,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
