"""``sqlheads drift``: is each set a head's deployed version scored still the kind of data it was
trained on?

SQL computes what it can from the predictions and the reference the version recorded at
training time (the ``drift`` view: rows and when, mean top probability against the held-out
rows', the top probability's PSI, the largest class share gap); Python adds the embedding shift,
which needs the stored vectors (the centroid of at most :data:`SHIFT_SAMPLE` of the set's new
rows, seeded), and judges every signal against the limits the version recorded
(:mod:`sqlheads.engine.loop.drift`). A signal a version did not record is named, never guessed.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from sqlheads.engine.loop import drift as signals
from sqlheads.store.queue_drift import (
    drift_rows,
    labelled_keys_recorded,
    predicted_shares,
    unlabelled_keys,
)
from sqlheads.store.repository import Model, Store, validate_name
from sqlheads.store.vectors import unpack_rows

SHIFT_SAMPLE = 20_000  # a centroid's error falls as 1/sqrt(rows): 20k rows are plenty
# What no set to judge means, said alike by the command line and the report page.
NO_SET_JUDGED = (
    "no set to judge: this version scored no rows beyond those it was labelled on; score a set "
    "with new rows (`sqlheads predict`) and ask again"
)
NOT_RECORDED = (
    "not recorded: the version was trained before sqlheads recorded drift references; "
    "train a new version"
)


def set_shift(store: Store, model: Model, set_name: str, found: dict[str, Any]) -> float | None:
    """The embedding shift of the set's new rows, or None when it cannot be computed (no
    centroid recorded, or a set of another encoder)."""
    embedding_set = store.require_set(set_name)
    if "training_centroid" not in found or embedding_set.encoder_id != model.encoder_id:
        return None
    keys = unlabelled_keys(store, model.model_id, set_name)
    if len(keys) > SHIFT_SAMPLE:
        keys = [keys[i] for i in np.random.default_rng(0).choice(len(keys), SHIFT_SAMPLE, False)]
    stored = store.vectors_for_keys(embedding_set.set_id, keys)
    if not stored:
        return None
    dim = len(found["training_centroid"])
    # summed in key order: the same centroid whatever order the store returned the rows in
    vectors = unpack_rows([stored[k] for k in sorted(stored)], dim)
    return signals.embedding_shift(found, vectors.mean(axis=0))


def drift(store: Store, *, head: str) -> dict[str, Any]:
    """One entry per set ``head``'s deployed version scored (its rows other than those it
    was labelled on), each with its signals and ``drifted``."""
    validate_name("head", head)
    model = store.find_model(head)  # the deployed version; never deployed: 50001
    metrics = json.loads(store.model_record(model.model_id)["metrics_json"])
    found = metrics.get("drift")
    shares = predicted_shares(store, model.model_id)
    sets = []
    for row in drift_rows(store, model.model_id).itertuples(index=False):
        shift = set_shift(store, model, row.set_name, found) if found else None
        confidence_gap = (
            None
            if row.held_out_mean_top_probability is None
            else abs(row.mean_top_probability - row.held_out_mean_top_probability)
        )
        verdict = signals.judge(
            found,
            int(row.rows_scored),
            psi=_number(row.top_probability_psi),
            confidence_gap=confidence_gap,
            share_gap=_number(row.largest_share_gap),
            shift=shift,
        )
        training = (found or {}).get("training_class_shares", {})
        sets.append(
            {
                "set": row.set_name,
                "drifted": verdict.drifted,
                "rows_scored": int(row.rows_scored),
                "first_predicted_at": str(row.first_predicted_at),
                "last_predicted_at": str(row.last_predicted_at),
                "class_shares": {
                    c: {
                        "predicted": round(shares.get(row.set_name, {}).get(c, 0.0), 4),
                        "training": training[c],
                    }
                    for c in training
                },
                "mean_top_probability": round(float(row.mean_top_probability), 4),
                "held_out_mean_top_probability": _number(row.held_out_mean_top_probability),
                "top_probability_psi": _rounded(row.top_probability_psi),
                "largest_share_gap": _rounded(row.largest_share_gap),
                "embedding_shift": _rounded(shift),
                "reasons": verdict.reasons,
                "not_computed": verdict.not_computed,
                "drifted_in_view": bool(row.drifted),
            }
        )
    result: dict[str, Any] = {
        "head": head,
        "version": model.version,
        "model_id": model.model_id,
        "sets": sets,
    }
    if found is None:
        result["reference"] = NOT_RECORDED
    if not labelled_keys_recorded(store, model.model_id):
        result["sets_not_listed"] = (
            "the version recorded no labelled keys (trained before sqlheads recorded them), so "
            "its training rows cannot be told from new ones: train a new version"
        )
    return result


def _number(value: Any) -> float | None:
    return None if value is None or (isinstance(value, float) and np.isnan(value)) else float(value)


def _rounded(value: Any) -> float | None:
    number = _number(value)
    return None if number is None else round(number, 4)
