"""Deploy and roll-back never blank latest_predictions (issue 20, point 1).

A dashboard query on the view, run before, during (from a second connection while the deploy's
transaction is open: SQLite's WAL lets a reader in) and after each deploy, returns every scored
row. Real heads, a real word student distilled from a real head's logits, real SQLite files.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import event, func, select

from sqlheads import host
from sqlheads.engine import kinds
from sqlheads.store import schema
from sqlheads.store.repository import Store
from sqlheads.store.vectors import unpack_rows

LABELS = "SELECT item_key, label FROM reviews"
SOFT = "SELECT item_key, negative, positive FROM teacher_logits"
DASHBOARD = (
    "SELECT version, COUNT(*) FROM latest_predictions WHERE head = 'sentiment' GROUP BY version"
)


def _dashboard(store: Store) -> dict[int, int]:
    """What a BI tool sees: rows per version, on a connection of its own."""
    with sqlite3.connect(store.engine.url.database) as reader:
        return dict(reader.execute(DASHBOARD).fetchall())


class DuringDeploy:
    """Runs the dashboard query the first time the store writes a prediction: inside deploy's
    open transaction, on another connection."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.seen: list[dict[int, int]] = []
        event.listen(store.engine, "before_cursor_execute", self._look)

    def _look(self, _conn, _cursor, statement: str, *_args) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO PREDICTIONS"):
            self.seen.append(_dashboard(self.store))

    def first_look(self) -> dict[int, int]:
        assert self.seen, "deploy wrote no predictions"
        view, self.seen = self.seen[0], []
        return view


def _predictions(store: Store) -> int:
    with store.engine.connect() as c:
        return int(c.execute(select(func.count()).select_from(schema.predictions)).scalar_one())


def _train(store: Store, **kwargs):
    return host.train(store, head="sentiment", set_name="reviews", labels=LABELS, **kwargs)


def test_deploy_and_roll_back_replace_predictions_in_one_transaction(embedded: Store, rt_sample):
    rows = len(rt_sample)
    _train(embedded)
    host.predict(embedded, head="sentiment", set_name="reviews")
    second = _train(embedded, deploy="never", hidden=8, epochs=3)
    assert _dashboard(embedded) == {1: rows}
    during = DuringDeploy(embedded)

    deployed = host.deploy(embedded, head="sentiment", version=2)
    assert during.first_look() == {1: rows}  # the old predictions, until the commit
    assert _dashboard(embedded) == {2: rows}
    assert (deployed["rows_rescored"], deployed["predictions_replaced"]) == (rows, rows)
    assert deployed["rows_kept_until_predict"] == 0
    assert _predictions(embedded) == rows  # version 1's were pruned

    # The view's rows are version 2's scores of the stored vectors.
    latest = embedded.read_view("latest_predictions", head="sentiment").set_index("item_key")
    stored = embedded.vectors_for_keys(embedded.require_set("reviews").set_id, list(latest.index))
    model = kinds.model_kind("head").load(embedded.model_blob(second["model_id"]))
    expected = model.predict_proba(unpack_rows([stored[k] for k in latest.index], 384))
    assert np.allclose(latest["score"], expected.max(axis=1), atol=1e-5)

    rolled = host.roll_back(embedded, head="sentiment")
    assert rolled["version"] == 1 and during.first_look() == {2: rows}
    assert _dashboard(embedded) == {1: rows} and _predictions(embedded) == rows

    # train's own deploy (if-better, always) goes the same way
    third = _train(embedded, deploy="always", epochs=2)
    assert third["deployed"] and during.first_look() == {1: rows}
    assert _dashboard(embedded) == {3: rows} and _predictions(embedded) == rows


def test_deploy_keeps_only_the_keys_scored_before(embedded: Store):
    _train(embedded)
    host.predict(
        embedded, head="sentiment", set_name="reviews", keys="SELECT item_key FROM reviews LIMIT 25"
    )
    _train(embedded, deploy="never", epochs=2)
    host.deploy(embedded, head="sentiment", version=2)
    assert _dashboard(embedded) == {2: 25}


@pytest.fixture(scope="module")
def taught_template(
    tmp_path_factory, embedded_template: Path, copy_sqlite, rt_sample: pd.DataFrame
) -> Path:
    """Head version 1 deployed and scored; a word student distilled from its logits, not
    deployed (version 2)."""
    store = copy_sqlite(embedded_template, tmp_path_factory.mktemp("taught") / "heads.db")
    _train(store)
    host.predict(store, head="sentiment", set_name="reviews")
    model = store.find_model("sentiment", 1)
    head = kinds.model_kind("head").load(store.model_blob(model.model_id))
    keys = rt_sample["item_key"].tolist()
    vectors = store.vectors_for_keys(store.require_set("reviews").set_id, keys)
    logits = np.log(head.predict_proba(unpack_rows([vectors[k] for k in keys], 384)) + 1e-6)
    pd.DataFrame({"item_key": keys, "negative": logits[:, 0], "positive": logits[:, 1]}).to_sql(
        "teacher_logits", store.engine, index=False
    )
    host.distill(
        store,
        head="sentiment",
        set_name="reviews",
        labels=LABELS,
        soft_labels=SOFT,
        student="word",
        deploy="never",
        epochs=2,
    )
    store.engine.dispose()
    return Path(store.engine.url.database)


@pytest.fixture
def taught(taught_template: Path, copy_database) -> Store:
    """A copy of taught_template of its own (built once, for the module)."""
    return copy_database(taught_template)


def test_a_text_model_rescores_from_the_sets_source(taught: Store, rt_sample):
    deployed = host.deploy(taught, head="sentiment", version=2)
    assert deployed["rows_rescored"] == len(rt_sample)
    assert _dashboard(taught) == {2: len(rt_sample)}


def test_a_text_model_without_a_source_keeps_the_old_predictions_until_predict(
    taught: Store, rt_sample
):
    rows = len(rt_sample)
    with taught.engine.begin() as c:  # a set embedded before sets remembered their source
        c.execute(schema.embedding_sets.update().values(source_query=None))
    deployed = host.deploy(taught, head="sentiment", version=2)
    assert (deployed["rows_rescored"], deployed["rows_kept_until_predict"]) == (0, rows)
    assert _dashboard(taught) == {1: rows}  # named by the version that scored them
    assert (
        taught.read_view("model_summary", head="sentiment")
        .set_index("version")
        .loc[2, "is_deployed"]
    )
    host.predict(
        taught,
        head="sentiment",
        set_name="reviews",
        source="SELECT item_key, text FROM reviews",
        keys="SELECT item_key FROM reviews LIMIT 10",
    )
    assert _dashboard(taught) == {1: rows - 10, 2: 10}
    # rolling back to the head re-scores every row shown, whichever version scored it
    host.roll_back(taught, head="sentiment")
    assert _dashboard(taught) == {1: rows} and _predictions(taught) == rows
