"""Deploying a version without blanking ``latest_predictions``, which dashboards read.

The deployment row, the new version's predictions of the rows its head's earlier deployed
versions had scored, and the removal of the predictions they replace are one transaction: a
dashboard on ``latest_predictions`` sees the old predictions until the commit and the new ones
from it, never an empty view. Where the new version cannot score a set here (a text model whose
set has no known source, a head trained on another encoder's vectors), the earlier predictions
stay, and the view shows them, named by their own version, until ``predict`` replaces them.

How a set's rows are scored is the caller's (the host's) business: the store hands it the
rows to score and writes what it returns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass

import pandas as pd
from sqlalchemy import and_, delete, func, insert, select
from sqlalchemy.engine import Connection

from sqlheads.store import schema as s
from sqlheads.store.repository import EmbeddingSet, Store

# Given a set and the rows to score (``item_key`` and the set's ``vector`` of each, None
# where the set holds none), the new version's predictions in batches, or None where the new
# version cannot score that set here (its earlier predictions then stay).
Rescore = Callable[[EmbeddingSet, Iterator[pd.DataFrame]], Iterator[pd.DataFrame] | None]


@dataclass(frozen=True)
class DeployOutcome:
    rescored_rows: int  # rows the new version scored in the deploy's transaction
    kept_rows: int  # earlier predictions left standing (sets it could not score here)
    replaced_rows: int  # earlier predictions deleted: the new version's replace them


def deploy_replacing(
    store: Store,
    head: str,
    model_id: int,
    reason: str,
    rescore: Rescore,
    batch_rows: int = 10_000,
    connection: Connection | None = None,
) -> DeployOutcome:
    """Deploy ``model_id`` and, in the same transaction, replace the predictions of the head's
    earlier deployed versions with its own wherever ``rescore`` can score their rows
    (``connection``'s open transaction, if given: the one that inserted the version)."""
    rescored = kept = replaced = 0
    with store.engine.begin() if connection is None else nullcontext(connection) as c:
        earlier = _earlier_deployed(c, head, model_id)
        c.execute(insert(s.deployments).values(head=head, model_id=model_id, reason=reason))
        for set_id in _sets_predicted_by(c, earlier):
            outputs = rescore(_set_by_id(c, set_id), _standing_rows(c, set_id, earlier, batch_rows))
            if outputs is None:
                kept += _count_predictions(c, set_id, earlier)
                continue
            for output in outputs:
                store.write_predictions(model_id, set_id, output, connection=c)
                rescored += len(output)
            replaced += _delete_replaced(c, set_id, earlier, model_id)
            kept += _count_predictions(c, set_id, earlier)
    return DeployOutcome(rescored, kept, replaced)


def _earlier_deployed(c: Connection, head: str, model_id: int) -> list[int]:
    """Every version of ``head`` deployed before, but ``model_id``: the view may show their
    predictions (the newest deployed version's first)."""
    return list(
        c.execute(
            select(s.deployments.c.model_id)
            .distinct()
            .where(s.deployments.c.head == head, s.deployments.c.model_id != model_id)
        ).scalars()
    )


def _sets_predicted_by(c: Connection, model_ids: list[int]) -> list[int]:
    if not model_ids:
        return []
    return list(
        c.execute(
            select(s.predictions.c.set_id)
            .distinct()
            .where(s.predictions.c.model_id.in_(model_ids))
            .order_by(s.predictions.c.set_id)
        ).scalars()
    )


def _set_by_id(c: Connection, set_id: int) -> EmbeddingSet:
    columns = (
        "set_id",
        "name",
        "encoder_id",
        "long_text",
        "source_query",
        "source_user",
        "source_sid",
    )
    row = c.execute(
        select(*(s.embedding_sets.c[name] for name in columns)).where(
            s.embedding_sets.c.set_id == set_id
        )
    ).one()
    return EmbeddingSet(**row._mapping)


def _standing_rows(
    c: Connection, set_id: int, model_ids: list[int], batch_rows: int
) -> Iterator[pd.DataFrame]:
    """The keys the earlier versions predicted in a set, with the set's vector of each, in key
    order by key ranges (each page is read before the caller writes: memory stays flat; the
    range is applied inside the page's own query, so a page costs a range scan of the key)."""
    last: str | None = None
    while True:
        keys = (
            select(s.predictions.c.item_key)
            .distinct()
            .where(s.predictions.c.set_id == set_id, s.predictions.c.model_id.in_(model_ids))
        )
        if last is not None:
            keys = keys.where(s.predictions.c.item_key > last)
        page = keys.order_by(s.predictions.c.item_key).limit(batch_rows).subquery("standing")
        query = (
            select(page.c.item_key, s.embeddings.c.vector)
            .select_from(page)
            .outerjoin(
                s.embeddings,
                and_(s.embeddings.c.set_id == set_id, s.embeddings.c.item_key == page.c.item_key),
            )
            .order_by(page.c.item_key)
        )
        rows = c.execute(query).all()
        if not rows:
            return
        last = rows[-1].item_key
        yield pd.DataFrame(
            {
                "item_key": [r.item_key for r in rows],
                "vector": [None if r.vector is None else bytes(r.vector) for r in rows],
            }
        )


def _delete_replaced(c: Connection, set_id: int, earlier: list[int], model_id: int) -> int:
    """Delete the earlier versions' predictions of the keys the new version now predicts."""
    scored_now = select(s.predictions.c.item_key).where(
        s.predictions.c.model_id == model_id, s.predictions.c.set_id == set_id
    )
    return c.execute(
        delete(s.predictions).where(
            s.predictions.c.set_id == set_id,
            s.predictions.c.model_id.in_(earlier),
            s.predictions.c.item_key.in_(scored_now),
        )
    ).rowcount


def _count_predictions(c: Connection, set_id: int, model_ids: list[int]) -> int:
    keys = (
        select(s.predictions.c.item_key)
        .distinct()
        .where(s.predictions.c.set_id == set_id, s.predictions.c.model_id.in_(model_ids))
        .subquery("kept")
    )
    return c.execute(select(func.count()).select_from(keys)).scalar_one()
