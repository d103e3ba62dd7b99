"""Each verb's input and output columns, and the checks every verb makes of its input rows.

The output columns are :data:`sqlheads.sqlserver.RESULT_TYPES`' (what T-SQL's ``WITH RESULT
SETS`` declares); the input columns are what each verb's input query must return.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np
import pandas as pd

from sqlheads.errors import (
    ClassNameError,
    InvalidParameterError,
    MissingEmbeddingsError,
    QueryShapeError,
)
from sqlheads.sqlserver import RESULT_TYPES
from sqlheads.store.keys import required_keys

EMBED_INPUT = ("item_key", "text")  # plus, optionally, stored_sha256
EMBED_OUTPUT = tuple(RESULT_TYPES["embed"])
TRAIN_INPUT = ("item_key", "label", "vector")  # plus, optionally, text (the baseline's)
TRAIN_OUTPUT = tuple(RESULT_TYPES["train"])
DISTILL_INPUT = ("item_key", "label", "logits")  # + the kind's input; optionally in_transfer
DISTILL_OUTPUT = tuple(RESULT_TYPES["distill"])
PREDICT_INPUT = ("item_key", "vector")  # "text" instead of "vector" for a text model
PREDICT_OUTPUT = tuple(RESULT_TYPES["predict"])
SOFT_LABELS_INPUT = ("item_key", "row_json")
SOFT_LABELS_OUTPUT = tuple(RESULT_TYPES["soft_labels"])
DECIDE_INPUT = ("new_macro_f1", "deployed_macro_f1")
DECIDE_OUTPUT = tuple(RESULT_TYPES["decide"])

DUPLICATE_KEY = "duplicate item_key in the source query"


def require_columns(frame: pd.DataFrame, needed: tuple[str, ...], what: str) -> None:
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise QueryShapeError(
            f"the {what} query must return columns {', '.join(needed)}; it is missing "
            f"{', '.join(missing)} (it returned: {', '.join(map(str, frame.columns)) or 'nothing'})"
            f": alias them, e.g. SELECT id AS item_key, ..."
        )


def refuse_duplicate_keys(keys: list[str], what: str = "labels") -> None:
    duplicated = len(keys) - len(set(keys))
    if duplicated:
        raise InvalidParameterError(
            f"{duplicated} item_key(s) appear more than once in the {what} query: give each "
            f"key one {'label' if what == 'labels' else 'row'} (e.g. SELECT DISTINCT or GROUP BY)"
        )


def in_key_order(input_data: pd.DataFrame, what: str) -> pd.DataFrame:
    """A verb's input rows sorted by ``item_key`` (as key text), indexed 0..n-1: the one frame
    every consumer of the rows reads (the model, its held-out split and metrics, its baseline,
    its drift reference), so that none of them depends on the order a caller's query returned
    the rows in, and no two of them pair a row's values in two orders. A NULL or empty key
    refuses the ``what`` query (50003), a key given twice refuses it too (50012)."""
    keys = required_keys(input_data["item_key"], what)
    refuse_duplicate_keys(keys, what)
    order = np.argsort(np.asarray(keys, dtype=object), kind="stable")
    return input_data.iloc[order].assign(item_key=[keys[i] for i in order]).reset_index(drop=True)


def no_labelled_rows() -> MissingEmbeddingsError:
    """The error of a labels query that returned no (labelled) rows, whichever verb meets it:
    50006, the number SQL Server's ``heads.train`` and ``heads.distill`` have always thrown."""
    return MissingEmbeddingsError(
        "the labels query returned no rows: check its WHERE clause and the set's keys"
    )


def refuse_unnamable_classes(labels: Iterable[object]) -> None:
    """Refuse (50073) a class name that starts or ends with ``.`` or holds ``..``, when a model
    is trained on it, on every host, before anything is stored. A teacher's soft labels reach
    ``heads.distill`` as one column per class, named after the class, which SQL Server turns
    into JSON with ``FOR JSON PATH``: a name with an inner dot nests (``very.good``: Python
    joins the path back), but one of these cannot be a path (Msg 13603), so its soft labels
    could never be read."""
    bad = sorted(
        {
            name
            for name in map(str, labels)
            if name.startswith(".") or name.endswith(".") or ".." in name
        }
    )
    if bad:
        raise ClassNameError(
            f"class name(s) {', '.join(map(repr, bad))} start or end with '.' or hold '..': "
            "SQL Server cannot name a soft-labels column after them (FOR JSON PATH, Msg "
            "13603); rename the class in the labels query (e.g. REPLACE(label, '.', '_'))"
        )


def present(values: pd.Series, reads: str) -> np.ndarray:
    """Rows that hold an input: a vector, or a text that is not NULL or blank."""
    found = values.notna().to_numpy(copy=True)
    if reads == "text":
        found &= np.array([bool(str(v).strip()) for v in values], dtype=bool)
    return found


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
