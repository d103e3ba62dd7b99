"""The model a train makes, and the baseline beside it, depend on the labelled rows, never on
the order a caller's query returned them in: the quick start's ids in shuffled order and the
demo's keys in label order must not train different heads, nor pair one row's text with
another row's label in the baseline. Real vectors, real SQLite."""

from __future__ import annotations

import json

from conftest import order_free_metrics

from sqlheads import host
from sqlheads.store.repository import Store


def test_a_labels_query_in_another_order_trains_the_same_model_and_baseline(embedded: Store):
    made = {}
    for order in ("ASC", "DESC"):
        result = host.train(
            embedded,
            head=f"order_{order.lower()}",
            set_name="reviews",
            labels=f"SELECT item_key, label FROM reviews ORDER BY item_key {order}",
            epochs=3,
        )
        made[order] = embedded.model_record(result["model_id"])
    ascending, descending = made["ASC"], made["DESC"]
    assert ascending["accuracy"] == descending["accuracy"]
    assert ascending["loss_curve_json"] == descending["loss_curve_json"]
    assert ascending["sha256"] == descending["sha256"]
    # The baseline reads each row's text beside its own label: on 600 balanced reviews it is
    # far above chance (texts paired with other rows' labels read about 50 %).
    assert "accuracy" in json.loads(ascending["metrics_json"])["baseline"]
    assert json.loads(ascending["metrics_json"])["baseline"]["accuracy"] > 0.6
    assert order_free_metrics(ascending["metrics_json"]) == order_free_metrics(
        descending["metrics_json"]
    )
