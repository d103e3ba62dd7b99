"""``drop-set`` and ``drop-head``: delete a set or a head, each under its lock, in one
transaction (:meth:`~sqlheads.store.repository.Store.drop_set`, ``drop_head``)."""

from __future__ import annotations

from typing import Any

from sqlheads.store.repository import Store
from sqlheads.verbs.locks import LOCK_TIMEOUT_MS


def drop_set(store: Store, *, set_name: str) -> dict[str, Any]:
    """Delete a set's vectors, rejects, predictions and soft labels; refused (50015) while
    heads trained on it exist."""
    store.drop_set(set_name)
    return {"set": set_name, "dropped": True}


def drop_head(store: Store, *, head: str, lock_timeout_ms: int = LOCK_TIMEOUT_MS) -> dict[str, Any]:
    """Delete a head: its versions, deployments and predictions."""
    return {"head": head, "versions_dropped": store.drop_head(head, lock_timeout_ms)}
