"""``train``: a head fitted on stored vectors, as one row describing the new version."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from sqlheads.compute.columns import (
    TRAIN_INPUT,
    TRAIN_OUTPUT,
    in_key_order,
    no_labelled_rows,
    refuse_unnamable_classes,
    require_columns,
)
from sqlheads.compute.versions import Fitted, VersionParams, baseline_metrics, version_row
from sqlheads.engine import baseline, kinds
from sqlheads.engine.constraints import FLAG, Params, Text, param
from sqlheads.engine.evaluation import classification_metrics, stratified_split
from sqlheads.engine.heads import HeadClassifier, HeadParams
from sqlheads.engine.loop import drift
from sqlheads.engine.progress import Progress
from sqlheads.errors import InvalidParameterError, MissingEmbeddingsError
from sqlheads.store.vectors import unpack_rows


@dataclass(frozen=True)
class TrainParams(Params):
    """One ``train``'s parameters, as a door builds them: the head's hyper-parameters, how the
    version is judged and written, and which encoder its set must have (``encoder``: refuse
    another; ``allow_encoder_change``: accept one other than the head's earlier versions')."""

    head_params: HeadParams = param(factory=HeadParams)
    version: VersionParams = param(factory=VersionParams)
    encoder: str | None = param(None, Text("an encoder's name"), None)
    allow_encoder_change: bool = param(False, FLAG)


def train(
    input_data: pd.DataFrame,
    *,
    params: TrainParams,
    dim: int,
    deployed_macro_f1: float | None = None,
    no_text: str = baseline.NO_TEXT,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """Train a head of ``params.head_params`` on stored vectors; one output row describing the
    new version.

    Input: ``item_key``, ``label``, ``vector`` (NULL where the key has no embedding, which is
    refused with the count). The held-out split is stratified and fixed by the head's seed;
    metrics are computed on it, then the deploy policy is applied against
    ``deployed_macro_f1``. ``progress`` hears of each epoch. With a ``text`` column the TF-IDF
    baseline is fitted on the same rows (``metrics_json``'s ``baseline``); without one it is
    skipped, saying ``no_text``. The rows are put in key order first and every figure is
    made from that one frame: the same rows in any order give the same version.
    """
    started = time.perf_counter()
    require_columns(input_data, TRAIN_INPUT, "labels")
    test_fraction = params.version.test_fraction
    head_params = params.head_params
    input_data = in_key_order(input_data, "labels")  # the one frame every consumer reads
    keys, X, y = _labelled_vectors(input_data, dim)
    train_rows, test_rows = stratified_split(
        keys, y, test_fraction=test_fraction, seed=head_params.seed
    )
    head = HeadClassifier(head_params).fit(X[train_rows], y[train_rows], progress=progress)
    metrics = classification_metrics(y[test_rows], head.predict(X[test_rows]), head.classes_)
    metrics["baseline"] = baseline_metrics(
        input_data, y, train_rows, test_rows, head.classes_, no_text
    )
    metrics["drift"] = drift.reference(
        head.classes_, y[train_rows], head.predict_proba(X[test_rows]), X[train_rows], X[test_rows]
    )
    params_record = asdict(head_params) | {
        "hidden": head_params.hidden or int(head.weights_["w1"].shape[0]),
        "recipe": head.recipe_,
        "batch_size": head.batch_size_,
        "epochs_run": len(head.loss_curve_),
        "best_epoch": head.best_epoch_,
        "test_fraction": test_fraction,
        "dim": dim,
    }
    fitted = Fitted(
        kind="head",
        classes=head.classes_,
        params=params_record,
        metrics=metrics,
        loss_curve=head.loss_curve_,
        rows_train=int(train_rows.sum()),
        rows_test=int(test_rows.sum()),
        blob=head.to_bytes(),
        onnx=head.to_onnx(),
        parameters=kinds.parameter_count(head),
    )
    row = version_row(
        fitted,
        started=started,
        deploy=params.version.deploy,
        deployed_macro_f1=deployed_macro_f1,
    )
    return pd.DataFrame([row], columns=list(TRAIN_OUTPUT))


def _labelled_vectors(
    input_data: pd.DataFrame, dim: int
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The keys, vectors and labels to train on, in the rows' order (:func:`in_key_order`'s);
    refused whole if a row lacks one."""
    keys = input_data["item_key"].tolist()
    if len(keys) == 0:
        raise no_labelled_rows()
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
    y = np.asarray([str(v) for v in labels])
    refuse_unnamable_classes(y)
    return keys, unpack_rows(vectors.tolist(), dim), y
