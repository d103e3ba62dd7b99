"""``deploy`` and ``roll-back``, and how a deploy scores again the rows that the versions it
replaces had scored.

A head scores the set's stored vectors (about 290k rows/s), a text model the rows' text through
the set's last source query; the store writes the result in the deploy's own transaction
(:mod:`sqlheads.store.deployments`). A text model whose set has no known source, or one that
another user stored (it runs for its author alone), or a head trained on another encoder's
vectors, cannot score the set here: ``None``, and the earlier predictions stay until
``predict`` runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd

from sqlheads import settings
from sqlheads.compute.columns import EMBED_INPUT
from sqlheads.compute.predict import predict
from sqlheads.engine.kinds import model_kind
from sqlheads.errors import NotFoundError, StoredQueryOwnerError
from sqlheads.store.deployments import DeployOutcome, Rescore, deploy_replacing
from sqlheads.store.repository import EmbeddingSet, Model, Store
from sqlheads.verbs.locks import LOCK_TIMEOUT_MS, holding
from sqlheads.verbs.rows import READ_ROWS, stored_source


@holding(("head", False))
def deploy(
    store: Store, *, head: str, version: int, lock_timeout_ms: int = LOCK_TIMEOUT_MS
) -> dict[str, Any]:
    """Make ``version`` the deployed model of ``head`` (explicit, and recorded)."""
    return deploy_model(store, store.find_model(head, version), settings.REASON_BY_HAND)


@holding(("head", False))
def roll_back(store: Store, *, head: str, lock_timeout_ms: int = LOCK_TIMEOUT_MS) -> dict[str, Any]:
    """Deploy again the model that was deployed before the current one."""
    history = store.deployment_history(head)
    if not history and store.read_view("model_summary", head=head).empty:
        # drop-head leaves no trace of a head, so both causes are named
        raise NotFoundError(
            f"head {head!r} does not exist: it was never trained, or it was dropped "
            "(drop-head deletes a head's versions and deployment history); nothing to "
            f"roll back: train it with `sqlheads train --head {head} ...`"
        )
    if not history:
        raise NotFoundError(
            f"head {head!r} has never been deployed: nothing to roll back; deploy a "
            f"version with `sqlheads deploy --head {head} --version N`"
        )
    previous = next((m for m in history if m != history[0]), None)
    if previous is None:
        raise NotFoundError(
            f"head {head!r} has had only one deployed version: nothing to roll back to; "
            f"deploy another with `sqlheads deploy --head {head} --version N`"
        )
    return deploy_model(store, store.model_by_id(previous), settings.REASON_ROLL_BACK)


def deploy_model(store: Store, model: Model, reason: str) -> dict[str, Any]:
    """Deploy ``model``; the summary of what its predictions replaced and what stayed."""
    rescore = rescorer(store, model, store.model_blob(model.model_id))
    outcome = deploy_replacing(store, model.head, model.model_id, reason, rescore)
    return {"head": model.head, "version": model.version, "model_id": model.model_id} | (
        _outcome_fields(outcome)
    )


def _outcome_fields(outcome: DeployOutcome) -> dict[str, int]:
    return {
        "rows_rescored": outcome.rescored_rows,
        "rows_kept_until_predict": outcome.kept_rows,
        "predictions_replaced": outcome.replaced_rows,
    }


def rescorer(store: Store, model: Model, blob: bytes) -> Rescore:
    """How deploying ``model`` scores a set's replaced rows again (None: it cannot)."""
    reads = model_kind(model.kind).reads

    def score(chunks: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for chunk in chunks:
            yield predict(chunk, model_sha256=model.sha256, model_blob=blob, kind=model.kind)

    def rescore(
        embedding_set: EmbeddingSet, rows: Iterator[pd.DataFrame]
    ) -> Iterator[pd.DataFrame] | None:
        if reads == "vector":
            return score(rows) if embedding_set.encoder_id == model.encoder_id else None
        try:  # the stored query runs for its author alone; for anyone else, keep until predict
            source = stored_source(store, embedding_set)
        except StoredQueryOwnerError:
            return None
        return None if source is None else score(_texts_of(store, source, rows))

    return rescore


def _texts_of(store: Store, source: str, rows: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
    """The source's rows whose keys are among ``rows``' (a text model's input); a key the
    source returns more than once is not scored (its prediction stays until ``predict``, which
    skips it too): which copy's text to score would depend on the order the query returned
    them in."""
    wanted = {str(key) for chunk in rows for key in chunk["item_key"]}
    wanted -= store.duplicate_keys(source)
    for chunk in store.run_query(source, EMBED_INPUT, "source", READ_ROWS):
        chunk = chunk.assign(item_key=[str(k) for k in chunk["item_key"]])
        yield chunk[chunk["item_key"].isin(wanted)]
