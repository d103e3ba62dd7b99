"""A new version stored from its row (:func:`sqlheads.compute.versions.version_row`), and
deployed in the same transaction when its policy said so: what ``train``, ``distill`` and the
sidecar's teacher job all do with the version they made."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pandas as pd

from sqlheads.compute.columns import TRAIN_OUTPUT
from sqlheads.store import server_versions
from sqlheads.store.deployments import deploy_replacing
from sqlheads.store.queue_drift import record_labelled_keys
from sqlheads.store.repository import EmbeddingSet, Encoder, Model, Store
from sqlheads.verbs import baselines
from sqlheads.verbs.deploy import rescorer


def record_version(
    store: Store,
    head: str,
    embedding_set: EmbeddingSet,
    set_encoder: Encoder,
    result: pd.Series,
    deployed: Model | None,
    extra: dict[str, Any],
    texts: list[Any] | None = None,
    labelled: list[str] | None = None,
) -> dict[str, Any]:
    """Store a trained or distilled version, deploy it if its policy said so; the summary.
    ``deployed`` is the version its policy was weighed against, ``extra`` the columns of
    ``models`` the row does not carry, ``texts`` the rows' (for the baseline's verdict),
    ``labelled`` the keys with gold labels it was trained or scored on (the label queue and
    drift leave them out)."""
    against_baseline = baselines.columns(result["metrics_json"])
    model = add_version(
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
            **extra,
        },
        result["deploy_reason"] if bool(result["deploy"]) else None,
        labelled or [],
    )
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
        "deployed": bool(result["deploy"]),
        "previous_deployed_macro_f1": round(deployed.macro_f1, 4) if deployed else None,
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
    deploy_reason: str | None,
    labelled_keys: Sequence[str] = (),
) -> Model:
    """Store a new version and, given a ``deploy_reason``, deploy it in the same transaction:
    a deploy that fails leaves no undeployed version behind, so a sidecar job's retries do not
    pile versions up. On SQL Server ``heads.add_version`` writes both, with the rights it
    carries (:mod:`sqlheads.store.server_versions`). The keys the version was trained and
    scored on (``labelled_keys``) are written with it."""
    if not store.is_sqlite:
        return server_versions.add_version(store, values, deploy_reason, labelled_keys)
    with store.engine.begin() as connection:
        model = store.add_model(values, connection)
        record_labelled_keys(connection, model.model_id, labelled_keys)
        if deploy_reason is not None:
            rescore = rescorer(store, model, bytes(values["blob"]))
            deploy_replacing(
                store, model.head, model.model_id, deploy_reason, rescore, connection=connection
            )
    return model
