"""``sqlheads demo``: the analyst's day on Rotten Tomatoes, against a local SQLite file."""

from __future__ import annotations

import json
import time
from typing import Any

from sqlheads import datasets, host, sample
from sqlheads.store.repository import Store
from sqlheads.verbs import baselines

HEAD = "rt_sentiment"
SET = "rt_reviews"
TABLE = "rt_reviews"


def run_demo(
    url: str,
    *,
    progress: host.Progress | None = None,
    train_progress: host.Progress | None = None,
) -> dict[str, Any]:
    """Load the reviews into a table, then embed, train, predict and read the views.

    On a file that already holds the demo, only what changed is embedded, the deployed
    version is reused instead of training another, and scoring replaces its predictions in
    place: the file does not grow.

    The head is trained on every labelled review; its held-out split is the fixed 20 % test
    split of :mod:`sqlheads.datasets` (same keys, fraction and seed), so ``accuracy`` is the
    test accuracy on that split. ``SQLHEADS_SAMPLE_ROWS=N`` runs it on the seeded sample of N
    reviews that ``load-sample`` takes too (the documentation's tests run it so).
    """
    store = Store.from_url(url)
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    host.init(store)
    reviews = datasets.seeded_sample(datasets.rotten_tomatoes(), sample.sample_rows())
    # A plain user table, as an analyst would have it: sqlheads reads it through queries.
    reviews.to_sql(TABLE, store.engine, if_exists="replace", index=False)
    seconds["load"] = time.perf_counter() - started

    started = time.perf_counter()
    embedded = host.embed(
        store,
        set_name=SET,
        source=f"SELECT item_key, text FROM {TABLE}",
        progress=progress,
    )
    seconds["embed"] = time.perf_counter() - started

    # A re-run on the same file trains nothing: the same rows and seed would give the same
    # model, so a new version would only make the file grow. `sqlheads train` makes versions.
    started = time.perf_counter()
    deployed = store.deployed_model(HEAD)
    if deployed is None:
        trained = host.train(
            store,
            head=HEAD,
            set_name=SET,
            labels=f"SELECT item_key, label FROM {TABLE}",
            progress=train_progress,
        )
    else:
        record = store.model_record(deployed.model_id)
        trained = {
            "version": deployed.version,
            "classes": json.loads(record["classes_json"]),
            "accuracy": round(deployed.accuracy, 4),
            "macro_f1": round(deployed.macro_f1, 4),
            "rows_train": record["rows_train"],
            "rows_test": record["rows_test"],
            **baselines.summary(record, deployed.accuracy, None),
        }
    seconds["train"] = time.perf_counter() - started

    started = time.perf_counter()
    host.predict(store, head=HEAD, set_name=SET)
    seconds["predict"] = time.perf_counter() - started

    latest = store.read_view("latest_predictions", head=HEAD)
    truth = reviews.set_index("item_key")["label"]
    test_keys = set(reviews.loc[reviews["split"] == "test", "item_key"])
    on_test = latest[latest["item_key"].isin(test_keys)]
    test_accuracy = float(
        (on_test["label"].to_numpy() == truth[on_test["item_key"]].to_numpy()).mean()
    )
    return {
        "url": url,
        "head": HEAD,
        "version": trained["version"],
        "trained": deployed is None,
        "encoder": embedded["encoder"],
        "rows": len(reviews),
        "classes": trained["classes"],
        "rows_train": trained["rows_train"],
        "rows_test": trained["rows_test"],
        "accuracy": trained["accuracy"],
        "macro_f1": trained["macro_f1"],
        # the TF-IDF + logistic regression baseline on the same rows, and the verdict
        "baseline_accuracy": trained["baseline"]["accuracy"],
        "versus_baseline": trained["versus_baseline"],
        "test_accuracy_from_view": round(test_accuracy, 4),
        "embedded": embedded["embedded"],
        "unchanged": embedded["unchanged"],
        "embed_rows_per_second": embedded["rows_per_second"],
        "predictions_in_view": len(latest),
        "seconds": {k: round(v, 2) for k, v in seconds.items()},
    }
