"""What ``sqlheads report`` reads and writes: a version's scored rows and its figures' numbers."""

from __future__ import annotations

from typing import Any

import pandas as pd
from sqlalchemy import delete, insert, select

from sqlheads.store import schema as s
from sqlheads.store.repository import Store

# The longest series or x label a model_figures row holds.
FIGURE_TEXT_LIMIT = s.model_figures.c.series.type.length


def prediction_scores(store: Store, model_id: int) -> pd.DataFrame:
    """``label`` and ``score`` of every row the version scored into ``predictions``."""
    with store.engine.connect() as connection:
        rows = connection.execute(
            select(s.predictions.c.label, s.predictions.c.score).where(
                s.predictions.c.model_id == model_id
            )
        ).all()
    return pd.DataFrame([tuple(r) for r in rows], columns=["label", "score"])


def store_figures(store: Store, model_id: int, rows: list[dict[str, Any]]) -> None:
    """Replace the version's rows in ``model_figures`` in one transaction."""
    with store.engine.begin() as connection:
        connection.execute(delete(s.model_figures).where(s.model_figures.c.model_id == model_id))
        if rows:
            connection.execute(
                insert(s.model_figures), [{"model_id": model_id, **row} for row in rows]
            )
