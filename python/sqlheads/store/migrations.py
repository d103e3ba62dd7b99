"""Moving a store between schema revisions with Alembic, on SQLite as on SQL Server.

SQLite cannot alter most of a table, so Alembic's batch mode copies it to a new one, drops the
old and renames the copy. With foreign keys enforced (the store turns them on for every
connection), dropping ``models`` while ``predictions`` point at it fails, so a populated file
could not be upgraded. SQLite's own recipe for schema changes is followed instead: foreign keys
off for the migration, ``PRAGMA foreign_key_check`` before the commit, back on afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection

import sqlheads_migrations
from sqlheads.errors import DatabaseError
from sqlheads.store.repository import Store


def _config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(Path(sqlheads_migrations.__file__).parent))
    return config


def current_revision(store: Store) -> str | None:
    """The revision a store's database is at; None before the first migration."""
    with store.engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def migrate(store: Store, target: str = "head", *, downgrade: bool = False) -> str | None:
    """Upgrade (or downgrade) the store's schema to ``target`` in one transaction; returns
    the revision it is at afterwards."""
    config = _config()
    verb = command.downgrade if downgrade else command.upgrade
    with (
        store.engine.connect() as connection,
        _foreign_keys_off(connection),
        connection.begin(),
    ):
        config.attributes["connection"] = connection
        verb(config, target)
        _check_foreign_keys(connection)
        return MigrationContext.configure(connection).get_current_revision()


@contextmanager
def _foreign_keys_off(connection: Connection) -> Iterator[None]:
    """SQLite only; the pragma is ignored inside a transaction, so it is set between them."""
    sqlite = connection.dialect.name == "sqlite"
    if sqlite:
        connection.exec_driver_sql("PRAGMA foreign_keys = OFF")
        connection.commit()
    try:
        yield
    finally:
        if sqlite:
            connection.rollback()  # a failed migration leaves its transaction to end here
            connection.exec_driver_sql("PRAGMA foreign_keys = ON")
            connection.commit()


def _check_foreign_keys(connection: Connection) -> None:
    if connection.dialect.name != "sqlite":
        return  # SQL Server checks its constraints as each statement runs
    broken = connection.exec_driver_sql("PRAGMA foreign_key_check").all()
    if broken:
        table, rowid, parent, _ = broken[0]
        raise DatabaseError(
            f"the migration would leave {len(broken)} row(s) pointing at rows that do not "
            f"exist (first: {table} rowid {rowid} -> {parent}); nothing was changed: restore "
            "those rows, or delete them, and run `sqlheads init` again"
        )
