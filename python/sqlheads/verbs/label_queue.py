"""``sqlheads label-queue``: the rows a person should label next for a head's deployed version.

SQL ranks (the ``label_queue`` view: the version's scored rows that it was not trained or
scored on, by the margin between their two top class probabilities); Python adds what SQL
cannot, a look at the stored vectors, so that the queue holds no run of near-duplicates
(:class:`~sqlheads.engine.loop.active.DiverseQueue` over the :data:`POOL` x ``n`` least certain
rows). ``into`` writes the queue as a labelling table whose ``label`` column is NULL until a
person fills it in; ``train --labels "SELECT item_key, label FROM TABLE WHERE label IS NOT
NULL"`` reads it back (train refuses NULL labels with 50012, naming that filter).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from sqlheads.engine.loop.active import MAX_COSINE, DiverseQueue
from sqlheads.errors import NotFoundError
from sqlheads.store.queue_drift import (
    labelled_keys_recorded,
    labelling_table,
    queue_rows,
    write_labelling_table,
)
from sqlheads.store.repository import Model, Store, validate_name
from sqlheads.store.vectors import unpack_rows

POOL = 10  # candidates read per row asked for: the diversity pass picks from the least sure
COLUMNS = ("queue_rank", "item_key", "set_name", "predicted_label", "probability", "margin")
# What an empty queue means, said alike by the command line and the report page.
EMPTY_QUEUE = "empty: every row this version scored was labelled"


def require_recorded(store: Store, model: Model) -> None:
    """Refuse a version that did not record the keys it was labelled on (trained before
    revision 0007): its training rows cannot be told from new ones."""
    if not labelled_keys_recorded(store, model.model_id):
        raise NotFoundError(
            f"version {model.version} of head {model.head!r} recorded no labelled keys (it was "
            "trained before sqlheads recorded them), so its training rows cannot be told from "
            f"new ones: train a new version (`sqlheads train --head {model.head} ...`)"
        )


def candidate_vectors(
    store: Store, model: Model, candidates: pd.DataFrame
) -> tuple[np.ndarray, np.ndarray]:
    """``(vectors, has_vector)`` of the candidates (a frame indexed 0..n-1), from their sets;
    rows of a set embedded by another encoder than the version's, or with no stored vector,
    have none."""
    dim = store.encoder(model.encoder_id).dim
    vectors = np.zeros((len(candidates), dim), dtype=np.float32)
    known = np.zeros(len(candidates), dtype=bool)
    for set_name, rows in candidates.groupby("set_name", sort=False):
        embedding_set = store.require_set(str(set_name))
        if embedding_set.encoder_id != model.encoder_id:
            continue
        found = store.vectors_for_keys(embedding_set.set_id, rows["item_key"].tolist())
        positions = [i for i, k in zip(rows.index, rows["item_key"], strict=True) if k in found]
        keys = candidates.loc[positions, "item_key"]
        vectors[positions] = unpack_rows([found[k] for k in keys], dim)
        known[positions] = True
    return vectors, known


def label_queue(
    store: Store,
    *,
    head: str,
    n: int,
    set_name: str | None = None,
    into: str | None = None,
    replace: bool = False,
    max_cosine: float = MAX_COSINE,
) -> dict[str, Any]:
    """The ``n`` rows to label next for ``head``'s deployed version (in ``set_name`` only, if
    given), least sure first with no near-duplicates; written to table ``into`` if given."""
    validate_name("head", head)
    if set_name is not None:
        validate_name("set", set_name)
    picker = DiverseQueue(n=n, max_cosine=max_cosine)  # n and max_cosine refused here
    model = store.find_model(head)  # the deployed version; never deployed: 50001
    target = labelling_table(store, into) if into is not None else None  # 50002 before work
    require_recorded(store, model)
    candidates = queue_rows(store, model.model_id, set_name, n * POOL)
    vectors, known = candidate_vectors(store, model, candidates)
    picked = picker.select(vectors, known)
    chosen = candidates.iloc[picked].reset_index(drop=True)
    chosen.insert(0, "queue_rank", np.arange(1, len(chosen) + 1))
    if target is not None:
        write_labelling_table(store, target, chosen, replace)
    rows = chosen[list(COLUMNS)].rename(columns={"set_name": "set"})
    return {
        "head": head,
        "version": model.version,
        "model_id": model.model_id,
        "n": n,
        "candidates_read": len(candidates),
        # near-duplicates of a picked row that were passed over for a less uncertain one
        "passed_over": int(picked.max() + 1 - len(picked)) if len(picked) else 0,
        "into": into,
        "rows": rows.to_dict("records"),
    }
