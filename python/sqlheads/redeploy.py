"""How a deploy scores the rows the versions it replaces had scored (issue 20, point 1).

A head scores the set's stored vectors (about 290k rows/s), a text model the rows' text through
the set's last source query; the store writes the result in the deploy's own transaction
(:mod:`sqlheads.store.deployments`). A text model whose set has no known source, or a head
trained on another encoder's vectors, cannot score the set here: ``None``, and the earlier
predictions stay until ``predict`` runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd

from sqlheads import caller_rows, procedures
from sqlheads.engine.kinds import model_kind
from sqlheads.errors import StoredQueryOwnerError
from sqlheads.store import server_versions
from sqlheads.store.deployments import DeployOutcome, Rescore, deploy_replacing
from sqlheads.store.repository import EmbeddingSet, Model, Store


def add_version(store: Store, values: dict[str, Any], deploy_reason: str | None) -> Model:
    """Store a new version and, given a ``deploy_reason``, deploy it in the same transaction
    (issue 19, point 2): a deploy that fails leaves no undeployed version behind, so a
    sidecar job's retries do not pile versions up. On SQL Server ``heads.add_version`` writes
    both, with the rights it carries (:mod:`sqlheads.store.server_versions`)."""
    if not store.is_sqlite:
        return server_versions.add_version(store, values, deploy_reason)
    with store.engine.begin() as connection:
        model = store.add_model(values, connection)
        if deploy_reason is not None:
            rescore = _rescorer(store, model, bytes(values["blob"]))
            deploy_replacing(
                store, model.head, model.model_id, deploy_reason, rescore, connection=connection
            )
    return model


def deploy_model(store: Store, model: Model, reason: str) -> dict[str, Any]:
    """Deploy ``model``; the summary of what its predictions replaced and what stayed."""
    rescore = _rescorer(store, model, store.model_blob(model.model_id))
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


def _rescorer(store: Store, model: Model, blob: bytes) -> Rescore:
    reads = model_kind(model.kind).reads

    def score(chunks: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        for chunk in chunks:
            yield procedures.predict(
                chunk, model_sha256=model.sha256, model_blob=blob, kind=model.kind
            )

    def rescore(
        embedding_set: EmbeddingSet, rows: Iterator[pd.DataFrame]
    ) -> Iterator[pd.DataFrame] | None:
        if reads == "vector":
            return score(rows) if embedding_set.encoder_id == model.encoder_id else None
        try:  # the stored query runs for its author alone; for anyone else, keep until predict
            source = caller_rows.stored_source(store, embedding_set)
        except StoredQueryOwnerError:
            return None
        return None if source is None else score(_texts_of(store, source, rows))

    return rescore


def _texts_of(
    store: Store, source: str, rows: Iterator[pd.DataFrame], batch_rows: int = 10_000
) -> Iterator[pd.DataFrame]:
    """The source's rows whose keys are among ``rows``' (a text model's input)."""
    wanted = {str(key) for chunk in rows for key in chunk["item_key"]}
    for chunk in store.run_query(source, procedures.EMBED_INPUT, "source", batch_rows):
        chunk = chunk.assign(item_key=[str(k) for k in chunk["item_key"]])
        yield chunk[chunk["item_key"].isin(wanted)]
