"""A new version stored from its row (:func:`sqlheads.compute.versions.version_row`), and
deployed in the same transaction when its policy decides so against the version deployed at
that moment: what ``train``, ``distill`` and the sidecar's teacher job all do with the version
they made. The head's lock is held for this write alone, never for a training."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from sqlheads import settings
from sqlheads.compute.columns import TRAIN_OUTPUT
from sqlheads.compute.versions import VersionParams
from sqlheads.store import boundary, claims, server_versions
from sqlheads.store.deployments import deploy_replacing
from sqlheads.store.queue_drift import record_labelled_keys
from sqlheads.store.repository import HEAD_BUSY, EmbeddingSet, Model, Store
from sqlheads.verbs import baselines
from sqlheads.verbs.deploy import rescorer
from sqlheads.verbs.locks import LOCK_TIMEOUT_MS


@dataclass(frozen=True)
class Written:
    """A version just written, and the deploy decision made for it under the head's lock."""

    model: Model
    deployed: bool
    previous_macro_f1: float | None  # the version deployed when it was decided (None: none)


def record_version(
    store: Store,
    head: str,
    embedding_set: EmbeddingSet,
    result: pd.Series,
    version: VersionParams,
    *,
    extra: dict[str, Any] | None = None,
    texts: list[Any] | None = None,
    labelled: list[str] | None = None,
) -> dict[str, Any]:
    """Store a trained or distilled version of the set's encoder and deploy it if its
    ``version.deploy`` policy says so against the version deployed now, under the head's lock
    (:func:`add_version`, waiting ``version.lock_timeout_ms`` for it); the summary. ``extra``
    is the columns of ``models`` the row does not carry, ``texts`` the rows' (for the
    baseline's verdict), ``labelled`` the keys with gold labels it was trained or scored on
    (the label queue and drift leave them out)."""
    set_encoder = store.encoder(embedding_set.encoder_id)
    against_baseline = baselines.columns(result["metrics_json"])
    written = add_version(
        store,
        {
            "head": head,
            "set_id": embedding_set.set_id,
            "encoder_id": set_encoder.encoder_id,
            **{
                c: result[c]
                for c in TRAIN_OUTPUT
                if c not in ("deploy", "deploy_reason", "parameters")
            },
            "rows_train": int(result["rows_train"]),
            "rows_test": int(result["rows_test"]),
            "parameters": int(result["parameters"]),
            **against_baseline,
            **(extra or {}),
        },
        version.deploy,
        version.lock_timeout_ms,
        labelled or [],
    )
    model, previous = written.model, written.previous_macro_f1
    return {
        "head": head,
        "version": model.version,
        "model_id": model.model_id,
        "kind": model.kind,
        "set": embedding_set.name,
        "encoder": set_encoder.name,
        "classes": json.loads(result["classes_json"]),
        "accuracy": round(float(result["accuracy"]), 4),
        "macro_f1": round(float(result["macro_f1"]), 4),
        "rows_train": int(result["rows_train"]),
        "rows_test": int(result["rows_test"]),
        "parameters": int(result["parameters"]),
        "deployed": written.deployed,
        "previous_deployed_macro_f1": round(previous, 4) if previous is not None else None,
        "params": json.loads(result["params_json"]),
        "seconds": round(float(result["seconds"]), 3),
        **baselines.summary(
            against_baseline,
            float(result["accuracy"]),
            texts,
            baselines.tokenizer_of(store, set_encoder),
        ),
    }


def add_version(
    store: Store,
    values: dict[str, Any],
    deploy: str,
    lock_timeout_ms: int = LOCK_TIMEOUT_MS,
    labelled_keys: Sequence[str] = (),
) -> Written:
    """Store a new version and deploy it if ``deploy`` (the policy) decides so against the
    version deployed now, in one transaction under the head's Exclusive lock, as
    ``heads.add_version`` does on SQL Server (and there by that procedure, which takes the lock
    itself, waiting heads.settings' lock_timeout_ms; on SQLite the same work stands for that
    procedure, with its scope for a sidecar's job): the lock is held for the write alone,
    never for a training (``lock_timeout_ms``: how long to wait for it), and a deploy that
    fails leaves no undeployed version behind, so a sidecar job's retries do not pile
    versions up. The keys the version was trained and scored on (``labelled_keys``) are
    written with it. ``deploy`` is a canonical policy (a parameter object's)."""
    if not store.is_sqlite:
        return Written(*server_versions.add_version(store, values, deploy, labelled_keys))
    head = values["head"]
    with (
        store.lock("head", head, lock_timeout_ms, HEAD_BUSY),
        store.engine.begin() as connection,
        boundary.procedure("heads.add_version"),
    ):
        if store.claim is not None:  # a sidecar's: its job's head, set and policy (50072)
            deploy = settings.choice(
                "deploy", claims.check_version(connection, store.claim, values)
            )
        deployed = store.deployed_model(head)
        previous = deployed.macro_f1 if deployed else None
        decided = settings.decide_deploy(deploy, float(values["macro_f1"]), previous)
        model = store.add_model(values, connection)
        record_labelled_keys(connection, model.model_id, labelled_keys)
        if decided:
            rescore = rescorer(store, model, bytes(values["blob"]))
            deploy_replacing(
                store,
                head,
                model.model_id,
                settings.deploy_reason(deploy),
                rescore,
                connection=connection,
            )
    return Written(model, decided, previous)
