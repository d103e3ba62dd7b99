"""Every revision downgrades and upgrades again on a SQLite file that holds data, and the
upgraded schema is exactly the one metadata (nothing autogenerate would still add)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext

import sqlheads_migrations
from sqlheads import host
from sqlheads.store import schema as s
from sqlheads.store.repository import Store


def _step(store: Store, verb, target: str) -> None:
    config = Config()
    config.set_main_option("script_location", str(Path(sqlheads_migrations.__file__).parent))
    with store.engine.begin() as connection:
        config.attributes["connection"] = connection
        verb(config, target)


def test_down_to_each_revision_and_back_up(tmp_path: Path) -> None:
    store = Store.from_url(f"sqlite:///{tmp_path / 'chain.db'}")
    host.init(store)
    for target in ("0004", "0003", "0002", "0001"):
        _step(store, command.downgrade, target)
        with store.engine.connect() as c:
            assert MigrationContext.configure(c).get_current_revision() == target
    _step(store, command.upgrade, "head")
    with store.engine.connect() as c:
        assert compare_metadata(MigrationContext.configure(c), s.metadata) == []
