"""SQL Server application locks for Python writers, so that they serialise with T-SQL's.

The T-SQL verbs lock sets and heads with ``sp_getapplock`` on ``heads.lock_resource``'s names
(``heads.set:reviews``; names lower-cased, since sp_getapplock compares resources in binary).
Python writers on SQL Server (the sidecar, the command line on a server URL) take the very same
names, so a sidecar's version numbering waits for ``heads.write_version`` instead of racing it
(error 2627), and an embed part waits for, or is refused by, ``heads.drop_set`` (error 547).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, text

from sqlheads.errors import BusyError

MODES = ("Shared", "Exclusive")
# sp_getapplock: >= 0 granted; -1 timed out, -2 cancelled, -3 deadlock victim, -999 error.
_TAKE = text(
    "DECLARE @result int; "
    "EXEC @result = sys.sp_getapplock @Resource = :resource, @LockMode = :mode, "
    "@LockOwner = N'Session', @LockTimeout = :timeout_ms; "
    "SELECT @result AS result"
)
_RELEASE = text("EXEC sys.sp_releaseapplock @Resource = :resource, @LockOwner = N'Session'")


def lock_resource(kind: str, name: str) -> str:
    """``heads.lock_resource(@kind, @name)`` of sql/0003/internal/lock_resource.sql."""
    return f"heads.{kind}:{name.lower()}"


@contextmanager
def server_lock(
    engine: Engine, kind: str, name: str, timeout_ms: int, busy: str, mode: str = "Exclusive"
) -> Iterator[None]:
    """Hold ``kind:name`` in ``mode`` on a connection of its own (Session-owned, so that the
    caller's transactions come and go under it); :class:`BusyError` (50016) after
    ``timeout_ms``, as ``heads.take_lock`` raises it."""
    if mode not in MODES:
        raise ValueError(f"lock mode {mode!r} is not one of {MODES}")
    resource = lock_resource(kind, name)
    with engine.connect() as connection:
        result = connection.execute(
            _TAKE, {"resource": resource, "mode": mode, "timeout_ms": timeout_ms}
        ).scalar_one()
        connection.commit()
        if result < 0:
            waited = f" within {timeout_ms} ms" if timeout_ms else ""
            raise BusyError(f"{kind} {name!r} is busy{waited}: {busy}")
        try:
            yield
        finally:
            connection.execute(_RELEASE, {"resource": resource})
            connection.commit()
