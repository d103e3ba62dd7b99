"""Every revision downgrades and upgrades again on a SQLite file, empty and holding a deployed
head's predictions, and the upgraded schema is exactly the one metadata (nothing autogenerate
would still add)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import func, select

from sqlheads import host
from sqlheads.store import migrations
from sqlheads.store import schema as s
from sqlheads.store.repository import Store


def test_down_to_each_revision_and_back_up(tmp_path: Path) -> None:
    store = Store.from_url(f"sqlite:///{tmp_path / 'chain.db'}")
    host.init(store)
    for target in ("0006", "0004", "0003", "0002", "0001"):
        migrations.migrate(store, target, downgrade=True)
        with store.engine.connect() as c:
            assert MigrationContext.configure(c).get_current_revision() == target
    migrations.migrate(store)
    with store.engine.connect() as c:
        assert compare_metadata(MigrationContext.configure(c), s.metadata) == []


def _counts(store: Store) -> dict[str, int]:
    tables = (s.encoders, s.embedding_sets, s.embeddings, s.models, s.deployments, s.predictions)
    with store.engine.connect() as c:
        return {t.name: c.execute(select(func.count()).select_from(t)).scalar_one() for t in tables}


def test_a_store_holding_predictions_goes_down_and_up_losing_nothing(
    store: Store, rt_sample
) -> None:
    """Batch mode drops and recreates ``models``, which deployments and predictions point at:
    with foreign keys enforced, a populated file once failed to upgrade from 0002."""
    tiny = pd.concat(group.head(20) for _, group in rt_sample.groupby("label"))
    tiny.to_sql("reviews", store.engine, index=False)
    host.embed(store, set_name="reviews", source="SELECT item_key, text FROM reviews")
    labels = "SELECT item_key, label FROM reviews"
    host.train(store, head="sentiment", set_name="reviews", labels=labels, deploy="always")
    host.predict(store, head="sentiment", set_name="reviews")
    before, revision = _counts(store), migrations.schema_state(store).current
    assert before["predictions"] == 40 and before["deployments"] == 1
    assert migrations.migrate(store, "0002", downgrade=True) == "0002"
    assert migrations.migrate(store) == revision
    assert _counts(store) == before
    with store.engine.connect() as c:
        assert c.exec_driver_sql("PRAGMA foreign_keys").scalar_one() == 1
        assert c.exec_driver_sql("PRAGMA foreign_key_check").all() == []
    assert len(store.read_view("latest_predictions", head="sentiment")) == 40


def test_the_views_flags_have_a_declared_type(store: Store) -> None:
    """BI tools read a view column's declared type: is_deployed and below_baseline are
    INTEGER, as every other number of model_summary, never NULL (no type)."""
    with store.engine.connect() as c:
        table_info = c.exec_driver_sql("PRAGMA table_info(model_summary)").all()
    declared = {row[1]: row[2] for row in table_info}
    assert declared["version"] == "INTEGER"
    assert (declared["is_deployed"], declared["below_baseline"]) == ("INTEGER", "INTEGER")
