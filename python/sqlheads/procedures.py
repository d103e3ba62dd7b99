"""One function per capability, with the ``sp_execute_external_script`` contract.

Each takes the input query's rows as a pandas DataFrame (``InputDataSet``) and scalar
parameters, and returns a DataFrame (``OutputDataSet``) whose columns are the ones the caller
writes into its tables. SQL Server's procedures call these functions inside the database; the
embedded host (:mod:`sqlheads.host`) calls the very same ones against SQLite. Nothing here
touches a database: the caller reads the input and writes the output, in its own transaction.

Vectors cross the boundary as little-endian float32 bytes (``VARBINARY``), models as ``.npz``
bytes, and everything structured as JSON text.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import asdict

import numpy as np
import pandas as pd

from sqlheads.engine.encoder import load_encoder
from sqlheads.engine.evaluation import classification_metrics, stratified_split
from sqlheads.engine.heads import HeadClassifier, HeadParams
from sqlheads.errors import (
    InvalidParameterError,
    MissingEmbeddingsError,
    QueryShapeError,
)
from sqlheads.store.vectors import pack_rows, unpack_rows

DEPLOY_POLICIES = ("if-better", "always", "never")

EMBED_INPUT = ("item_key", "text")  # plus, optionally, stored_sha256
EMBED_OUTPUT = ("item_key", "text_sha256", "vector", "windows", "reject_reason")
TRAIN_INPUT = ("item_key", "label", "vector")
TRAIN_OUTPUT = (
    "classes_json",
    "params_json",
    "metrics_json",
    "loss_curve_json",
    "accuracy",
    "macro_f1",
    "rows_train",
    "rows_test",
    "seconds",
    "blob",
    "sha256",
    "onnx",
    "deploy",
)
PREDICT_INPUT = ("item_key", "vector")
PREDICT_OUTPUT = ("item_key", "label", "score", "probabilities_json")


def _require_columns(frame: pd.DataFrame, needed: tuple[str, ...], what: str) -> None:
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise QueryShapeError(
            f"the {what} query must return columns {', '.join(needed)}; it is missing "
            f"{', '.join(missing)} (it returned: {', '.join(map(str, frame.columns)) or 'nothing'})"
            f": alias them, e.g. SELECT id AS item_key, ..."
        )


def _keys(series: pd.Series) -> list[str]:
    """Item keys as text, whatever type the source column had."""
    return [str(k) for k in series]


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------------------------


def embed(
    input_data: pd.DataFrame,
    *,
    encoder_sha256: str,
    long_text: str = "window",
    batch_size: int = 32,
    encoder_onnx: bytes | None = None,
    tokenizer_json: str | None = None,
    dim: int | None = None,
    max_length: int | None = None,
    threads: int | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> pd.DataFrame:
    """Vectors for the rows whose text changed; rejects for rows that cannot be embedded.

    Input: ``item_key``, ``text`` and, optionally, ``stored_sha256`` (the hash of the text
    already embedded for that key, NULL if none). A row whose text hashes to its
    ``stored_sha256`` is skipped. Output: one row per embedded or rejected input row; a
    rejected row has a NULL ``vector`` and a ``reject_reason``. The encoder is found in the
    cache by ``encoder_sha256``; its bytes need passing only when the cache lacks it.
    """
    _require_columns(input_data, EMBED_INPUT, "source")
    keys = _keys(input_data["item_key"])
    texts = input_data["text"].tolist()
    stored = (
        input_data["stored_sha256"].tolist()
        if "stored_sha256" in input_data.columns
        else [None] * len(keys)
    )
    rows_out: list[tuple] = []
    to_embed: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    for key, text, old_sha in zip(keys, texts, stored, strict=True):
        if key in seen:
            rows_out.append((key, None, None, None, "duplicate item_key in the source query"))
            continue
        seen.add(key)
        if text is None or (isinstance(text, float) and np.isnan(text)):
            rows_out.append((key, None, None, None, "text is NULL"))
            continue
        text = str(text)
        if not text.strip():
            rows_out.append((key, None, None, None, "text is empty"))
            continue
        sha = text_sha256(text)
        if sha != old_sha:
            to_embed.append((key, text, sha))
    if to_embed:
        encoder = load_encoder(
            encoder_sha256,
            onnx=encoder_onnx,
            tokenizer_json=tokenizer_json,
            dim=dim,
            max_length=max_length,
            threads=threads,
        )
        encoded = encoder.encode(
            [text for _, text, _ in to_embed],
            long_text=long_text,
            batch_size=batch_size,
            on_batch=on_progress,
        )
        for (key, _, sha), vector, windows in zip(
            to_embed, pack_rows(encoded.vectors), encoded.windows, strict=True
        ):
            rows_out.append((key, sha, vector, int(windows), None))
    return pd.DataFrame(rows_out, columns=list(EMBED_OUTPUT))


# ---------------------------------------------------------------------------------------------


def _check_policy(policy: str) -> None:
    if policy not in DEPLOY_POLICIES:
        raise InvalidParameterError(
            f"deploy policy {policy!r} is not one of {DEPLOY_POLICIES}: pass 'if-better', "
            "'always' or 'never'"
        )


def decide_deploy(policy: str, new_macro_f1: float, deployed_macro_f1: float | None) -> bool:
    """``if-better``: deploy when nothing is deployed or the new macro-F1 is strictly higher."""
    _check_policy(policy)
    if policy == "always":
        return True
    if policy == "never":
        return False
    return deployed_macro_f1 is None or new_macro_f1 > deployed_macro_f1


def train(
    input_data: pd.DataFrame,
    *,
    dim: int,
    recipe: str = HeadParams.recipe,
    hidden: int | None = None,
    epochs: int = HeadParams.epochs,
    lr: float = HeadParams.lr,
    weight_decay: float = HeadParams.weight_decay,
    batch_size: int | None = HeadParams.batch_size,
    dropout: float = HeadParams.dropout,
    test_fraction: float = 0.2,
    seed: int = 0,
    deploy: str = "if-better",
    deployed_macro_f1: float | None = None,
) -> pd.DataFrame:
    """Train a head on stored vectors; one output row describing the new version.

    Input: ``item_key``, ``label``, ``vector`` (NULL where the key has no embedding, which is
    refused with the count). The held-out split is stratified and fixed by ``seed``; metrics
    are computed on it, then the deploy policy is applied against ``deployed_macro_f1``.
    """
    started = time.perf_counter()
    _require_columns(input_data, TRAIN_INPUT, "labels")
    _check_policy(deploy)  # before the work, not after it
    params = HeadParams(
        recipe=recipe,
        hidden=hidden,
        epochs=epochs,
        lr=lr,
        weight_decay=weight_decay,
        batch_size=batch_size,
        dropout=dropout,
        seed=seed,
    ).validate()
    keys = _keys(input_data["item_key"])
    if len(keys) == 0:
        raise MissingEmbeddingsError(
            "the labels query returned no rows: check its WHERE clause and the set's keys"
        )
    duplicated = len(keys) - len(set(keys))
    if duplicated:
        raise InvalidParameterError(
            f"{duplicated} item_key(s) appear more than once in the labels query: "
            "give each key one label (e.g. SELECT DISTINCT or GROUP BY)"
        )
    labels = input_data["label"]
    empty = int(labels.isna().sum() + (labels.astype(str).str.strip() == "").sum())
    if empty:
        raise InvalidParameterError(
            f"{empty} label(s) are NULL or empty: filter them out of the labels query "
            "(WHERE label IS NOT NULL AND label <> '')"
        )
    vectors = input_data["vector"]
    missing = int(vectors.isna().sum())
    if missing:
        raise MissingEmbeddingsError(
            f"{missing} of {len(keys)} labelled key(s) have no embedding in the set: embed "
            "them first, or restrict the labels query to embedded keys"
        )
    X = unpack_rows(vectors.tolist(), dim)
    y = np.asarray([str(v) for v in labels])
    train_rows, test_rows = stratified_split(keys, y, test_fraction=test_fraction, seed=seed)
    head = HeadClassifier(params).fit(X[train_rows], y[train_rows])
    metrics = classification_metrics(y[test_rows], head.predict(X[test_rows]), head.classes_)
    blob = head.to_bytes()
    params_record = asdict(params) | {
        "hidden": params.hidden or int(head.weights_["w1"].shape[0]),
        "batch_size": head.batch_size_,
        "epochs_run": len(head.loss_curve_),
        "best_epoch": head.best_epoch_,
        "test_fraction": test_fraction,
        "dim": dim,
    }
    return pd.DataFrame(
        [
            {
                "classes_json": json.dumps(head.classes_),
                "params_json": json.dumps(params_record),
                "metrics_json": json.dumps(metrics),
                "loss_curve_json": json.dumps(head.loss_curve_),
                "accuracy": metrics["accuracy"],
                "macro_f1": metrics["macro_f1"],
                "rows_train": int(train_rows.sum()),
                "rows_test": int(test_rows.sum()),
                "seconds": time.perf_counter() - started,
                "blob": blob,
                "sha256": hashlib.sha256(blob).hexdigest(),
                "onnx": head.to_onnx(),
                "deploy": decide_deploy(deploy, metrics["macro_f1"], deployed_macro_f1),
            }
        ],
        columns=list(TRAIN_OUTPUT),
    )


# ---------------------------------------------------------------------------------------------

_heads: dict[str, HeadClassifier] = {}


def predict(input_data: pd.DataFrame, *, model_sha256: str, model_blob: bytes) -> pd.DataFrame:
    """Label, score (the top probability) and every class's probability, per input row.

    Input: ``item_key``, ``vector``. Rows with a NULL vector are skipped (nothing to score).
    """
    _require_columns(input_data, PREDICT_INPUT, "predict input")
    head = _heads.get(model_sha256)
    if head is None:
        actual = hashlib.sha256(model_blob).hexdigest()
        if actual != model_sha256:
            raise InvalidParameterError(
                f"model blob hashes to {actual[:12]}, not {model_sha256[:12]}: the stored "
                "model is corrupt; train a new version"
            )
        head = _heads[model_sha256] = HeadClassifier.from_bytes(model_blob)
    present = input_data["vector"].notna().to_numpy()
    rows = input_data[present]
    if rows.empty:
        return pd.DataFrame(columns=list(PREDICT_OUTPUT))
    probabilities = head.predict_proba(unpack_rows(rows["vector"].tolist(), head.n_features_in_))
    best = probabilities.argmax(axis=1)
    classes = np.asarray(head.classes_)
    encoded_names = [json.dumps(c) for c in head.classes_]
    return pd.DataFrame(
        {
            "item_key": _keys(rows["item_key"]),
            "label": classes[best],
            "score": probabilities[np.arange(len(best)), best].astype(float),
            "probabilities_json": [
                "{"
                + ", ".join(f"{n}: {p:.6f}" for n, p in zip(encoded_names, row, strict=True))
                + "}"
                for row in probabilities
            ],
        },
        columns=list(PREDICT_OUTPUT),
    )


# ---------------------------------------------------------------------------------------------
# SQL Server's door: the one function every ``@script`` in sql/ calls.

SQL_SERVER_VERBS: dict[str, tuple[Callable[..., pd.DataFrame], tuple[str, ...]]] = {
    "embed": (embed, EMBED_OUTPUT),
    "train": (train, TRAIN_OUTPUT),
    "predict": (predict, PREDICT_OUTPUT),
}


def sql_server_call(
    verb: str, input_data: pd.DataFrame, cache_dir: str | None = None, **params: object
) -> tuple[pd.DataFrame, int, str]:
    """Run ``verb`` for ``sp_execute_external_script``: ``(OutputDataSet, number, message)``.

    A :class:`~sqlheads.errors.SqlheadsError` does not escape into SQL Server (which would
    report every failure as error 39004 and lose its number): it comes back as output
    parameters, with an empty ``OutputDataSet`` of the verb's columns, so that the procedure
    can ``THROW`` the same number and message (and, on 50009, retry with the encoder's bytes).
    ``cache_dir`` points the encoder cache at a folder the server's sandbox may write.
    """
    import os

    from sqlheads.errors import SqlheadsError

    function, columns = SQL_SERVER_VERBS[verb]
    if cache_dir:
        os.environ["SQLHEADS_CACHE"] = cache_dir
    try:
        return function(input_data, **params), 0, ""
    except SqlheadsError as error:
        return pd.DataFrame(columns=list(columns)), error.number, error.message[:2000]
