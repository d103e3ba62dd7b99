"""DataFrames of the store's own rows, typed by their columns' SQL types."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd
from sqlalchemy import Integer


def typed_frame(rows: Sequence[Any], columns: Iterable[Any]) -> pd.DataFrame:
    """``rows`` under ``columns`` (SQLAlchemy columns), an INTEGER column holding a NULL as
    nullable Int64: a plain frame turns it into floats, which JSON prints as ``50004.0``."""
    columns = list(columns)
    frame = pd.DataFrame([tuple(r) for r in rows], columns=[c.key for c in columns])
    for at, column in enumerate(columns):
        values = [r[at] for r in rows]
        if isinstance(column.type, Integer) and None in values:
            frame[column.key] = pd.array(values, dtype="Int64")
    return frame
