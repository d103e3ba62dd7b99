"""Item keys: the one place a caller's key value becomes the text the store keeps.

A key is the text of the value as the database returns it: the integer 1 is ``'1'``, the
float 1.5 is ``'1.5'``, a string is itself. Rows are read from the DB-API values (never
through a pandas column, which turns an INTEGER column with a NULL into floats, 1 into 1.0);
a NULL key stays ``None`` so that each verb can refuse it or reject it with its reason.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from decimal import Decimal
from numbers import Integral, Real
from typing import Any

import pandas as pd

from sqlheads.errors import QueryShapeError
from sqlheads.store.schema import KEY_LENGTH

# rejects.item_key is NOT NULL: a row without a usable key is rejected under this key.
KEYLESS = ""
# Keys bound in one statement: SQLite's default limit on bound parameters is 32766, SQL
# Server's 2100.
KEYS_PER_STATEMENT = 900


def key_chunks(keys: list[str]) -> Iterable[list[str]]:
    """``keys`` in lists of at most :data:`KEYS_PER_STATEMENT`, for ``IN (...)`` filters."""
    for start in range(0, len(keys), KEYS_PER_STATEMENT):
        yield keys[start : start + KEYS_PER_STATEMENT]


def item_key_text(value: Any) -> str | None:
    """``value`` as key text; None for NULL (None, NaN, pandas' NA)."""
    if value is None or value is pd.NA:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):  # a BIT key: 1/0, as SQL Server's CONVERT(nvarchar) gives
        return str(int(value))
    if isinstance(value, Integral):
        return str(int(value))
    if isinstance(value, Real | Decimal):
        return None if math.isnan(value) else str(value)
    return str(value)


def key_problem(key: str | None) -> str | None:
    """Why ``key`` cannot be stored (a reject reason), or None when it can."""
    if key is None:
        return "item_key is NULL"
    if not key.rstrip(" "):  # SQL Server compares a key of spaces equal to the empty key
        return "item_key is empty"
    return None


def required_keys(values: Iterable[Any], what: str) -> list[str]:
    """The keys of a labels, soft labels or keys query, which has no rejects to go to: a NULL,
    empty or over-long key refuses the query (50003), naming how many rows and the fix."""
    keys = [item_key_text(v) for v in values]
    keyless = sum(1 for k in keys if key_problem(k) is not None)
    if keyless:
        raise QueryShapeError(
            f"the {what} query returned {keyless} row(s) with a NULL or empty item_key: filter "
            "them out (WHERE key IS NOT NULL)"
        )
    check_key_lengths(keys, what)
    return keys  # type: ignore[return-value]


def check_key_lengths(keys: Iterable[str | None], what: str) -> None:
    """Keys are at most KEY_LENGTH characters, as the store's key columns (and SQL Server's
    staging tables) hold: a longer one refuses the query (50003) before anything is written."""
    for key in keys:
        if key is not None and len(key) > KEY_LENGTH:
            raise QueryShapeError(
                f"the {what} query returned an item_key of {len(key)} characters "
                f"({key[:40]!r}...): keys are at most {KEY_LENGTH} characters; key the rows "
                "by a shorter column, or by a hash of this one"
            )
