"""The row a new version is written from, as ``train``, ``distill`` and the sidecar's teacher
produce it, how it is judged and written (:class:`VersionParams`), and the TF-IDF baseline every
version is measured against.

The row's columns are :data:`~sqlheads.compute.columns.TRAIN_OUTPUT` (``distill`` adds two),
which T-SQL's ``heads.write_version`` reads on SQL Server and
:func:`sqlheads.verbs.versions.record_version` on the embedded host.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sqlheads import settings
from sqlheads.engine import baseline
from sqlheads.engine.constraints import Interval, Params, param
from sqlheads.settings import decide_deploy, deploy_reason


@dataclass(frozen=True)
class VersionParams(Params):
    """How a new version is judged and written, by ``train``, ``distill`` and the teacher job
    alike: the share of its labelled rows held out for its metrics (stratified, fixed by the
    seed), whether it is deployed (``deploy``: :data:`settings.DEPLOY_POLICIES`), and how long
    its write waits for another session's lock on the head (SQL Server's procedures wait
    ``heads.settings``' instead)."""

    test_fraction: float = param(settings.TEST_FRACTION, Interval(float, 0, 1, "neither"))
    deploy: str = param(settings.DEFAULT_DEPLOY, settings.option("deploy"))
    lock_timeout_ms: int = param(
        settings.default("lock_timeout_ms"), settings.bounds("lock_timeout_ms")
    )


@dataclass(frozen=True)
class Fitted:
    """A fitted model as its version's row records it."""

    kind: str
    classes: list[str]
    params: dict[str, Any]  # what it was fitted with: params_json
    metrics: dict[str, Any]
    loss_curve: list[float]
    rows_train: int
    rows_test: int
    blob: bytes
    onnx: bytes | None
    parameters: int  # its trainable numbers


def version_row(
    fitted: Fitted, *, started: float, deploy: str, deployed_macro_f1: float | None
) -> dict[str, Any]:
    """A version's row: what it is, how it scored, its bytes, and whether ``deploy`` (the
    policy) deploys it against the deployed version's macro-F1. ``started`` is the
    ``time.perf_counter()`` its work began at."""
    metrics = fitted.metrics
    return {
        "classes_json": json.dumps(fitted.classes),
        "params_json": json.dumps(fitted.params),
        "metrics_json": json.dumps(metrics),
        "loss_curve_json": json.dumps(fitted.loss_curve),
        "accuracy": metrics["accuracy"],
        "macro_f1": metrics["macro_f1"],
        "rows_train": fitted.rows_train,
        "rows_test": fitted.rows_test,
        "seconds": time.perf_counter() - started,
        "blob": fitted.blob,
        "sha256": hashlib.sha256(fitted.blob).hexdigest(),
        "onnx": fitted.onnx,
        "deploy": decide_deploy(deploy, metrics["macro_f1"], deployed_macro_f1),
        "deploy_reason": deploy_reason(deploy),
        "kind": fitted.kind,
        "parameters": fitted.parameters,
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
