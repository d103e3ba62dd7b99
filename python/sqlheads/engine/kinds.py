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

import inspect
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from sqlheads.engine.constraints import Flat, Whole, keyword, passed_whole, unknown_names
from sqlheads.engine.heads import HeadParams
from sqlheads.engine.progress import Progress
from sqlheads.engine.students.distillation import DistillParams
from sqlheads.engine.students.encoder import GOLD_WEIGHT, EncoderStudentParams, default_lr
from sqlheads.engine.students.head import HeadStudentParams
from sqlheads.engine.students.tfidf import TfidfStudentParams
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

    params: Any  # the kind's own parameters (ModelKind.params)
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
    params: type | None = None  # a student kind's parameters: what a door may choose of it
    distill: Distill | None = None
    epochs: int | None = None  # distillation defaults, unless the caller gives them
    lr: float | Callable[[Any], float] | None = None  # or one of the kind's params object
    gold_weight: float = 0.0  # the gold labels' share of the loss, unless the caller's
    progress_unit: str = "epochs"  # what its distillation counts while it runs
    transfer_rows: int = DEFAULT_ROWS  # a text student's transfer rows, unless the caller's

    def distill_params(self, distill: DistillParams, student_params: Any = None) -> DistillParams:
        """``distill`` with this kind's epochs, learning rate and gold weight where it gives
        none (the learning rate of ``student_params``, this kind's defaults if None, where it
        depends on the student's choices)."""
        lr = self.lr
        if callable(lr):
            lr = lr(student_params if student_params is not None else self.params())
        return distill.with_defaults(self.epochs, lr, self.gold_weight)


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
    return word_student.WordStudent(fit.params).fit(
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
    from sqlheads.engine.students.encoder import EncoderStudent

    # its batches are the distillation's, as every student's
    student_params = replace(fit.params, batch_size=fit.distill.batch_size)
    return EncoderStudent(student_params).fit(
        texts,
        classes,
        logits,
        gold,
        teacher_vectors=fit.teacher_vectors,
        distill=fit.distill,
        progress=fit.progress,
    )


def _encoder_student_lr(params: EncoderStudentParams) -> float:
    return default_lr(params.model, params.layers)


def _distill_tfidf_student(
    texts: list[str], classes: list[str], logits: np.ndarray, gold: np.ndarray, fit: StudentFit
) -> Scorer:
    from sqlheads.engine.students.tfidf import TfidfStudent

    return TfidfStudent(fit.params).fit(
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
        params=HeadStudentParams,
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
        params=word_student.WordStudentParams,
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
        params=EncoderStudentParams,
        distill=_distill_encoder_student,
        epochs=3,
        lr=_encoder_student_lr,  # by depth: engine.students.encoder.default_lr
        gold_weight=GOLD_WEIGHT,  # measured: engine.students.encoder.GOLD_WEIGHT
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
        params=TfidfStudentParams,
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


class StudentParams:
    """The parameters of the student ``distill`` fits: one class per student kind
    (``ModelKind.params``: :class:`HeadStudentParams`, :class:`WordStudentParams`,
    :class:`EncoderStudentParams`, :class:`TfidfStudentParams`), each stating what it accepts.

    At a door, ``student`` names the kind (:data:`STUDENTS`) and the other keywords are that
    kind's own (``arch`` for a word student; ``student_model``, ``max_length``, ``max_steps``,
    ``layers``, ``feature_weight``, ``device`` for an encoder student); a keyword only another
    kind takes is refused there, before a teacher scores a row, with the kind that takes it."""

    @classmethod
    def admits(cls, value: Any) -> bool:
        return any(isinstance(value, kind.params) for kind in _student_kinds())

    @classmethod
    def door_parameters(cls, prefix: str = "") -> list[inspect.Parameter]:
        found = {"student": keyword(prefix + "student", DEFAULT_STUDENT, str)}
        for kind in _student_kinds():
            for p in kind.params.door_parameters(prefix):
                found.setdefault(p.name, p.replace(default=None, annotation=p.annotation | None))
        return list(found.values())

    @classmethod
    def from_flat(cls, given: Flat, *, what: str, prefix: str = "", whole: Whole = None) -> Any:
        """The named kind's parameters, built from its own keywords (or ``whole``'s)."""
        if whole is not None and whole[1] is not None:
            return passed_whole(cls, given, whole)
        given = {k: v for k, v in given.items() if v is not None}
        known = [p.name for p in cls.door_parameters(prefix)]
        if set(given) - set(known):
            raise unknown_names(what, set(given) - set(known), known)
        student = given.pop(prefix + "student", DEFAULT_STUDENT)
        kind = student_kind(student)
        own = {p.name for p in kind.params.door_parameters(prefix)}
        foreign = [name for name in given if name not in own]
        if foreign:
            owner = next(k for k in _student_kinds() if _takes(k, foreign[0], prefix))
            several = len(foreign) > 1
            raise InvalidParameterError(
                f"{', '.join(foreign)} {'tune' if several else 'tunes'} the {owner.student} "
                f"student, not student {student!r}: drop {'them' if several else 'it'}, or "
                f"pass student={owner.student!r}"
            )
        return kind.params.from_flat(given, what=what, prefix=prefix)


def _student_kinds() -> list[ModelKind]:
    return [KINDS[name] for name in STUDENTS.values()]


def _takes(kind: ModelKind, name: str, prefix: str) -> bool:
    return name in {p.name for p in kind.params.door_parameters(prefix)}


def student_params(student: str = DEFAULT_STUDENT, **given: Any) -> Any:
    """The parameters of student ``student`` with the keywords ``given`` (its defaults for the
    rest), as a door builds them."""
    return StudentParams.from_flat({"student": student, **given}, what="distill")


def kind_of(params: Any) -> ModelKind:
    """The student kind whose parameters ``params`` are."""
    (kind,) = [k for k in _student_kinds() if isinstance(params, k.params)]
    return kind


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
