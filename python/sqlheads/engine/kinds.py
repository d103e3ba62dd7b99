"""One registry of model kinds: what each reads, how it is loaded and scored, how it is fitted.

Every version in ``models`` has a kind. ``predict`` dispatches here instead of knowing a class:
a kind that reads ``vector`` is scored on the set's stored vectors, a kind that reads ``text``
on the rows' raw text. Each kind serialises without pickle (a ``.npz`` for heads, the ONNX
graph itself for text models) and exports to ONNX.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from sqlheads.engine import students
from sqlheads.engine.heads import HeadParams
from sqlheads.errors import UnknownKindError

READS = ("vector", "text")


class Scorer(Protocol):
    """What ``predict`` needs of a fitted model of any kind."""

    classes_: list[str]

    def predict_proba(self, inputs: Any) -> np.ndarray: ...

    def to_bytes(self) -> bytes: ...

    def to_onnx(self) -> bytes: ...


@dataclass(frozen=True)
class ModelKind:
    name: str
    reads: str  # "vector" (the set's stored vectors) or "text" (the rows' raw text)
    load: Callable[[bytes], Scorer]
    description: str


def _load_head(blob: bytes) -> Scorer:
    from sqlheads.engine.heads import HeadClassifier

    return HeadClassifier.from_bytes(blob)


def _load_word_student(blob: bytes) -> Scorer:
    return students.WordStudent.from_bytes(blob)


def _load_tfidf_student(blob: bytes) -> Scorer:
    from sqlheads.engine.tfidf_student import TfidfStudent

    return TfidfStudent.from_bytes(blob)


def _text_classifier(kind: str) -> Callable[[bytes], Scorer]:
    """The teacher's and the encoder student's loader: their ONNX graph and its contract
    (onnxruntime and the tokenizer only: scoring needs no PyTorch)."""

    def load(blob: bytes) -> Scorer:
        from sqlheads.engine.text_classifier import OnnxTextClassifier

        return OnnxTextClassifier.from_bytes(blob, kind=kind)

    return load


KINDS: dict[str, ModelKind] = {
    "head": ModelKind(
        "head", "vector", _load_head, "MLP on stored vectors (gold labels, or a teacher's)"
    ),
    "word_student": ModelKind(
        "word_student",
        "text",
        _load_word_student,
        "token embeddings + width-3 convolution + MLP on raw text, distilled from a teacher",
    ),
    # The blob is the fp32 ONNX classifier graph with its tokenizer and classes in the metadata
    # (~438 MB for MPNet, ~91 MB for MiniLM): it scores text and gives soft labels again
    # without PyTorch; fp32 because soft labels are the teacher's exact logits.
    "teacher": ModelKind(
        "teacher",
        "text",
        _text_classifier("teacher"),
        "transformer sequence classifier fine-tuned on gold labels (fp32 ONNX), a sidecar job",
    ),
    "encoder_student": ModelKind(
        "encoder_student",
        "text",
        _text_classifier("encoder_student"),
        "small transformer (MiniLM) + classifier distilled from a teacher, int8 ONNX on raw text",
    ),
    "tfidf_student": ModelKind(
        "tfidf_student",
        "text",
        _load_tfidf_student,
        "linear model on TF-IDF word 1-2 grams of the whole text, distilled from a teacher",
    ),
}

# ``distill --student NAME`` -> the kind of model it produces.
STUDENTS: dict[str, str] = {
    "word": "word_student",
    "head": "head",
    "encoder": "encoder_student",
    "tfidf": "tfidf_student",
}

# Students fine-tuned from a transformer: their training wants a GPU (the sidecar, or the CLI on
# a machine with one), not the database server's external-script runtime.
SIDECAR_STUDENTS = frozenset({"encoder"})

# Epochs and learning rate a student of each kind distils with unless told otherwise
# (measured on Rotten Tomatoes with the mpnet-rt teacher: docs/benchmarks.md, "students").
DISTILL_DEFAULTS: dict[str, tuple[int, float]] = {
    "word_student": (students.DEFAULT_EPOCHS, students.DEFAULT_LR),
    "head": (HeadParams.epochs, HeadParams.lr),
    # the usual range for fine-tuning MiniLM (not tuned on a benchmark yet)
    "encoder_student": (3, 5e-5),
    "tfidf_student": (1, 1.0),  # unused: L-BFGS on a convex loss has neither
}


def model_kind(name: str) -> ModelKind:
    """The registered kind ``name`` (migration 0004 renamed the heads' ``mlp_head``)."""
    found = KINDS.get(name)
    if found is None:
        raise UnknownKindError(
            f"model kind {name!r} is not known to this sqlheads: known kinds are "
            f"{', '.join(KINDS)}; upgrade sqlheads to score it"
        )
    return found


def student_kind(student: str) -> ModelKind:
    """The kind ``distill --student`` produces, refusing names that are not students."""
    if student not in STUDENTS:
        raise UnknownKindError(
            f"student kind {student!r} does not exist: pass one of {', '.join(STUDENTS)} "
            "(word: a word-level student on raw text; head: a head on the set's vectors; "
            "encoder: a small transformer fine-tuned on the soft labels; tfidf: a linear model "
            "on TF-IDF of the whole text, for long texts)"
        )
    return KINDS[STUDENTS[student]]


def parameter_count(model: Scorer) -> int:
    """Trainable numbers in a fitted model, for ``model_summary``."""
    counted = getattr(model, "n_parameters_", None)
    if counted:
        return int(counted)
    weights = getattr(model, "weights_", {})
    return int(sum(np.asarray(w).size for w in weights.values()))
