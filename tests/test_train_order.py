"""The model a train makes depends on the labelled rows, never on the order a caller's query
returned them in: the quick start's ids in shuffled order and the demo's keys in label order
must not train different heads from the same rows. Real vectors, real SQLite."""

from __future__ import annotations

from sqlheads import host
from sqlheads.store.repository import Store


def test_a_labels_query_in_another_order_trains_the_same_model(embedded: Store):
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
    assert made["ASC"]["accuracy"] == made["DESC"]["accuracy"]
    assert made["ASC"]["loss_curve_json"] == made["DESC"]["loss_curve_json"]
    assert made["ASC"]["sha256"] == made["DESC"]["sha256"]
