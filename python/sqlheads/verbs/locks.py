"""The locks a verb holds: its set's or its head's, by the names and in the modes SQL Server's
procedures lock with ``sp_getapplock`` (heads.take_lock's table), so that both hosts serialise
the same verbs."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

from sqlheads import settings
from sqlheads.store.repository import HEAD_BUSY, SET_BUSY, Store, validate_name

LOCK_TIMEOUT_MS = int(settings.SETTINGS["lock_timeout_ms"].default)  # as heads.* wait
Verb = TypeVar("Verb", bound=Callable[..., Any])
SET_LOCKS = ("embed", "set")  # the kinds locked on a verb's set; ``head``, ``head.use`` on its head


def holding(*locks: tuple[str, bool]) -> Callable[[Verb], Verb]:
    """Run a verb holding the application locks the T-SQL verb of its name takes, each
    ``(kind, shared)``, on the verb's set (``set_name``: kinds ``embed``, ``set``) or head
    (``head``: ``head``, ``head.use``), taken in the order given. ``embed`` does not wait (a
    second embedding of a set fails at once), the others wait up to the call's
    ``lock_timeout_ms``; then :class:`~sqlheads.errors.BusyError`."""

    def decorate(verb: Verb) -> Verb:
        @functools.wraps(verb)
        def locked(store: Store, **arguments: Any) -> Any:
            wait = _lock_timeout(arguments)
            with contextlib.ExitStack() as held:
                for kind, shared in locks:
                    on_set = kind in SET_LOCKS
                    name = validate_name(
                        "set" if on_set else "head", arguments["set_name" if on_set else "head"]
                    )
                    held.enter_context(
                        store.lock(
                            kind,
                            name,
                            0 if kind == "embed" else wait,
                            SET_BUSY if on_set else HEAD_BUSY,
                            shared=shared,
                        )
                    )
                return verb(store, **arguments)

        return cast(Verb, locked)

    return decorate


def _lock_timeout(arguments: dict[str, Any]) -> int:
    """How long the verb waits for a lock: its ``lock_timeout_ms``, or its parameters'
    (``params.version``: train's and distill's)."""
    version = getattr(arguments.get("params"), "version", None)
    if version is not None:
        return version.lock_timeout_ms
    return arguments.get("lock_timeout_ms", LOCK_TIMEOUT_MS)
