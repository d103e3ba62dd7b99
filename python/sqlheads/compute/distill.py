"""``distill``: a teacher's soft labels distilled into a student, as one row describing it.

The steps, top to bottom: the gold labels and their held-out split (:func:`split_rows`, the
one ``train`` makes from the same labels and seed), the teacher's logits in the gold classes'
order, the rows distilled on (never a held-out one), the student's inputs, the fit, and the
version's row with the student's, the baseline's and the teacher's held-out metrics.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from typing import Annotated, Any

import numpy as np
import pandas as pd

from sqlheads.compute.columns import (
    DISTILL_INPUT,
    DISTILL_OUTPUT,
    in_key_order,
    no_labelled_rows,
    present,
    refuse_unnamable_classes,
    require_columns,
)
from sqlheads.compute.versions import Fitted, VersionParams, baseline_metrics, version_row
from sqlheads.engine import baseline, kinds
from sqlheads.engine.constraints import Params, param
from sqlheads.engine.encoders.onnx_encoder import EncoderRef
from sqlheads.engine.evaluation import classification_metrics, stratified_split
from sqlheads.engine.loop import drift
from sqlheads.engine.progress import Progress
from sqlheads.engine.students.distillation import DistillParams
from sqlheads.errors import (
    ClassMismatchError,
    HeldOutLeakError,
    InvalidParameterError,
    MissingEmbeddingsError,
    MissingTextError,
)
from sqlheads.keywords import Door
from sqlheads.store.vectors import HALF_DTYPE, unpack_rows

# The export checks a student passed, and how an encoder student was made (the model's layers
# it kept, the rows whose teacher vector it learnt and that loss's weight, the IMDB sentences of
# its general stage and the seconds spent on it: 0 where the cache had it), recorded in its
# metrics when it has them.
EXPORT_CHECKS = ("parity_max_abs_diff", "int8_max_abs_diff", "int8_agreement", "quantization")
FIT_FACTS = (
    "layers_kept",
    "feature_rows",
    "feature_weight",
    "general_sentences",
    "general_seconds",
)


@dataclass(frozen=True)
class Distillation(Params):
    """One ``distill``'s parameters, as a door builds them: which student with what (its
    kind's own class: :class:`~sqlheads.engine.kinds.StudentParams`), how it learns from the
    teacher (:class:`DistillParams`), and how its version is judged and written."""

    student_params: kinds.StudentParams = param(factory=kinds.student_params)
    learning: DistillParams = param(factory=DistillParams)
    version: VersionParams = param(factory=VersionParams)

    @property
    def kind(self) -> kinds.ModelKind:
        return kinds.kind_of(self.student_params)


# Only what a student reads of the set's encoder: its width (a head student's vectors), its
# tokenizer and graph (a word student's start). max_length is the encoder student's own.
SET_ENCODER = Door(only=("dim", "tokenizer_json", "encoder_onnx"))


def distill(
    input_data: pd.DataFrame,
    *,
    params: Distillation,
    teacher_classes_json: str,
    set_encoder: Annotated[EncoderRef | None, SET_ENCODER] = None,
    deployed_macro_f1: float | None = None,
    no_text: str = baseline.NO_TEXT,
    progress: Progress | None = None,
) -> pd.DataFrame:
    """Distil a teacher's soft labels into the student ``params`` names; one row.

    Input, one row per key: ``item_key``; ``label`` (gold, NULL for rows only the teacher
    labelled); ``logits`` (the teacher's, float32 bytes in ``teacher_classes_json`` order, NULL
    where it has none); the student's input (``text`` for a text student, ``vector`` for a head
    student of the set encoder's ``dim`` floats); optionally ``in_transfer`` (1 for the rows the
    caller wants distilled on) and ``teacher_vector`` (the teacher encoder's vector of the row,
    float16 bytes, NULL where it has none: what an encoder student's feature loss learns). The
    held-out split is the one ``train`` makes from the same labels and seed; no held-out row is
    distilled on, and one named in ``in_transfer`` is refused. A word student starts from the
    set encoder's tokenizer and graph. ``progress`` hears of the run in the kind's
    ``progress_unit``: epochs (word and head students), optimiser steps (encoder) or L-BFGS
    iterations (tfidf). The rows are put in key order first and every figure is made from that
    one frame: the same rows in any order give the same version.
    """
    started = time.perf_counter()
    kind = params.kind
    learning = kind.distill_params(params.learning, params.student_params)
    encoder = set_encoder or EncoderRef()
    test_fraction = params.version.test_fraction
    require_columns(input_data, DISTILL_INPUT + (kind.reads,), "distill input")
    input_data = in_key_order(input_data, "labels")  # the one frame every consumer reads
    teacher_classes = json.loads(teacher_classes_json)
    rows = split_rows(input_data, kind, teacher_classes, test_fraction, learning)
    _refuse_feature_weight_without_vectors(params.student_params, rows)
    train_inputs, test_inputs = _student_inputs(input_data, kind, rows, encoder.dim)
    fit = kinds.StudentFit(
        params=params.student_params,
        distill=learning,
        teacher_vectors=None if rows.vectors is None else rows.vectors[rows.train],
        tokenizer_json=encoder.tokenizer_json,
        encoder_onnx=encoder.onnx,
        progress=progress,
    )
    model = kind.distill(
        train_inputs, rows.classes, rows.logits[rows.train], rows.gold[rows.train], fit
    )
    metrics = _metrics(model, kind, (train_inputs, test_inputs), rows, input_data, no_text)
    fitted = Fitted(
        kind=kind.name,
        classes=rows.classes,
        params={
            "student": kind.student,
            **_student_params(kind, model),
            **asdict(learning),
            "test_fraction": test_fraction,
            "dim": encoder.dim,
        },
        metrics=metrics,
        loss_curve=model.loss_curve_,
        rows_train=len(rows.train),
        rows_test=len(rows.test),
        blob=model.to_bytes(),
        onnx=model.to_onnx(),
        parameters=kinds.parameter_count(model),
    )
    row = version_row(
        fitted,
        started=started,
        deploy=params.version.deploy,
        deployed_macro_f1=deployed_macro_f1,
    )
    row |= {
        "teacher_accuracy": metrics["teacher_accuracy"],
        "rows_without_input": rows.without_input,
    }
    return pd.DataFrame([row], columns=list(DISTILL_OUTPUT))


@dataclass(frozen=True)
class DistillRows:
    """Distill's input rows sorted out: which are gold-labelled, held out, taught by the
    teacher and distilled on (indices ``train``), and which are scored (``test``)."""

    keys: np.ndarray  # item_key, one per input row
    classes: list[str]  # the gold labels' classes, sorted: the student's classes
    gold_labels: np.ndarray  # the gold label as text ("None" where unlabelled)
    gold: np.ndarray  # the gold class index, -1 where unlabelled
    labelled: np.ndarray  # bool: a gold label
    logits: np.ndarray  # the teacher's, in ``classes`` order; NaN where it has none
    has_logits: np.ndarray  # bool
    vectors: np.ndarray | None  # the teacher encoder's; NaN rows where it has none
    has_input: np.ndarray  # bool: the student's input (a text or a vector)
    train: np.ndarray  # the rows distilled on
    test: np.ndarray  # the held-out rows
    without_input: int  # rows chosen to distil on that lack the student's input


def split_rows(
    input_data: pd.DataFrame,
    kind: kinds.ModelKind,
    teacher_classes: list[Any],
    test_fraction: float,
    distill: DistillParams,
) -> DistillRows:
    """Distill's input rows (in key order: :func:`~sqlheads.compute.columns.in_key_order`)
    sorted out (:class:`DistillRows`), with the held-out split that ``train`` makes of the same
    labels with ``distill.seed``."""
    keys_array = input_data["item_key"].to_numpy(dtype=object)
    teacher_classes = [str(c) for c in teacher_classes]
    labelled = present(input_data["label"], "text")
    gold_labels = np.asarray([str(v) for v in input_data["label"]], dtype=object)
    classes = _gold_classes(gold_labels[labelled], teacher_classes)
    train_labelled, test_labelled = stratified_split(
        keys_array[labelled], gold_labels[labelled], test_fraction=test_fraction, seed=distill.seed
    )
    held_out = np.zeros(len(keys_array), dtype=bool)
    held_out[np.flatnonzero(labelled)[test_labelled]] = True
    logits, has_logits = _teacher_logits(input_data["logits"], teacher_classes, classes)
    distilled = _distilled_on(input_data, keys_array, labelled, held_out, has_logits)
    if distill.gold_weight == 0:
        distilled &= has_logits  # with no gold term, a row without soft labels teaches nothing
    has_input = present(input_data[kind.reads], kind.reads)
    _refuse_labelled_without_input(kind, keys_array, labelled & ~has_input)
    class_index = {c: i for i, c in enumerate(classes)}
    return DistillRows(
        keys=keys_array,
        classes=classes,
        gold_labels=gold_labels,
        gold=np.array(
            [class_index[g] if ok else -1 for g, ok in zip(gold_labels, labelled, strict=True)]
        ),
        labelled=labelled,
        logits=logits,
        has_logits=has_logits,
        vectors=_teacher_vectors(input_data),
        has_input=has_input,
        train=np.flatnonzero(distilled & has_input),
        test=np.flatnonzero(held_out),
        without_input=int((distilled & ~has_input).sum()),
    )


def _refuse_feature_weight_without_vectors(student_params: Any, rows: DistillRows) -> None:
    """50012 for a feature weight given (an encoder student's) where the teacher gave no
    vectors to learn: the caller asked for what cannot be done."""
    weight = getattr(student_params, "feature_weight", None)
    if weight and rows.vectors is None:
        raise InvalidParameterError(
            f"feature_weight={weight} asks the encoder student to learn its teacher's vectors, "
            "and the teacher gave none: only a teacher head on an encoder's vectors gives them "
            "(--teacher-head); drop --feature-weight to distil on the soft labels alone"
        )


def _gold_classes(gold_labels: np.ndarray, teacher_classes: list[str]) -> list[str]:
    classes = sorted(set(gold_labels.tolist()))
    refuse_unnamable_classes(classes)
    if classes != sorted(teacher_classes):
        raise ClassMismatchError(
            f"the soft labels have classes {sorted(teacher_classes)} but the gold labels have "
            f"{classes}: name the soft-label columns after the label values (e.g. SELECT "
            "item_key, logit_0 AS negative, logit_1 AS positive ...)"
        )
    if not classes:
        raise no_labelled_rows()
    return classes


def _teacher_logits(
    column: pd.Series, teacher_classes: list[str], classes: list[str]
) -> tuple[np.ndarray, np.ndarray]:
    """The teacher's logits in ``classes`` order (NaN where it has none), and where it has."""
    logits = np.full((len(column), len(classes)), np.nan, dtype=np.float32)
    has_logits = column.notna().to_numpy()
    if has_logits.any():
        order = [teacher_classes.index(c) for c in classes]
        logits[has_logits] = unpack_rows(column[has_logits].tolist(), len(teacher_classes))[
            :, order
        ]
    return logits, has_logits


def _teacher_vectors(input_data: pd.DataFrame) -> np.ndarray | None:
    """The teacher encoder's vector of each row (float16 bytes in), NaN rows where it has
    none; None when no row has one."""
    if "teacher_vector" not in input_data.columns:
        return None
    has = input_data["teacher_vector"].notna().to_numpy()
    if not has.any():
        return None
    blobs = input_data["teacher_vector"][has].tolist()
    dim = len(blobs[0]) // HALF_DTYPE.itemsize
    vectors = np.full((len(input_data), dim), np.nan, dtype=np.float32)
    vectors[has] = unpack_rows(blobs, dim, HALF_DTYPE)
    return vectors


def _distilled_on(
    input_data: pd.DataFrame,
    keys: np.ndarray,
    labelled: np.ndarray,
    held_out: np.ndarray,
    has_logits: np.ndarray,
) -> np.ndarray:
    """The rows the caller's transfer set names, or else every row with a gold label or a
    teacher's logits; never a held-out row."""
    # in_transfer: absent, or all NULL (SQL Server's door when no transfer query was given)
    if "in_transfer" not in input_data.columns or not input_data["in_transfer"].notna().any():
        return (labelled | has_logits) & ~held_out
    chosen = input_data["in_transfer"].fillna(0).astype(bool).to_numpy()
    leaked = chosen & held_out
    if leaked.any():
        raise HeldOutLeakError(
            f"{int(leaked.sum())} row(s) of the transfer query are held out for the "
            f"metrics (e.g. {keys[leaked][0]!r}): distilling on them would score the student on "
            "rows it learnt; remove them from the transfer query"
        )
    return chosen | (labelled & ~held_out)


def _refuse_labelled_without_input(
    kind: kinds.ModelKind, keys: np.ndarray, lacking: np.ndarray
) -> None:
    if not lacking.any():
        return
    if kind.reads == "text":
        raise MissingTextError(
            f"{int(lacking.sum())} labelled key(s) have no text (e.g. {keys[lacking][0]!r}): "
            "make the source query return their text"
        )
    raise MissingEmbeddingsError(
        f"{int(lacking.sum())} labelled key(s) have no embedding (e.g. {keys[lacking][0]!r}): "
        "embed them first, or restrict the labels query to embedded keys"
    )


def _student_inputs(
    input_data: pd.DataFrame, kind: kinds.ModelKind, rows: DistillRows, dim: int | None
) -> tuple[Any, Any]:
    """The student's inputs of the rows distilled on and of the held-out rows: texts, or
    vectors of ``dim`` floats (zeros where a key has none)."""
    values = input_data[kind.reads]
    if kind.reads == "text":
        texts = [str(v) for v in values]
        return [texts[i] for i in rows.train], [texts[i] for i in rows.test]
    if dim is None:
        raise InvalidParameterError("a head student needs the set's vector dimension: pass dim")
    X = np.zeros((len(values), dim), dtype=np.float32)
    X[rows.has_input] = unpack_rows(values[rows.has_input].tolist(), dim)
    return X[rows.train], X[rows.test]


def _student_params(kind: kinds.ModelKind, model: Any) -> dict[str, Any]:
    """What a student was fitted with: a text student's parameters, a head's hidden units."""
    if kind.reads == "text":
        return model.params.record()
    return {"hidden": int(model.weights_["w1"].shape[0])}


def _drift_reference(
    kind: kinds.ModelKind, model: kinds.Scorer, rows: DistillRows, train_inputs, test_inputs
) -> dict[str, Any]:
    """What drift compares the student's scored sets with (engine/loop/drift.py): a head student's
    vectors give the centroid and spread too, a text student's none."""
    vectors = (train_inputs, test_inputs) if kind.reads == "vector" else ()
    gold = rows.gold_labels[rows.train][rows.labelled[rows.train]]
    return drift.reference(rows.classes, gold, model.predict_proba(test_inputs), *vectors)


def _metrics(
    model: kinds.Scorer,
    kind: kinds.ModelKind,
    inputs: tuple[Any, Any],
    rows: DistillRows,
    input_data: pd.DataFrame,
    no_text: str,
) -> dict[str, Any]:
    """The student's held-out metrics, its baseline's, the teacher's on the same rows, the
    export checks the student passed, and its drift reference (``inputs``: the student's
    inputs of the rows distilled on and of the held-out rows)."""
    train_inputs, test_inputs = inputs
    classes = np.asarray(rows.classes)
    predicted = classes[model.predict_proba(test_inputs).argmax(axis=1)]
    truth = rows.gold_labels[rows.test].astype(str)
    metrics = classification_metrics(truth, predicted, rows.classes)
    gold_only = np.where(rows.labelled, rows.gold_labels, None)  # the baseline learns from gold
    metrics["baseline"] = baseline_metrics(
        input_data, gold_only, rows.train, rows.test, rows.classes, no_text
    )
    teacher_known = rows.has_logits[rows.test]
    metrics["teacher_accuracy"] = (
        float(
            np.mean(
                classes[rows.logits[rows.test][teacher_known].argmax(axis=1)]
                == truth[teacher_known]
            )
        )
        if teacher_known.any()
        else None
    )
    metrics["teacher_rows_test"] = int(teacher_known.sum())
    for check in EXPORT_CHECKS + FIT_FACTS:
        if getattr(model, f"{check}_", None) is not None:
            metrics[check] = getattr(model, f"{check}_")
    metrics["drift"] = _drift_reference(kind, model, rows, train_inputs, test_inputs)
    return metrics
