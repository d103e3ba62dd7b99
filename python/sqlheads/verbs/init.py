"""``init``: create or upgrade a database's tables and views."""

from __future__ import annotations

from typing import Any

from sqlheads.store import migrations
from sqlheads.store.repository import Store


def init(store: Store) -> dict[str, Any]:
    """Create or upgrade every table and view (Alembic ``upgrade head``); harmless to repeat."""
    revision = migrations.migrate(store)
    return {"url": store.engine.url.render_as_string(hide_password=True), "revision": revision}
