"""Which ``heads.*`` procedure the SQLite statements running now stand for.

On SQL Server a statement inside a procedure runs with the procedure's rights (ownership
chaining: the procedure and the tables belong to the same owner), so a role needs EXECUTE on
the procedure and nothing on the tables it reads or writes; a caller's query text is dynamic
SQL and runs with the caller's own rights wherever it runs. On SQLite the same work is Python
code: it says which procedure it is the equivalent of with :func:`procedure`, and a caller's
query says that it runs as the caller with :func:`caller_query`. Nothing on SQLite enforces
rights; an observer that models the server's (the tests' role authorizer, built from the role
files of ``sql/``) reads :func:`current` while a statement compiles.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_PROCEDURE: ContextVar[str | None] = ContextVar("sqlheads_procedure", default=None)


def current() -> str | None:
    """The outermost procedure the running statement is part of; None: the caller's own."""
    return _PROCEDURE.get()


@contextmanager
def procedure(name: str) -> Iterator[None]:
    """Run the enclosed statements as ``name`` (``heads.claim_job``) runs them on SQL Server.
    Nested, the outermost one counts: a procedure that calls another is checked once, at its
    own door, as ownership chaining does."""
    token = _PROCEDURE.set(_PROCEDURE.get() or name)
    try:
        yield
    finally:
        _PROCEDURE.reset(token)


@contextmanager
def caller_query() -> Iterator[None]:
    """Run the enclosed statements as the caller, even inside a procedure: a caller's query
    text runs with the caller's rights (``heads.stage_query`` is unsigned dynamic SQL)."""
    token = _PROCEDURE.set(None)
    try:
        yield
    finally:
        _PROCEDURE.reset(token)
