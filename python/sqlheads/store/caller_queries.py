"""The caller-query sandbox: a caller's source, labels or keys query, run as one SELECT.

A caller's SELECT runs with the caller's own permissions, exactly as ``heads.stage_query`` runs
it on SQL Server. On SQLite, ``PRAGMA query_only`` and an authorizer refuse everything but
reading (ATTACH, VACUUM INTO, PRAGMA, writes, file access). On SQL Server the text is never run
as a batch of its own: it is wrapped as a derived table, ``SELECT caller_query.* FROM (...) AS
caller_query``, as heads.stage_query wraps it, so anything but one SELECT fails to compile and
nothing of it runs; its parentheses must balance (read as T-SQL reads them: strings, quoted
names and comments skipped), so that no ``)`` can end the derived table early, and it is
described first (``sys.dm_exec_describe_first_result_set``), so that an ORDER BY without TOP
(Msg 1033) or an unnamed column (8155) is refused with its fix, as heads.assert_query_columns
refuses them. Whose rights it runs with is the security boundary: a set's stored query runs
only for its author (:func:`sqlheads.verbs.rows.stored_source`).
:class:`CallerQueries` gives :class:`~sqlheads.store.repository.Store` these verbs.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

import pandas as pd
from sqlalchemy import Engine, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import DBAPIError

from sqlheads.errors import QueryNotAllowedError, QueryShapeError
from sqlheads.store import boundary
from sqlheads.store.keys import item_key_text

# The key, in a SQLite connection's pool record (``ConnectionPoolEntry.info``), of an authorizer
# its owner installed on it (a test's model of SQL Server's rights): a caller's query runs under
# it as well as under the read-only sandbox, which puts it back afterwards.
AUTHORIZER = "sqlheads.authorizer"


class CallerQueries:
    """Runs callers' queries read-only on ``engine``."""

    engine: Engine

    @property
    def is_sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"

    def run_query(
        self,
        sql: str,
        needed: tuple[str, ...],
        what: str,
        chunk_rows: int = 1000,
        *,
        all_columns: bool = False,
    ) -> Iterator[pd.DataFrame]:
        """Run a caller's SELECT read-only and yield its rows in DataFrames of ``chunk_rows``:
        the ``needed`` columns, or every column (``all_columns``) once ``needed`` are there."""
        if not isinstance(sql, str) or not sql.strip():
            raise QueryShapeError(f"the {what} query is empty: pass a SELECT statement")
        with self._caller_connection(what) as connection:
            statement = sql.strip().rstrip(";")
            if not self.is_sqlite:
                statement = _described(connection, statement, what)
            chunks = self._read_chunks(connection, statement, needed, what, chunk_rows)
            yield from (c if all_columns else c[list(needed)] for c in chunks)

    @contextmanager
    def _caller_connection(self, what: str) -> Iterator[Connection]:
        """A connection on which a caller's query may read tables and do nothing else.

        On SQLite, ``PRAGMA query_only`` refuses writes only once a statement runs, after
        ATTACH or VACUUM INTO has already created its file; SQLite's authorizer refuses them
        while the statement compiles, so nothing touches the file system. A refusal becomes
        :class:`QueryNotAllowedError` naming what was refused.
        """
        # A caller's text runs with the caller's rights, even inside a procedure's work.
        with self.engine.connect() as connection, boundary.caller_query():
            if not self.is_sqlite:
                yield connection
                return
            connection.exec_driver_sql("PRAGMA query_only = ON")
            driver = connection.connection.driver_connection
            outer = connection.connection.info.get(AUTHORIZER)
            refused: list[str] = []
            driver.set_authorizer(_read_only_authorizer(refused, outer))
            try:
                yield connection
            except (DBAPIError, QueryShapeError):
                if refused:  # the query failed because the authorizer refused something
                    raise QueryNotAllowedError(
                        f"the {what} query may only read tables, but it asks for "
                        f"{refused[-1]}: sqlheads refuses ATTACH, VACUUM, PRAGMA, writes and "
                        "file access in caller queries; pass a plain SELECT"
                    ) from None
                raise
            finally:
                # The pooled connection must be writable again for the next user, under the
                # authorizer its owner installed, if any.
                driver.set_authorizer(outer)
                connection.exec_driver_sql("PRAGMA query_only = OFF")

    @staticmethod
    def _read_chunks(
        connection: Connection, sql: str, needed: tuple[str, ...], what: str, chunk_rows: int
    ) -> Iterator[pd.DataFrame]:
        try:
            result = connection.exec_driver_sql(sql)
        except DBAPIError as error:
            if error.connection_invalidated:  # a lost connection, not the query's fault
                raise
            raise QueryShapeError(
                f"the {what} query failed: {str(error.orig).rstrip('.')}. Check it runs on its "
                "own first"
            ) from None
        try:
            if not result.returns_rows:
                raise QueryShapeError(f"the {what} query returned no result set: pass a SELECT")
            columns = list(result.keys())
            missing = [c for c in needed if c not in columns]
            if missing:
                raise QueryShapeError(
                    f"the {what} query must return columns {', '.join(needed)}; it is missing "
                    f"{', '.join(missing)} (it returned: {', '.join(columns)}): alias them, "
                    "e.g. SELECT id AS item_key, ..."
                )
            while rows := result.fetchmany(chunk_rows):
                yield _query_frame(rows, columns)
        finally:
            result.close()

    def count_query(self, sql: str) -> int | None:
        """Rows a caller's query returns, for a progress bar; None if it cannot be counted."""
        try:
            with self._caller_connection("source") as connection:
                return int(
                    connection.exec_driver_sql(
                        f"SELECT COUNT(*) FROM {derived_table(sql, 'source', 'counted')}"
                    ).scalar_one()
                )
        except (DBAPIError, QueryShapeError):
            return None

    def duplicate_keys(self, sql: str) -> set[str]:
        """The ``item_key`` values a caller's query returns more than once."""
        with self._caller_connection("source") as connection:
            try:
                rows = connection.exec_driver_sql(
                    "SELECT source_query.item_key FROM "
                    f"{derived_table(sql, 'source', 'source_query')} "
                    "GROUP BY source_query.item_key HAVING COUNT(*) > 1"
                ).all()
            except DBAPIError as error:
                raise QueryShapeError(
                    f"the source query cannot be read as a subquery ({error.orig}): drop its "
                    "ORDER BY, or wrap it in a view"
                ) from None
            return {item_key_text(key) for (key,) in rows if key is not None}


# What a caller's query may do on SQLite: read and compute. Everything else (ATTACH, which
# VACUUM INTO also asks for; PRAGMA; any write or schema change) is refused.
_ALLOWED_ACTIONS = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_READ,
    sqlite3.SQLITE_FUNCTION,
    sqlite3.SQLITE_RECURSIVE,
}
# Functions that reach outside the database (extensions, the shell's file functions).
_REFUSED_FUNCTIONS = {"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"}
_ACTION_NAMES = {
    sqlite3.SQLITE_ATTACH: "ATTACH (or VACUUM INTO) {0!r}",
    sqlite3.SQLITE_DETACH: "DETACH {0}",
    sqlite3.SQLITE_PRAGMA: "PRAGMA {0}",
    sqlite3.SQLITE_INSERT: "INSERT into {0}",
    sqlite3.SQLITE_UPDATE: "UPDATE of {0}",
    sqlite3.SQLITE_DELETE: "DELETE from {0}",
    sqlite3.SQLITE_TRANSACTION: "a transaction ({0})",
}


def _read_only_authorizer(refused: list[str], outer=None):
    """An authorizer for ``sqlite3.Connection.set_authorizer`` that records what it refuses;
    what it allows is then asked of ``outer``, the connection's own authorizer, if any."""

    def authorize(action: int, arg1: str | None, arg2: str | None, *rest: object) -> int:
        if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _REFUSED_FUNCTIONS:
            refused.append(f"function {arg2}()")
            return sqlite3.SQLITE_DENY
        if action in _ALLOWED_ACTIONS:
            return sqlite3.SQLITE_OK if outer is None else outer(action, arg1, arg2, *rest)
        if action == sqlite3.SQLITE_UPDATE and arg1 in ("sqlite_master", "sqlite_schema"):
            refused.append("a PRAGMA function")  # how SQLite asks for pragma_table_info & co
            return sqlite3.SQLITE_DENY
        refused.append(_ACTION_NAMES.get(action, "a write or schema change ({0})").format(arg1))
        return sqlite3.SQLITE_DENY

    return authorize


def _query_frame(rows: list, columns: list[str]) -> pd.DataFrame:
    """A caller's rows, the ``item_key`` column made key text from the DB-API values (as a
    pandas column, an INTEGER key column with a NULL would be floats: 1 would become '1.0')."""
    frame = pd.DataFrame([tuple(r) for r in rows], columns=columns)
    if "item_key" in columns:
        at = columns.index("item_key")
        frame["item_key"] = pd.Series([item_key_text(r[at]) for r in rows], dtype=object)
    return frame


# What to do about a query that compiles alone but not as a derived table (SQL Server's
# numbers; heads.assert_query_columns gives the same advice).
DERIVED_TABLE_FIXES = {
    1033: "drop its ORDER BY (the order of the rows does not matter here)",
    8155: "name every column, e.g. SELECT LEN(body) AS body_length",
    8156: "give every column its own name",
}
# Any other, when the text compiles alone: only its place inside FROM (...) is wrong (a WITH
# before it, an OPTION or INTO clause).
DERIVED_TABLE_OTHERWISE = (
    "it must stand inside FROM (...) as one SELECT: write a WITH (common table expression) as "
    "a subquery, and leave out OPTION (...) and INTO"
)
_DESCRIBE = text(
    "SELECT TOP (1) d.error_number, d.error_message "
    "FROM sys.dm_exec_describe_first_result_set(:query, NULL, 0) AS d "
    "WHERE d.error_number IS NOT NULL"
)


def derived_table(sql: str, what: str, alias: str = "caller_query") -> str:
    """``(sql) AS alias``: a caller's text as one derived table. Its parentheses must balance
    as T-SQL reads them, so that the text cannot close the derived table and go on as a
    statement of its own (50003); the newline keeps a trailing ``--`` comment from hiding the
    closing parenthesis."""
    sql = sql.strip().rstrip(";")
    problem = _unbalanced(sql)
    if problem:
        raise QueryShapeError(
            f"the {what} query must be one SELECT, but {problem}: pass a single SELECT "
            "statement, e.g. SELECT id AS item_key, body AS text FROM dbo.reviews"
        )
    return f"({sql}\n) AS {alias}"


def _unbalanced(sql: str) -> str | None:
    """Why ``sql``'s parentheses do not balance, read as T-SQL reads them (strings, quoted
    names and comments, nested block comments too, are skipped); None when they do. A line
    comment ends at either line-break character: reading one as shorter than SQL Server does
    can only refuse more."""
    depth, at = 0, 0
    closers = {"'": "'", '"': '"', "[": "]"}
    while at < len(sql):
        char = sql[at]
        if sql.startswith("--", at):
            ends = [e for e in (sql.find("\n", at), sql.find("\r", at)) if e >= 0]
            at = min(ends) if ends else len(sql)
        elif sql.startswith("/*", at):
            nested, at = 1, at + 2
            while nested and at < len(sql):
                if sql.startswith("/*", at):
                    nested, at = nested + 1, at + 2
                elif sql.startswith("*/", at):
                    nested, at = nested - 1, at + 2
                else:
                    at += 1
            if nested:
                return "a comment is not closed"
        elif char in closers:
            close, at = closers[char], at + 1
            while True:
                end = sql.find(close, at)
                if end < 0:
                    return f"a {char}...{close} is not closed"
                if sql.startswith(close * 2, end):  # a doubled delimiter stands for itself
                    at = end + 2
                    continue
                at = end + 1
                break
        else:
            depth += {"(": 1, ")": -1}.get(char, 0)
            if depth < 0:
                return "a ')' closes more than it opened"
            at += 1
    return "a '(' is not closed" if depth else None


def _described(connection: Connection, sql: str, what: str) -> str:
    """``SELECT caller_query.* FROM (sql) AS caller_query``, once SQL Server has described it
    without an error: a compile error comes back as 50003 with the fix, and nothing has run.
    The fix of an error the table's numbers do not name depends on whether the text compiles
    alone: then only its place inside FROM (...) is wrong (finding 9 of the fourth audit)."""
    statement = f"SELECT caller_query.* FROM {derived_table(sql, what)}"
    row = connection.execute(_DESCRIBE, {"query": statement}).first()
    if row is None:
        return statement
    fix = DERIVED_TABLE_FIXES.get(int(row.error_number))
    if fix is None:
        alone = connection.execute(_DESCRIBE, {"query": sql}).first()
        fix = "check it runs on its own first" if alone is not None else DERIVED_TABLE_OTHERWISE
    raise QueryShapeError(
        f"the {what} query cannot be read as one SELECT: {row.error_message} ({fix})"
    )
