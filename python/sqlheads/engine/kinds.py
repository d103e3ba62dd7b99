"""One registry of model kinds: what each reads, how it is fitted, loaded and scored.

Every version in ``models`` has a kind. ``predict`` dispatches here instead of knowing a class:
a kind that reads ``vector`` is scored on the set's stored vectors, a kind that reads ``text``
on the rows' raw text. Each kind serialises without pickle (a ``.npz`` for heads, the ONNX
graph itself for text models) and exports to ONNX. ``distill`` calls a student kind's
``distill``; a kind says where it may be fitted (the database ``server``'s external scripts, or
only the GPU ``sidecar``) and its distillation defaults. A new kind is an entry here, the
engine module that fits it, and a case of the contract test (tests/test_kinds.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from sqlheads.engine.heads import HeadParams
from sqlheads.engine.progress import Progress
from sqlheads.engine.students.distillation import DistillParams
from sqlheads.engine.students.transfer import DEFAULT_ROWS
from sqlheads.engine.students.word import student as word_student
from sqlheads.errors import InvalidParameterError, UnknownKindError

READS = ("vector", "text")


class Scorer(Protocol):
    """What ``predict`` needs of a fitted model of any kind."""

    classes_: list[str]

    def predict_proba(self, inputs: Any) -> np.ndarray: ...

    def to_bytes(self) -> bytes: ...

    def to_onnx(self) -> bytes: ...


@dataclass(frozen=True)
class StudentFit:
    """What fitting a student is handed besides its rows; each kind reads what it needs."""

    params: StudentParams
    distill: DistillParams  # with the kind's epochs and learning rate where the caller gave none
    tokenizer_json: str | None = None  # word student: the set encoder's tokenizer
    encoder_onnx: bytes | None = None  # word student: its embeddings seed the student's
    progress: Progress | None = None  # in the kind's progress_unit
    # encoder student: the teacher encoder's vector of each row it distils on (NaN rows where
    # the teacher gave none), what its feature loss learns
    teacher_vectors: np.ndarray | None = None


# (inputs, classes, teacher logits, gold class indices, how) -> the fitted student
Distill = Callable[[Any, list[str], np.ndarray, np.ndarray, StudentFit], "Scorer"]


@dataclass(frozen=True)
class ModelKind:
    name: str
    reads: str  # "vector" (the set's stored vectors) or "text" (the rows' raw text)
    load: Callable[[bytes], Scorer]
    description: str
    fitted_by: tuple[str, ...]  # "train" (gold labels) and/or "distill" (a teacher's logits)
    runs_on: str  # where it may be fitted: "server" (external scripts too) or "sidecar" only
    student: str | None = None  # its name for ``distill --student``
    distill: Distill | None = None
    epochs: int | None = None  # distillation defaults, unless the caller gives them
    lr: float | Callable[[StudentParams], float] | None = None  # or one by the student's params
    progress_unit: str = "epochs"  # what its distillation counts while it runs
    transfer_rows: int = DEFAULT_ROWS  # a text student's transfer rows, unless the caller's

    def distill_params(
        self, distill: DistillParams, student: StudentParams | None = None
    ) -> DistillParams:
        """``distill`` with this kind's epochs and learning rate where it gives none (the
        learning rate of ``student``, this kind's default student if None, where it depends
        on the student's choices)."""
        lr = self.lr(student or StudentParams(self.student)) if callable(self.lr) else self.lr
        return replace(distill, epochs=distill.epochs or self.epochs, lr=distill.lr or lr)


def _load_head(blob: bytes) -> Scorer:
    from sqlheads.engine.heads import HeadClassifier

    return HeadClassifier.from_bytes(blob)


def _load_word_student(blob: bytes) -> Scorer:
    return word_student.WordStudent.from_bytes(blob)


def _load_tfidf_student(blob: bytes) -> Scorer:
    from sqlheads.engine.students.tfidf import TfidfStudent

    return TfidfStudent.from_bytes(blob)


def _text_classifier(kind: str) -> Callable[[bytes], Scorer]:
    """The teacher's and the encoder student's loader: their ONNX graph and its contract
    (onnxruntime and the tokenizer only: scoring needs no PyTorch)."""

    def load(blob: bytes) -> Scorer:
        from sqlheads.engine.encoders.text_classifier import OnnxTextClassifier

        return OnnxTextClassifier.from_bytes(blob, kind=kind)

    return load


def _distill_head(
    inputs: np.ndarray, classes: list[str], logits: np.ndarray, gold: np.ndarray, fit: StudentFit
) -> Scorer:
    from sqlheads.engine.students.head import distill_head

    return distill_head(
        inputs,
        classes,
        logits,
        gold,
        head=HeadParams(seed=fit.distill.seed),
        distill=fit.distill,
        progress=fit.progress,
    )


def _distill_word_student(
    texts: list[str], classes: list[str], logits: np.ndarray, gold: np.ndarray, fit: StudentFit
) -> Scorer:
    if fit.tokenizer_json is None:
        raise InvalidParameterError("a word student needs the set encoder's tokenizer_json")
    return word_student.WordStudent(word_student.word_student_params(fit.params.arch)).fit(
        texts,
        classes,
        logits,
        gold,
        tokenizer_json=fit.tokenizer_json,
        encoder_onnx=fit.encoder_onnx,
        distill=fit.distill,
        progress=fit.progress,
    )


def _distill_encoder_student(
    texts: list[str], classes: list[str], logits: np.ndarray, gold: np.ndarray, fit: StudentFit
) -> Scorer:
    from sqlheads.engine.students.encoder import EncoderStudent, EncoderStudentParams

    p = fit.params
    chosen = {
        "model": p.student_model,
        "max_length": p.max_length,
        "max_steps": p.max_steps,
        "layers": p.layers,
        "feature_weight": p.feature_weight,
    }
    student_params = EncoderStudentParams(
        batch_size=fit.distill.batch_size,
        device=p.device,
        **{name: value for name, value in chosen.items() if value is not None},
    )
    return EncoderStudent(student_params).fit(
        texts,
        classes,
        logits,
        gold,
        teacher_vectors=fit.teacher_vectors,
        distill=fit.distill,
        work_dir=None if p.work_dir is None else Path(p.work_dir),
        progress=fit.progress,
    )


def _encoder_student_lr(student: StudentParams) -> float:
    from sqlheads.engine.students.encoder import DEFAULT_MODEL, default_lr

    return default_lr(student.student_model or DEFAULT_MODEL, student.layers)


def _distill_tfidf_student(
    texts: list[str], classes: list[str], logits: np.ndarray, gold: np.ndarray, fit: StudentFit
) -> Scorer:
    from sqlheads.engine.students.tfidf import TfidfStudent

    return TfidfStudent().fit(
        texts, classes, logits, gold, distill=fit.distill, progress=fit.progress
    )


KINDS: dict[str, ModelKind] = {
    "head": ModelKind(
        "head",
        "vector",
        _load_head,
        "MLP on stored vectors (gold labels, or a teacher's)",
        fitted_by=("train", "distill"),
        runs_on="server",
        student="head",
        distill=_distill_head,
        epochs=HeadParams.epochs,
        lr=HeadParams.lr,
    ),
    "word_student": ModelKind(
        "word_student",
        "text",
        _load_word_student,
        "token embeddings + width-3 convolution + MLP on raw text, distilled from a teacher",
        fitted_by=("distill",),
        runs_on="server",
        student="word",
        distill=_distill_word_student,
        epochs=word_student.DEFAULT_EPOCHS,
        lr=word_student.DEFAULT_LR,
    ),
    # The blob is the fp32 ONNX classifier graph with its tokenizer and classes in the metadata
    # (~438 MB for MPNet, ~91 MB for MiniLM): it scores text and gives soft labels again
    # without PyTorch; fp32 because soft labels are the teacher's exact logits.
    "teacher": ModelKind(
        "teacher",
        "text",
        _text_classifier("teacher"),
        "transformer sequence classifier fine-tuned on gold labels (fp32 ONNX), a sidecar job",
        fitted_by=("train",),  # by the sidecar's teacher job (engine.training.fine_tuning)
        runs_on="sidecar",
    ),
    "encoder_student": ModelKind(
        "encoder_student",
        "text",
        _text_classifier("encoder_student"),
        "small transformer (MiniLM) + classifier distilled from a teacher, int8 ONNX on raw text",
        fitted_by=("distill",),
        # fine-tuned from a transformer: its training wants a GPU (the sidecar, or the CLI on
        # a machine with one), not the database server's external-script runtime
        runs_on="sidecar",
        student="encoder",
        distill=_distill_encoder_student,
        epochs=3,
        lr=_encoder_student_lr,  # by depth: engine.students.encoder.default_lr
        progress_unit="steps",
        # Its fitting time grows with its rows (619 s for 6,824 + 6,000 on 2 CPU cores) and
        # 24,000 transfer rows scored no better on Rotten Tomatoes (84.35 against 84.4 %).
        transfer_rows=6_000,
    ),
    "tfidf_student": ModelKind(
        "tfidf_student",
        "text",
        _load_tfidf_student,
        "linear model on TF-IDF word 1-2 grams of the whole text, distilled from a teacher",
        fitted_by=("distill",),
        runs_on="server",  # scikit-learn and NumPy, in both hosts
        student="tfidf",
        distill=_distill_tfidf_student,
        epochs=1,  # unused: L-BFGS on a convex loss has neither
        lr=1.0,
        progress_unit="iterations",
        # more rows bought nothing dependable on Rotten Tomatoes for eight times the teacher's
        # time: 78.14 / 78.08 % with 6,000 / 48,000 of one cached set, 78.02 / 78.25 % of another
        transfer_rows=6_000,
    ),
}
# The word student's and the head's defaults were measured on Rotten Tomatoes with the mpnet-rt
# teacher (docs/benchmarks.md, "students").

# ``distill --student NAME`` -> the kind of model it produces; the default first.
DEFAULT_STUDENT = "word"
STUDENTS: dict[str, str] = dict(
    sorted(
        ((k.student, k.name) for k in KINDS.values() if k.student is not None),
        key=lambda student: student[0] != DEFAULT_STUDENT,
    )
)

# Students only the sidecar (or the CLI on a GPU machine) may fit.
SIDECAR_STUDENTS = frozenset(s for s, name in STUDENTS.items() if KINDS[name].runs_on == "sidecar")


@dataclass(frozen=True)
class StudentParams:
    """Which student ``distill`` fits, and the choices only some kinds read: built once where a
    call comes in (the command line, ``sql_server_call``, the host's keywords) and refused
    there, before a teacher scores a row, when it names what the student cannot use."""

    student: str = DEFAULT_STUDENT  # its name for ``distill --student`` (STUDENTS)
    arch: str | None = None  # word student: its architecture (word_student.ARCHITECTURE_SIZES)
    student_model: str | None = None  # encoder student: catalogue model or HF directory
    max_length: int | None = None  # encoder student: tokens per text
    max_steps: int | None = None  # encoder student: optimiser steps at most
    layers: int | None = None  # encoder student: transformer layers kept (None: all)
    feature_weight: float | None = None  # encoder student: the teacher-vector loss's weight
    device: str = "auto"  # encoder student: auto, cpu, cuda or cuda:N
    work_dir: str | None = None  # encoder student: its checkpoints (a sidecar job's folder)

    @property
    def kind(self) -> ModelKind:
        return student_kind(self.student)

    def validate(self) -> StudentParams:
        kind = self.kind  # an unknown student: 50022
        if self.arch is not None:
            if kind.name != "word_student":
                raise InvalidParameterError(
                    f"arch={self.arch!r} chooses a word student's architecture, and student "
                    f"{self.student!r} has none: drop arch, or pass student='word'"
                )
            word_student.word_student_params(self.arch)  # an unknown architecture: refused now
        encoder_only = [
            name
            for name in ("student_model", "max_length", "max_steps", "layers", "feature_weight")
            if getattr(self, name) is not None
        ]
        if encoder_only and kind.name != "encoder_student":
            raise InvalidParameterError(
                f"{', '.join(encoder_only)} tune the encoder student, not student "
                f"{self.student!r}: drop them, or pass student='encoder'"
            )
        if kind.name == "encoder_student" and (self.layers, self.feature_weight) != (None, None):
            from sqlheads.engine.students.encoder import DEFAULT_MODEL, EncoderStudentParams

            # refused now, before a teacher scores a row: a depth the model has not (50012)
            EncoderStudentParams(
                model=self.student_model or DEFAULT_MODEL,
                layers=self.layers,
                **({} if self.feature_weight is None else {"feature_weight": self.feature_weight}),
            ).validate()
        return self


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
