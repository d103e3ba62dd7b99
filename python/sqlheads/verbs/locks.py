"""The locks a verb holds: its set's or its head's, by the names SQL Server's procedures lock
with ``sp_getapplock``, so that both hosts serialise the same verbs."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

from sqlheads import settings
from sqlheads.store.repository import Store, validate_name

LOCK_TIMEOUT_MS = int(settings.SETTINGS["lock_timeout_ms"].default)  # as heads.* wait
Verb = TypeVar("Verb", bound=Callable[..., Any])


def holding(kind: str, busy: str) -> Callable[[Verb], Verb]:
    """Run a verb holding the lock of its set (``set_name``) or head (``head``): a set's verbs
    do not wait, a head's wait up to the call's ``lock_timeout_ms``; then
    :class:`~sqlheads.errors.BusyError` with ``busy``."""

    def decorate(verb: Verb) -> Verb:
        @functools.wraps(verb)
        def locked(store: Store, **arguments: Any) -> Any:
            name = validate_name(kind, arguments["set_name" if kind == "set" else "head"])
            wait = arguments.get("lock_timeout_ms", LOCK_TIMEOUT_MS) if kind == "head" else 0
            with store.lock(kind, name, wait, busy):
                return verb(store, **arguments)

        return cast(Verb, locked)

    return decorate
