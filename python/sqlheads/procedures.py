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
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from sqlheads.class_names import refuse_unnamable_classes
from sqlheads.engine import baseline, kinds
from sqlheads.engine.distillation import DistillParams
from sqlheads.engine.encoder import load_encoder
from sqlheads.engine.evaluation import classification_metrics, stratified_split
from sqlheads.engine.heads import HeadClassifier, HeadParams
from sqlheads.errors import (
    ClassMismatchError,
    HeldOutLeakError,
    InvalidParameterError,
    MissingEmbeddingsError,
    MissingTextError,
    QueryShapeError,
    SqlheadsError,
)
from sqlheads.settings import (
    DEFAULT_DEPLOY,
    TEST_FRACTION,
    choice,
    decide_deploy,
    deploy_reason,
)
from sqlheads.sqlserver import RESULT_TYPES, server_cache_dir, sql_server_parameters, typed_frame
from sqlheads.store.keys import (
    KEYLESS,
    check_key_lengths,
    item_key_text,
    key_problem,
    required_keys,
)
from sqlheads.store.vectors import pack_rows, unpack_rows

EMBED_INPUT = ("item_key", "text")  # plus, optionally, stored_sha256
EMBED_OUTPUT = tuple(RESULT_TYPES["embed"])
TRAIN_INPUT = ("item_key", "label", "vector")
TRAIN_OUTPUT = tuple(RESULT_TYPES["train"])
DUPLICATE_KEY = "duplicate item_key in the source query"
DISTILL_INPUT = ("item_key", "label", "logits")  # + the kind's input; optionally in_transfer
DISTILL_OUTPUT = tuple(RESULT_TYPES["distill"])
PREDICT_INPUT = ("item_key", "vector")  # "text" instead of "vector" for a text model
PREDICT_OUTPUT = tuple(RESULT_TYPES["predict"])


def _require_columns(frame: pd.DataFrame, needed: tuple[str, ...], what: str) -> None:
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise QueryShapeError(
            f"the {what} query must return columns {', '.join(needed)}; it is missing "
            f"{', '.join(missing)} (it returned: {', '.join(map(str, frame.columns)) or 'nothing'})"
            f": alias them, e.g. SELECT id AS item_key, ..."
        )


def refuse_duplicate_keys(keys: list[str]) -> None:
    duplicated = len(keys) - len(set(keys))
    if duplicated:
        raise InvalidParameterError(
            f"{duplicated} item_key(s) appear more than once in the labels query: "
            "give each key one label (e.g. SELECT DISTINCT or GROUP BY)"
        )


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
    encoder: Any | None = None,
) -> pd.DataFrame:
    """Vectors for the rows whose text changed; rejects for rows that cannot be embedded.

    Input: ``item_key``, ``text`` and, optionally, ``stored_sha256`` (the hash of the text
    already embedded for that key, NULL if none). A row whose text hashes to its
    ``stored_sha256`` is skipped. A key that appears more than once is rejected as a whole
    (the caller sends every copy of a key in one call). Output: one row per embedded or
    rejected key; a rejected row has a NULL ``vector`` and a ``reject_reason``. The encoder
    is found in the cache by ``encoder_sha256``; its bytes need passing only when the cache
    lacks it. ``encoder`` (the sidecar's PyTorch encoder of the same model, with
    ``OnnxEncoder.encode``'s signature) replaces the cached ONNX graph when given.
    """
    _require_columns(input_data, EMBED_INPUT, "source")
    long_text = choice("long_text", long_text)
    keys = [item_key_text(k) for k in input_data["item_key"]]
    texts = input_data["text"].tolist()
    stored = (
        input_data["stored_sha256"].tolist()
        if "stored_sha256" in input_data.columns
        else [None] * len(keys)
    )
    rows_out: list[tuple] = []
    to_embed: list[tuple[str, str, str]] = []
    # A NULL or empty key has no row of its own to be stored under: every such row is one
    # reject under the KEYLESS key (as heads.embed does), and takes no part in duplicates.
    keyless = sorted({p for p in map(key_problem, keys) if p is not None})
    if keyless:
        rows_out.append((KEYLESS, None, None, None, keyless[0]))
    check_key_lengths(keys, "source")
    # A key given more than once is rejected whole, every copy, on every run: which copy is
    # "first" is not defined in SQL, and keeping any one of them flips between runs.
    duplicated = {key for key, n in Counter(keys).items() if n > 1 and not key_problem(key)}
    for key in sorted(duplicated):  # one reject row per key
        rows_out.append((key, None, None, None, DUPLICATE_KEY))
    for key, text, old_sha in zip(keys, texts, stored, strict=True):
        if key in duplicated or key_problem(key):
            continue
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
        encoder = encoder or load_encoder(
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
    test_fraction: float = TEST_FRACTION,
    seed: int = 0,
    deploy: str = DEFAULT_DEPLOY,
    deployed_macro_f1: float | None = None,
    on_epoch: Callable[[int], None] | None = None,
    no_text: str = baseline.NO_TEXT,
) -> pd.DataFrame:
    """Train a head on stored vectors; one output row describing the new version.

    Input: ``item_key``, ``label``, ``vector`` (NULL where the key has no embedding, which is
    refused with the count). The held-out split is stratified and fixed by ``seed``; metrics
    are computed on it, then the deploy policy is applied against ``deployed_macro_f1``.
    ``on_epoch`` is called after each epoch with the number of epochs. With a ``text`` column
    the TF-IDF baseline is fitted on the same rows (``metrics_json``'s ``baseline``); without
    one it is skipped, saying ``no_text``.
    """
    started = time.perf_counter()
    _require_columns(input_data, TRAIN_INPUT, "labels")
    deploy = choice("deploy", deploy)  # before the work, not after it
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
    keys = required_keys(input_data["item_key"], "labels")
    if len(keys) == 0:
        raise MissingEmbeddingsError(
            "the labels query returned no rows: check its WHERE clause and the set's keys"
        )
    refuse_duplicate_keys(keys)
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
    refuse_unnamable_classes(y)
    train_rows, test_rows = stratified_split(keys, y, test_fraction=test_fraction, seed=seed)
    head = HeadClassifier(params).fit(X[train_rows], y[train_rows], on_epoch=on_epoch)
    metrics = classification_metrics(y[test_rows], head.predict(X[test_rows]), head.classes_)
    metrics["baseline"] = _baseline(input_data, y, train_rows, test_rows, head.classes_, no_text)
    blob = head.to_bytes()
    params_record = asdict(params) | {
        "hidden": params.hidden or int(head.weights_["w1"].shape[0]),
        "recipe": head.recipe_,
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
                "deploy_reason": deploy_reason(deploy),
                "kind": "head",
                "parameters": kinds.parameter_count(head),
            }
        ],
        columns=list(TRAIN_OUTPUT),
    )


def _baseline(
    frame: pd.DataFrame,
    labels: np.ndarray,
    train_rows: np.ndarray,
    test_rows: np.ndarray,
    classes: list[str],
    no_text: str,
) -> dict[str, Any]:
    """The TF-IDF baseline on a version's own rows, when the input carries the rows' text."""
    texts = frame["text"].tolist() if "text" in frame.columns else None
    return baseline.baseline_for(
        texts, labels, train_rows, test_rows, classes, no_text
    ).as_metrics()


SOFT_LABELS_INPUT = ("item_key", "row_json")
SOFT_LABELS_OUTPUT = tuple(RESULT_TYPES["soft_labels"])


def soft_labels_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """A caller's soft labels (``item_key`` and one numeric column per class, named after the
    class) as ``item_key``, ``logits`` (float32 bytes) and ``classes_json`` (their order)."""
    classes = [str(c) for c in frame.columns if c != "item_key"]
    if "item_key" not in frame.columns or len(classes) < 2:
        raise QueryShapeError(
            "the soft labels query must return item_key and one logit column per class, named "
            f"after the class (it returned {', '.join(map(str, frame.columns))}): e.g. SELECT "
            "item_key, logit_0 AS negative, logit_1 AS positive FROM teacher_logits"
        )
    if frame.empty:
        raise QueryShapeError("the soft labels query returned no rows: check its WHERE clause")
    try:
        logits = frame[classes].apply(pd.to_numeric).to_numpy(dtype=np.float32)
    except (TypeError, ValueError):
        raise QueryShapeError(
            "the soft labels query returned non-numeric logits: return one number per class"
        ) from None
    if np.isnan(logits).any():
        raise InvalidParameterError(
            f"{int(np.isnan(logits).any(axis=1).sum())} soft-label row(s) hold NULL logits: "
            "filter them out (WHERE ... IS NOT NULL)"
        )
    keys = required_keys(frame["item_key"], "soft labels")
    duplicated = len(keys) - len(set(keys))
    if duplicated:
        raise InvalidParameterError(
            f"{duplicated} item_key(s) appear more than once in the soft labels query: give "
            "each key one row of logits"
        )
    return pd.DataFrame(
        {"item_key": keys, "logits": pack_rows(logits), "classes_json": json.dumps(classes)},
        columns=list(SOFT_LABELS_OUTPUT),
    )


def _flat_json(row: dict, prefix: str = "") -> dict:
    """``FOR JSON PATH`` nests a column named ``very.good`` as ``{"very": {"good": ...}}``;
    the dotted name is the class, so the path is joined back (issue 19, point 6)."""
    flat: dict = {}
    for name, value in row.items():
        if isinstance(value, dict):
            flat.update(_flat_json(value, f"{prefix}{name}."))
        else:
            flat[f"{prefix}{name}"] = value
    return flat


def soft_labels(input_data: pd.DataFrame) -> pd.DataFrame:
    """SQL Server's door to :func:`soft_labels_frame`: each row arrives as JSON (``FOR JSON``
    keeps the caller's column order and leaves out NULLs, which are refused as such)."""
    _require_columns(input_data, SOFT_LABELS_INPUT, "soft labels")
    rows = [_flat_json(json.loads(text)) for text in input_data["row_json"]]
    columns = list(dict.fromkeys(name for row in rows for name in row))
    return soft_labels_frame(pd.DataFrame(rows, columns=columns))


def distill(
    input_data: pd.DataFrame,
    *,
    teacher_classes_json: str,
    student: str = kinds.DEFAULT_STUDENT,
    dim: int | None = None,
    tokenizer_json: str | None = None,
    encoder_onnx: bytes | None = None,
    temperature: float = DistillParams.temperature,
    gold_weight: float = DistillParams.gold_weight,
    epochs: int | None = None,
    lr: float | None = None,
    batch_size: int = DistillParams.batch_size,
    hidden: int | None = None,
    test_fraction: float = TEST_FRACTION,
    seed: int = 0,
    deploy: str = DEFAULT_DEPLOY,
    deployed_macro_f1: float | None = None,
    threads: int | None = None,
    student_model: str | None = None,
    max_length: int | None = None,
    max_steps: int | None = None,
    device: str = "auto",
    work_dir: str | None = None,
    no_text: str = baseline.NO_TEXT,
    on_progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """Distil a teacher's soft labels into a student of kind ``student``; one output row.

    Input, one row per key: ``item_key``; ``label`` (gold, NULL for rows only the teacher
    labelled); ``logits`` (the teacher's, float32 bytes in ``teacher_classes_json`` order, NULL
    where it has none); the student's input (``text`` for a word student, ``vector`` for a head
    student); optionally ``in_transfer`` (1 for the rows the caller wants distilled on). The
    held-out split is the one ``train`` makes from the same labels and seed; no held-out row is
    distilled on, and one named in ``in_transfer`` is refused. An encoder student fine-tunes
    ``student_model`` (default MiniLM) on ``device`` with ``max_length`` tokens per text,
    stopping after ``max_steps`` optimiser steps if given and checkpointing in ``work_dir``.
    ``on_progress(done, total)`` hears of the run in the kind's ``progress_unit``: epochs (word
    and head students), optimiser steps (encoder) or L-BFGS iterations (tfidf).
    """
    started = time.perf_counter()
    kind = kinds.student_kind(student)
    deploy = choice("deploy", deploy)  # as train reads it: case and blanks ignored
    distill_params = kind.distill_params(
        DistillParams(
            temperature=temperature,
            gold_weight=gold_weight,
            epochs=epochs,
            lr=lr,
            batch_size=batch_size,
            seed=seed,
        )
    ).validate()
    _require_columns(input_data, DISTILL_INPUT + (kind.reads,), "distill input")
    keys = required_keys(input_data["item_key"], "labels")
    refuse_duplicate_keys(keys)
    teacher_classes = [str(c) for c in json.loads(teacher_classes_json)]
    labelled = present(input_data["label"], "text")
    gold_labels = np.asarray([str(v) for v in input_data["label"]], dtype=object)
    classes = sorted(set(gold_labels[labelled].tolist()))
    refuse_unnamable_classes(classes)
    if classes != sorted(teacher_classes):
        raise ClassMismatchError(
            f"the soft labels have classes {sorted(teacher_classes)} but the gold labels have "
            f"{classes}: name the soft-label columns after the label values (e.g. SELECT "
            "item_key, logit_0 AS negative, logit_1 AS positive ...)"
        )
    if not labelled.any():
        raise MissingEmbeddingsError("the labels query returned no rows: check its WHERE clause")
    train_labelled, test_labelled = stratified_split(
        np.asarray(keys, dtype=object)[labelled],
        gold_labels[labelled],
        test_fraction=test_fraction,
        seed=seed,
    )
    held_out = np.zeros(len(keys), dtype=bool)
    held_out[np.flatnonzero(labelled)[test_labelled]] = True
    logits = np.full((len(keys), len(classes)), np.nan, dtype=np.float32)
    has_logits = input_data["logits"].notna().to_numpy()
    if has_logits.any():
        order = [teacher_classes.index(c) for c in classes]
        logits[has_logits] = unpack_rows(
            input_data["logits"][has_logits].tolist(), len(teacher_classes)
        )[:, order]
    # in_transfer: absent, or all NULL (SQL Server's door when no transfer query was given)
    if "in_transfer" in input_data.columns and input_data["in_transfer"].notna().any():
        chosen = input_data["in_transfer"].fillna(0).astype(bool).to_numpy()
        leaked = chosen & held_out
        if leaked.any():
            example = np.asarray(keys, dtype=object)[leaked][0]
            raise HeldOutLeakError(
                f"{int(leaked.sum())} row(s) of the transfer query are held out for the "
                f"metrics (e.g. {example!r}): distilling on them would score the student on "
                "rows it learnt; remove them from the transfer query"
            )
        distilled = chosen | (labelled & ~held_out)
    else:
        distilled = (labelled | has_logits) & ~held_out
    if distill_params.gold_weight == 0:
        distilled &= has_logits  # with no gold term, a row without soft labels teaches nothing
    has_input = present(input_data[kind.reads], kind.reads)
    lacking = labelled & ~has_input
    if lacking.any():
        what = "text" if kind.reads == "text" else "embedding"
        error = MissingTextError if kind.reads == "text" else MissingEmbeddingsError
        raise error(
            f"{int(lacking.sum())} labelled key(s) have no {what} (e.g. "
            f"{np.asarray(keys, dtype=object)[lacking][0]!r}): "
            + (
                "make the source query return their text"
                if kind.reads == "text"
                else "embed them first, or restrict the labels query to embedded keys"
            )
        )
    without_input = distilled & ~has_input
    distilled &= has_input
    class_index = {c: i for i, c in enumerate(classes)}
    gold = np.array(
        [class_index[g] if ok else -1 for g, ok in zip(gold_labels, labelled, strict=True)]
    )
    values = input_data[kind.reads]
    train_rows, test_rows = np.flatnonzero(distilled), np.flatnonzero(held_out)
    if kind.reads == "text":
        texts = [str(v) for v in values]
        train_inputs, test_inputs = [texts[i] for i in train_rows], [texts[i] for i in test_rows]
    else:
        if dim is None:
            raise InvalidParameterError("a head student needs the set's vector dimension: pass dim")
        X = np.zeros((len(keys), dim), dtype=np.float32)
        X[has_input] = unpack_rows(values[has_input].tolist(), dim)
        train_inputs, test_inputs = X[train_rows], X[test_rows]
    options = kinds.StudentOptions(
        distill=distill_params,
        batch_size=batch_size,
        seed=seed,
        hidden=hidden,
        tokenizer_json=tokenizer_json,
        encoder_onnx=encoder_onnx,
        threads=threads,
        student_model=student_model,
        max_length=max_length,
        max_steps=max_steps,
        device=device,
        work_dir=None if work_dir is None else Path(work_dir),
        on_progress=on_progress,
    )
    model = kind.distil(train_inputs, classes, logits[train_rows], gold[train_rows], options)
    predicted = np.asarray(classes)[model.predict_proba(test_inputs).argmax(axis=1)]
    truth = gold_labels[test_rows].astype(str)
    metrics = classification_metrics(truth, predicted, classes)
    gold_only = np.where(labelled, gold_labels, None)  # the baseline learns from gold labels
    metrics["baseline"] = _baseline(input_data, gold_only, train_rows, test_rows, classes, no_text)
    teacher_known = has_logits[test_rows]
    teacher_accuracy = (
        float(
            np.mean(
                np.asarray(classes)[logits[test_rows][teacher_known].argmax(axis=1)]
                == truth[teacher_known]
            )
        )
        if teacher_known.any()
        else None
    )
    metrics["teacher_accuracy"] = teacher_accuracy
    metrics["teacher_rows_test"] = int(teacher_known.sum())
    for check in ("parity_max_abs_diff", "int8_max_abs_diff", "int8_agreement", "quantization"):
        if getattr(model, f"{check}_", None) is not None:  # the export checks a student passed
            metrics[check] = getattr(model, f"{check}_")
    blob = model.to_bytes()
    params_record = {
        "student": student,
        **(
            asdict(model.params)
            if kind.reads == "text"
            else {"hidden": int(model.weights_["w1"].shape[0])}
        ),
        **asdict(distill_params),
        "test_fraction": test_fraction,
        "dim": dim,
    }
    return pd.DataFrame(
        [
            {
                "classes_json": json.dumps(classes),
                "params_json": json.dumps(params_record),
                "metrics_json": json.dumps(metrics),
                "loss_curve_json": json.dumps(model.loss_curve_),
                "accuracy": metrics["accuracy"],
                "macro_f1": metrics["macro_f1"],
                "rows_train": len(train_rows),
                "rows_test": len(test_rows),
                "seconds": time.perf_counter() - started,
                "blob": blob,
                "sha256": hashlib.sha256(blob).hexdigest(),
                "onnx": model.to_onnx(),
                "deploy": decide_deploy(deploy, metrics["macro_f1"], deployed_macro_f1),
                "deploy_reason": deploy_reason(deploy),
                "kind": kind.name,
                "parameters": kinds.parameter_count(model),
                "teacher_accuracy": teacher_accuracy,
                "rows_without_input": int(without_input.sum()),
            }
        ],
        columns=list(DISTILL_OUTPUT),
    )


# ---------------------------------------------------------------------------------------------

_models: dict[str, kinds.Scorer] = {}


def present(values: pd.Series, reads: str) -> np.ndarray:
    """Rows that hold an input: a vector, or a text that is not NULL or blank."""
    present = values.notna().to_numpy(copy=True)
    if reads == "text":
        present &= np.array([bool(str(v).strip()) for v in values], dtype=bool)
    return present


def _model_inputs(values: pd.Series, reads: str, model: kinds.Scorer):
    if reads == "text":
        return [str(v) for v in values]
    return unpack_rows(values.tolist(), model.n_features_in_)


def predict(
    input_data: pd.DataFrame, *, model_sha256: str, model_blob: bytes, kind: str = "head"
) -> pd.DataFrame:
    """Label, score (the top probability) and every class's probability, per input row.

    Input: ``item_key`` and the kind's input: ``vector`` for heads, ``text`` for text models
    (see :mod:`sqlheads.engine.kinds`). Rows without one (NULL, or blank text) are skipped.
    """
    model_kind = kinds.model_kind(kind)
    _require_columns(input_data, ("item_key", model_kind.reads), "predict input")
    model = _models.get(model_sha256)
    if model is None:
        actual = hashlib.sha256(model_blob).hexdigest()
        if actual != model_sha256:
            raise InvalidParameterError(
                f"model blob hashes to {actual[:12]}, not {model_sha256[:12]}: the stored "
                "model is corrupt; train a new version"
            )
        model = _models[model_sha256] = model_kind.load(model_blob)
    rows = input_data[present(input_data[model_kind.reads], model_kind.reads)]
    if rows.empty:
        return pd.DataFrame(columns=list(PREDICT_OUTPUT))
    probabilities = model.predict_proba(
        _model_inputs(rows[model_kind.reads], model_kind.reads, model)
    )
    best = probabilities.argmax(axis=1)
    classes = np.asarray(model.classes_)
    encoded_names = [json.dumps(c) for c in model.classes_]
    return pd.DataFrame(
        {
            "item_key": [item_key_text(k) for k in rows["item_key"]],
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

DECIDE_INPUT = ("new_macro_f1", "deployed_macro_f1")
DECIDE_OUTPUT = tuple(RESULT_TYPES["decide"])


def decide(input_data: pd.DataFrame, *, deploy: str = DEFAULT_DEPLOY) -> pd.DataFrame:
    """The deploy decision again, for a training whose deployed version changed meanwhile.

    ``heads.train`` trains outside its write transaction; if another session deployed a
    version while it trained, the decision made against the old one is stale, and T-SQL asks
    Python again rather than restating :func:`decide_deploy` (one row in, one row out).
    """
    _require_columns(input_data, DECIDE_INPUT, "decide input")
    policy = choice("deploy", deploy)
    row = input_data.iloc[0]
    deployed = row["deployed_macro_f1"]
    deployed_f1 = None if deployed is None or pd.isna(deployed) else float(deployed)
    decision = decide_deploy(policy, float(row["new_macro_f1"]), deployed_f1)
    return pd.DataFrame([[decision, deploy_reason(policy)]], columns=list(DECIDE_OUTPUT))


SQL_SERVER_VERBS: dict[str, tuple[Callable[..., pd.DataFrame], tuple[str, ...]]] = {
    "embed": (embed, EMBED_OUTPUT),
    "train": (train, TRAIN_OUTPUT),
    "predict": (predict, PREDICT_OUTPUT),
    "decide": (decide, DECIDE_OUTPUT),
    "distill": (distill, DISTILL_OUTPUT),
    "soft_labels": (soft_labels, SOFT_LABELS_OUTPUT),
}


def sql_server_call(
    verb: str, input_data: pd.DataFrame, **params: object
) -> tuple[pd.DataFrame, int, str]:
    """Run ``verb`` for ``sp_execute_external_script``: ``(OutputDataSet, number, message)``.

    A :class:`~sqlheads.errors.SqlheadsError` does not escape into SQL Server (which would
    report every failure as error 39004 and lose its number): it comes back as output
    parameters, with a typed placeholder ``OutputDataSet``, so that the procedure can
    ``THROW`` the same number and message (and, on 50009, retry with the encoder's bytes).
    """
    function, _ = SQL_SERVER_VERBS[verb]
    types = RESULT_TYPES[verb]
    os.environ["SQLHEADS_CACHE"] = server_cache_dir()
    try:
        if verb == "distill" and params.get("student") in kinds.SIDECAR_STUDENTS:
            raise InvalidParameterError(
                f"student {params['student']!r} fine-tunes a transformer, which SQL Server's "
                "external scripts must not do: request it from the sidecar with "
                "EXEC heads.request_teacher ..., @students = N'encoder' (or `sqlheads distill "
                "--student encoder` on a machine with a GPU)"
            )
        output = function(input_data, **sql_server_parameters(function, params))
        return typed_frame(output, types), 0, ""
    except SqlheadsError as error:
        return typed_frame(None, types), error.number, error.message[:2000]
