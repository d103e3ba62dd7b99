"""The row a new version is written from, as ``train``, ``distill`` and the sidecar's teacher
produce it, and the TF-IDF baseline every version is measured against.

The row's columns are :data:`~sqlheads.compute.columns.TRAIN_OUTPUT` (``distill`` adds two),
which T-SQL's ``heads.write_version`` reads on SQL Server and
:func:`sqlheads.verbs.versions.record_version` on the embedded host.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

import numpy as np
import pandas as pd

from sqlheads.engine import baseline
from sqlheads.settings import decide_deploy, deploy_reason


def version_row(
    *,
    kind: str,
    classes: list[str],
    params: dict[str, Any],
    metrics: dict[str, Any],
    loss_curve: list[float],
    rows_train: int,
    rows_test: int,
    started: float,
    blob: bytes,
    onnx: bytes | None,
    parameters: int,
    deploy: str,
    deployed_macro_f1: float | None,
) -> dict[str, Any]:
    """A version's row: what it is, how it scored, its bytes, and whether ``deploy`` (the
    policy) deploys it against the deployed version's macro-F1. ``started`` is the
    ``time.perf_counter()`` its work began at."""
    return {
        "classes_json": json.dumps(classes),
        "params_json": json.dumps(params),
        "metrics_json": json.dumps(metrics),
        "loss_curve_json": json.dumps(loss_curve),
        "accuracy": metrics["accuracy"],
        "macro_f1": metrics["macro_f1"],
        "rows_train": rows_train,
        "rows_test": rows_test,
        "seconds": time.perf_counter() - started,
        "blob": blob,
        "sha256": hashlib.sha256(blob).hexdigest(),
        "onnx": onnx,
        "deploy": decide_deploy(deploy, metrics["macro_f1"], deployed_macro_f1),
        "deploy_reason": deploy_reason(deploy),
        "kind": kind,
        "parameters": parameters,
    }


def baseline_metrics(
    frame: pd.DataFrame,
    labels: np.ndarray,
    train_rows: np.ndarray,
    test_rows: np.ndarray,
    classes: list[str],
    no_text: str,
) -> dict[str, Any]:
    """The TF-IDF baseline on a version's own rows, when the input carries the rows' text;
    skipped, saying ``no_text``, when it does not."""
    texts = frame["text"].tolist() if "text" in frame.columns else None
    return baseline.baseline_for(
        texts, labels, train_rows, test_rows, classes, no_text
    ).as_metrics()
