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
from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.operations import Operations
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection

import sqlheads_migrations
from sqlheads.errors import DatabaseError, NotInitialisedError
from sqlheads.store.repository import Store


def _config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(Path(sqlheads_migrations.__file__).parent))
    return config


@dataclass(frozen=True)
class SchemaState:
    """Where a database's schema is against the revisions this package ships."""

    current: str | None  # None: no sqlheads tables yet
    head: str
    known: frozenset[str]


def schema_state(store: Store) -> SchemaState:
    with store.engine.connect() as connection:
        context = MigrationContext.configure(connection)
        # Each revision reads the dialect from the migration context when it is imported, so
        # the scripts are listed inside one, against this database.
        with Operations.context(context):
            scripts = ScriptDirectory.from_config(_config())
            head = scripts.get_current_head()
            known = frozenset(script.revision for script in scripts.walk_revisions())
        return SchemaState(context.get_current_revision(), head, known)


def refusal(state: SchemaState, url: str, *, can_upgrade: bool) -> NotInitialisedError | None:
    """Why a command cannot run on a database at ``state`` (None: it can, perhaps after an
    upgrade that ``can_upgrade`` allows)."""
    if state.current == state.head:
        return None
    if state.current is not None and state.current not in state.known:
        return NotInitialisedError(
            f"the database at {url} is at sqlheads schema revision {state.current}, which "
            f"this sqlheads (revisions up to {state.head}) does not know: a newer sqlheads "
            "made it; upgrade sqlheads (pip install -U sqlheads) to use it"
        )
    if can_upgrade:
        return None
    if state.current is None:
        return NotInitialisedError(
            f"the database at {url} has no sqlheads tables: run `sqlheads init` (or the "
            "migrations) first"
        )
    return NotInitialisedError(
        f"the database at {url} is at sqlheads schema revision {state.current} and this "
        f"sqlheads needs {state.head}: run `sqlheads init` (or the migrations) to upgrade it; "
        "its rows are kept"
    )


def ensure_current(store: Store, *, upgrade_sqlite: bool = True) -> str:
    """Refuse (50014) a database this package cannot use as it is; bring an embedded SQLite
    file to this package's revision, as its first use creates it. Returns the revision."""
    state = schema_state(store)
    url = store.engine.url.render_as_string(hide_password=True)
    refused = refusal(state, url, can_upgrade=store.is_sqlite and upgrade_sqlite)
    if refused is not None:
        raise refused
    return state.head if state.current == state.head else migrate(store)


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
