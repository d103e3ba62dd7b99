"""``soft_labels``: a teacher's logits as a caller's query returns them, made distill's input."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from sqlheads.compute.columns import SOFT_LABELS_INPUT, SOFT_LABELS_OUTPUT, require_columns
from sqlheads.errors import InvalidParameterError, QueryShapeError
from sqlheads.store.keys import required_keys
from sqlheads.store.vectors import pack_rows


def soft_labels(input_data: pd.DataFrame) -> pd.DataFrame:
    """SQL Server's door to :func:`soft_labels_frame`: each row arrives as JSON (``FOR JSON``
    keeps the caller's column order and leaves out NULLs, which are refused as such)."""
    require_columns(input_data, SOFT_LABELS_INPUT, "soft labels")
    rows = [_flat_json(json.loads(text)) for text in input_data["row_json"]]
    columns = list(dict.fromkeys(name for row in rows for name in row))
    return soft_labels_frame(pd.DataFrame(rows, columns=columns))


def soft_labels_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A caller's soft labels (``item_key`` and one numeric column per class, named after the
    class) as ``item_key``, ``logits`` (float32 bytes) and ``classes_json`` (their order)."""
    classes = [str(c) for c in frame.columns if c != "item_key"]
    if "item_key" not in frame.columns or len(classes) < 2:
        raise QueryShapeError(
            "the soft labels query must return item_key and one logit column per class, named "
            f"after the class (it returned {', '.join(map(str, frame.columns))}): e.g. SELECT "
            "item_key, logit_0 AS negative, logit_1 AS positive FROM teacher_logits"
        )
    if frame.empty:
        raise QueryShapeError("the soft labels query returned no rows: check its WHERE clause")
    try:
        logits = frame[classes].apply(pd.to_numeric).to_numpy(dtype=np.float32)
    except (TypeError, ValueError):
        raise QueryShapeError(
            "the soft labels query returned non-numeric logits: return one number per class"
        ) from None
    if np.isnan(logits).any():
        raise InvalidParameterError(
            f"{int(np.isnan(logits).any(axis=1).sum())} soft-label row(s) hold NULL logits: "
            "filter them out (WHERE ... IS NOT NULL)"
        )
    keys = required_keys(frame["item_key"], "soft labels")
    duplicated = len(keys) - len(set(keys))
    if duplicated:
        raise InvalidParameterError(
            f"{duplicated} item_key(s) appear more than once in the soft labels query: give "
            "each key one row of logits"
        )
    return pd.DataFrame(
        {"item_key": keys, "logits": pack_rows(logits), "classes_json": json.dumps(classes)},
        columns=list(SOFT_LABELS_OUTPUT),
    )


def _flat_json(row: dict, prefix: str = "") -> dict:
    """``FOR JSON PATH`` nests a column named ``very.good`` as ``{"very": {"good": ...}}``;
    the dotted name is the class, so the path is joined back into it."""
    flat: dict = {}
    for name, value in row.items():
        if isinstance(value, dict):
            flat.update(_flat_json(value, f"{prefix}{name}."))
        else:
            flat[f"{prefix}{name}"] = value
    return flat
