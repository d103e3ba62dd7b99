"""``predict``: label, score and every class's probability, per input row."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from sqlheads.compute.columns import PREDICT_OUTPUT, present, require_columns
from sqlheads.compute.model_cache import ModelCache
from sqlheads.engine import kinds
from sqlheads.store.keys import item_key_text
from sqlheads.store.vectors import unpack_rows

MODELS = ModelCache()  # one per process: SQL Server starts a Python per batch


def predict(
    input_data: pd.DataFrame, *, model_sha256: str, model_blob: bytes, kind: str = "head"
) -> pd.DataFrame:
    """Label, score (the top probability) and every class's probability, per input row.

    Input: ``item_key`` and the kind's input: ``vector`` for heads, ``text`` for text models
    (see :mod:`sqlheads.engine.kinds`). Rows without one (NULL, or blank text) are skipped.
    """
    model_kind = kinds.model_kind(kind)
    require_columns(input_data, ("item_key", model_kind.reads), "predict input")
    model = MODELS.load(model_sha256, model_blob, model_kind)
    rows = input_data[present(input_data[model_kind.reads], model_kind.reads)]
    if rows.empty:
        return pd.DataFrame(columns=list(PREDICT_OUTPUT))
    probabilities = model.predict_proba(
        _model_inputs(rows[model_kind.reads], model_kind.reads, model)
    )
    best = probabilities.argmax(axis=1)
    classes = np.asarray(model.classes_)
    encoded_names = [json.dumps(c) for c in model.classes_]
    return pd.DataFrame(
        {
            "item_key": [item_key_text(k) for k in rows["item_key"]],
            "label": classes[best],
            "score": probabilities[np.arange(len(best)), best].astype(float),
            "probabilities_json": [
                "{"
                + ", ".join(f"{n}: {p:.6f}" for n, p in zip(encoded_names, row, strict=True))
                + "}"
                for row in probabilities
            ],
        },
        columns=list(PREDICT_OUTPUT),
    )


def _model_inputs(values: pd.Series, reads: str, model: kinds.Scorer):
    if reads == "text":
        return [str(v) for v in values]
    return unpack_rows(values.tolist(), model.n_features_in_)
