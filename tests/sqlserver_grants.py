"""The roles' rights as the role files of ``sql/`` grant them, and SQLite run under them.

Every audit of the SQL Server layer found code that read or wrote a table its role was never
granted: the tests ran every role's code on SQLite as the owner. Here the grants are the
contract, read from the T-SQL itself (no table list is copied by hand):

- :func:`role_rights` replays the role files of every revision in order, as the migrations run
  them: before a role's file, every permission it holds on the ``heads`` schema is revoked
  (``sqlheads_sql.REVOKE_ROLE``), then its GRANTs are applied; ``ALTER ROLE ... ADD MEMBER``
  makes one role a member of another. A file's text can be replaced (a GRANT line deleted, to
  show that a test fails without it).
- :func:`acting_as` runs the code under test on SQLite under a role: an authorizer on every
  SQLite connection opened meanwhile (reached through SQLAlchemy's engine events) sees each
  table and column a statement reads or writes while it compiles, and allows it only as SQL
  Server would allow the role. Inside the equivalent of a ``heads.*`` procedure
  (:mod:`sqlheads.store.boundary`) a statement runs with the procedure's rights, as ownership
  chaining has it on the server: the role needs EXECUTE on the procedure and nothing on what
  it touches; a caller's query text runs with the caller's rights, inside a procedure too. A
  read through a view needs SELECT on the view. Reading a table's columns (SQLAlchemy's
  ``has_table``: ``PRAGMA table_info``) needs some permission on it, as INFORMATION_SCHEMA lists
  a user only the tables it may use. SQLite's own reads for foreign keys (of tables the
  statement does not name) need nothing, as SQL Server checks no permission for them. An insert
  into a table with an identity column needs SELECT on it: SQLAlchemy reads the new key back
  with ``OUTPUT inserted.<key>`` on SQL Server. A refused access fails the statement (as Msg 229
  would) and is recorded with its table, column and role.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import sqlheads_sql
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlserver_tsql import statements, tokens

from sqlheads.store import boundary
from sqlheads.store import schema as s
from sqlheads.store.caller_queries import AUTHORIZER
from sqlheads.store.queue_drift import VIEWS as QUEUE_VIEWS

SCHEMA = "heads"
SQLITE_VIEWS = set(s.VIEWS) | set(QUEUE_VIEWS)
# Tables with an identity column: SQL Server reads an inserted row's key back (OUTPUT).
IDENTITY = {
    t.name: c.name
    for t in s.metadata.sorted_tables
    for c in t.primary_key.columns
    if c.autoincrement is True
}
# What a connection sets for itself (sqlheads' own engine set-up, caller-query sandboxes,
# migrations' checks): SET options on SQL Server, which need no permission.
CONNECTION_PRAGMAS = {
    "foreign_keys",
    "journal_mode",
    "query_only",
    "busy_timeout",
    "read_uncommitted",  # SQLAlchemy reads the isolation level of a new connection
}
# Pragmas that read a table's definition: allowed where the table is visible to the role.
DEFINITION_PRAGMAS = {"table_info", "table_xinfo", "index_list", "index_info", "foreign_key_list"}
CATALOG = {"sqlite_master", "sqlite_schema", "sqlite_temp_master", "sqlite_sequence"}


# -- the grants -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Grant:
    permission: str  # SELECT, INSERT, UPDATE, DELETE, EXECUTE
    target: str  # heads.job_queue, or SCHEMA::heads
    column: str | None = None  # a column grant's column


@dataclass
class Rights:
    """Each role's grants and the roles it is a member of, after the whole chain of role files."""

    grants: dict[str, set[Grant]] = field(default_factory=dict)
    member_of: dict[str, set[str]] = field(default_factory=dict)

    def of(self, role: str) -> set[Grant]:
        """The role's grants and those of every role it is a member of."""
        found, todo, seen = set(), [role], set()
        while todo:
            current = todo.pop()
            if current in seen:
                continue
            seen.add(current)
            found |= self.grants.get(current, set())
            todo += sorted(self.member_of.get(current, set()))
        return found

    def allows(self, role: str, permission: str, target: str, column: str | None = None) -> bool:
        """Whether ``role`` may ``permission`` ``target`` (``heads.x``), column ``column``."""
        held = self.of(role)
        if Grant(permission, target) in held or Grant(permission, f"SCHEMA::{SCHEMA}") in held:
            return True
        return column is not None and Grant(permission, target, column) in held

    def sees(self, role: str, target: str) -> bool:
        """Whether ``target`` is visible to ``role``: it holds some permission on it."""
        held = self.of(role)
        return any(g.target in (target, f"SCHEMA::{SCHEMA}") for g in held)


def role_files() -> list[Path]:
    """Every role file of every revision, in the order the migrations run them."""
    return [p for r in sqlheads_sql.revisions() for p in sqlheads_sql.revision_files(r)
            if p.parent.name == "roles"]  # fmt: skip


def newest_role_file(role: str) -> Path:
    return next(p for p in reversed(role_files()) if p.stem == role)


def role_rights(texts: dict[Path, str] | None = None) -> Rights:
    """The rights the role files leave after the whole chain; ``texts`` replaces files."""
    rights = Rights()
    for path in role_files():
        role = path.stem
        rights.grants[role] = set()  # sqlheads_sql.REVOKE_ROLE runs before the file
        text = (texts or {}).get(path, path.read_text(encoding="utf-8"))
        for batch in re.split(r"^[ \t]*GO[ \t]*;?[ \t]*$", text, flags=re.M | re.I):
            for statement in _walk(statements(tokens(batch))):
                if statement.kind == "GRANT":
                    grantee, found = parse_grant(statement.text)
                    rights.grants.setdefault(grantee, set()).update(found)
                member = re.fullmatch(r"ALTER ROLE (\w+) ADD MEMBER (\w+)", statement.text)
                if member:
                    rights.member_of.setdefault(member.group(2), set()).add(member.group(1))
    return rights


def _walk(body):
    for statement in body:
        yield statement
        yield from _walk(statement.body + statement.orelse + statement.catch)


def parse_grant(text: str) -> tuple[str, set[Grant]]:
    """``GRANT perms ON target TO grantee`` (as the statement reader joins its tokens)."""
    match = re.fullmatch(r"GRANT (.+?)(?: ON (\S+(?: :: \S+)?))? TO (\w+)", text)
    assert match, text
    listed, target, grantee = match.groups()
    target = (target or "").replace(" :: ", "::")
    if target.startswith("OBJECT::"):
        target = target.removeprefix("OBJECT::")
    found = set()
    for permission in re.findall(r"[A-Z][A-Z ]*?(?: \([^)]*\))?(?= ,|$)", listed):
        name, _, columns = permission.partition(" (")
        if columns:
            found |= {
                Grant(name.strip(), target, c.strip()) for c in columns.rstrip(")").split(",")
            }
        else:
            found.add(Grant(name.strip(), target))
    return grantee, found


def grant_lines(path: Path) -> list[tuple[int, str]]:
    """``(line number, text)`` of each GRANT line of a role file."""
    return [
        (number, line)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if line.startswith("GRANT ")
    ]


def without_line(path: Path, number: int) -> dict[Path, str]:
    """``path``'s text with line ``number`` deleted, for :func:`role_rights`."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    return {path: "".join(lines[: number - 1] + lines[number:])}


# -- SQLite under a role ----------------------------------------------------------------------


@dataclass(frozen=True)
class Access:
    """What a statement asked for: ``permission`` on ``target``'s ``column`` (VISIBLE: some
    permission, to read the table's definition)."""

    permission: str
    target: str
    column: str | None = None

    def __str__(self) -> str:
        column = f" column {self.column}" if self.column else ""
        return f"{self.permission} on {self.target}{column}"


@dataclass
class Recorder:
    """What ran under ``role``: every access checked against its grants, and those refused."""

    role: str
    rights: Rights
    outside: frozenset[str] = frozenset()  # tables outside heads the DBA granted the role
    used: set[Access] = field(default_factory=set)
    denied: list[Access] = field(default_factory=list)
    procedures: set[str] = field(default_factory=set)
    local: threading.local = field(default_factory=threading.local)

    def report(self) -> str:
        """The refusals, each naming table, column and role."""
        return "; ".join(f"{self.role} may not {a}" for a in self.denied) or "nothing refused"

    def check(self, access: Access) -> bool:
        self.used.add(access)
        if access.permission == "VISIBLE":
            allowed = self.rights.sees(self.role, access.target)
        else:
            allowed = self.rights.allows(self.role, access.permission, access.target, access.column)
        if not allowed:
            self.denied.append(access)
        return allowed

    def authorize(self, action, arg1, arg2, database, source) -> int:
        allowed = self._decide(action, arg1, arg2, database, source)
        return sqlite3.SQLITE_OK if allowed else sqlite3.SQLITE_DENY

    def _decide(self, action, arg1, arg2, database, source) -> bool:
        if database == "temp" or action in _ALWAYS:
            return True
        if action == sqlite3.SQLITE_PRAGMA:
            if arg1 in CONNECTION_PRAGMAS or arg1 == "foreign_key_check":
                return True
            if arg1 in DEFINITION_PRAGMAS:
                return self._heads(arg2, lambda target: Access("VISIBLE", target))
            self.denied.append(Access(f"PRAGMA {arg1}", "the database"))
            return False
        if arg1 in CATALOG:
            if action != sqlite3.SQLITE_READ:
                self.denied.append(Access(f"write ({action})", arg1))
            return action == sqlite3.SQLITE_READ
        procedure = boundary.current()
        if procedure is not None:
            self.procedures.add(procedure)
            return self.check(Access("EXECUTE", procedure))
        if action == sqlite3.SQLITE_READ:
            if source in SQLITE_VIEWS:  # read through a view: the view's permission
                return self.check(Access("SELECT", f"{SCHEMA}.{source}"))
            if not self._named(arg1):  # SQLite's own foreign-key check
                return True
            return self._heads(arg1, lambda target: Access("SELECT", target, arg2 or None))
        if action == sqlite3.SQLITE_INSERT:
            key = IDENTITY.get(arg1)
            return self._heads(arg1, lambda target: Access("INSERT", target)) and (
                key is None or self.check(Access("SELECT", f"{SCHEMA}.{arg1}", key))
            )
        if action == sqlite3.SQLITE_UPDATE:
            return self._heads(arg1, lambda target: Access("UPDATE", target, arg2))
        if action == sqlite3.SQLITE_DELETE:
            return self._heads(arg1, lambda target: Access("DELETE", target))
        self.denied.append(Access(f"statement {action} ({arg1}, {arg2})", "the database"))
        return False  # DDL and the rest: no role holds ALTER or CREATE

    def _heads(self, table: str | None, access) -> bool:
        """Check an access to ``table``; a table outside the heads schema is the DBA's to
        grant (``outside``), never sqlheads'."""
        if table is None:
            return True
        if table not in IDENTITY and table not in TABLES and table not in SQLITE_VIEWS:
            if table in self.outside:
                return True
            self.denied.append(Access("use", table))
            return False
        return self.check(access(f"{SCHEMA}.{table}"))

    def _named(self, table: str) -> bool:
        statement = getattr(self.local, "statement", None)
        return statement is None or re.search(rf"\b{re.escape(table)}\b", statement) is not None


TABLES = {t.name for t in s.metadata.sorted_tables} | {"alembic_version"}
_ALWAYS = {
    sqlite3.SQLITE_SELECT,
    sqlite3.SQLITE_FUNCTION,
    sqlite3.SQLITE_TRANSACTION,
    sqlite3.SQLITE_SAVEPOINT,
    sqlite3.SQLITE_RECURSIVE,
}


@contextmanager
def acting_as(
    role: str, rights: Rights | None = None, outside: frozenset[str] = frozenset()
) -> Iterator[Recorder]:
    """Every SQLite connection opened inside runs under ``role``'s grants (``rights``:
    :func:`role_rights` of the files as they are); the :class:`Recorder` says what it used and
    what it was refused. Connections opened before keep running as the owner."""
    recorder = Recorder(role, rights or role_rights(), outside)

    def no_statement_cache(dialect, record, cargs, cparams) -> None:
        if dialect.name == "sqlite":  # the authorizer sees a statement only as it compiles
            cparams["cached_statements"] = 0

    def install(dbapi_connection, record) -> None:
        if isinstance(dbapi_connection, sqlite3.Connection):
            dbapi_connection.set_authorizer(recorder.authorize)
            record.info[AUTHORIZER] = recorder.authorize

    def note(conn, cursor, statement, parameters, context, executemany) -> None:
        recorder.local.statement = statement

    listeners = [("do_connect", no_statement_cache), ("connect", install)]
    listeners.append(("before_cursor_execute", note))
    for name, listener in listeners:
        event.listen(Engine, name, listener)
    try:
        yield recorder
    finally:
        for name, listener in listeners:
            event.remove(Engine, name, listener)


def replayed(recorder: Recorder, rights: Rights) -> list[Access]:
    """The accesses of a run that ``rights`` would refuse ``recorder.role``: the run again
    under other grants, up to each access it made."""
    again = Recorder(recorder.role, rights, recorder.outside)
    return sorted((a for a in recorder.used if not again.check(a)), key=str)
