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
}

# ``distill --student NAME`` -> the kind of model it produces.
STUDENTS: dict[str, str] = {"word": "word_student", "head": "head"}

# Epochs and learning rate a student of each kind distils with unless told otherwise
# (measured on Rotten Tomatoes with the mpnet-rt teacher: docs/benchmarks.md, "students").
DISTILL_DEFAULTS: dict[str, tuple[int, float]] = {
    "word_student": (students.DEFAULT_EPOCHS, students.DEFAULT_LR),
    "head": (HeadParams.epochs, HeadParams.lr),
}


def model_kind(name: str) -> ModelKind:
    """The registered kind ``name`` (older stores called heads ``mlp_head``)."""
    found = KINDS.get("head" if name == "mlp_head" else name)
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
            "(word: a word-level student on raw text; head: a head on the set's vectors)"
        )
    return KINDS[STUDENTS[student]]


def parameter_count(model: Scorer) -> int:
    """Trainable numbers in a fitted model, for ``model_summary``."""
    counted = getattr(model, "n_parameters_", None)
    if counted:
        return int(counted)
    weights = getattr(model, "weights_", {})
    return int(sum(np.asarray(w).size for w in weights.values()))
