"""How a deploy scores the rows the versions it replaces had scored (issue 20, point 1).

A head scores the set's stored vectors (about 290k rows/s), a text model the rows' text through
the set's last source query; the store writes the result in the deploy's own transaction
(:mod:`sqlheads.store.deployments`). A text model whose set has no known source, or a head
trained on another encoder's vectors, cannot score the set here: ``None``, and the earlier
predictions stay until ``predict`` runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd

from sqlheads import caller_rows, procedures, settings
from sqlheads.engine.kinds import model_kind
from sqlheads.errors import StoredQueryOwnerError
from sqlheads.store import server_versions
from sqlheads.store.deployments import DeployOutcome, Rescore, deploy_replacing
from sqlheads.store.repository import HEAD_BUSY, EmbeddingSet, Model, Store

LOCK_TIMEOUT_MS = int(settings.SETTINGS["lock_timeout_ms"].default)  # as heads.* wait


@dataclass(frozen=True)
class Written:
    """A version just written, and the deploy decision made for it under the head's lock."""

    model: Model
    deployed: bool
    previous_macro_f1: float | None  # the version deployed when it was decided (None: none)


def add_version(
    store: Store, values: dict[str, Any], deploy: str, lock_timeout_ms: int = LOCK_TIMEOUT_MS
) -> Written:
    """Store a new version and deploy it if ``deploy`` (the policy) decides so against the
    version deployed now, in one transaction under the head's Exclusive lock, as
    ``heads.add_version`` does on SQL Server (and there by that procedure, which takes the lock
    itself, waiting heads.settings' lock_timeout_ms): the lock is held for the write alone,
    never for a training (``lock_timeout_ms``: how long to wait for it), and a deploy that
    fails leaves no undeployed version behind, so a sidecar job's retries do not pile
    versions up."""
    deploy = settings.choice("deploy", deploy)
    if not store.is_sqlite:
        return Written(*server_versions.add_version(store, values, deploy))
    head = values["head"]
    with (
        store.lock("head", head, lock_timeout_ms, HEAD_BUSY),
        store.engine.begin() as connection,
    ):
        deployed = store.deployed_model(head)
        previous = deployed.macro_f1 if deployed else None
        decided = settings.decide_deploy(deploy, float(values["macro_f1"]), previous)
        model = store.add_model(values, connection)
        if decided:
            rescore = _rescorer(store, model, bytes(values["blob"]))
            deploy_replacing(
                store,
                head,
                model.model_id,
                settings.deploy_reason(deploy),
                rescore,
                connection=connection,
            )
    return Written(model, decided, previous)


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
