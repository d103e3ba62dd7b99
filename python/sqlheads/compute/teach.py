"""``teach``: a deployed version's logits for a student's rows and for the transfer rows made
from them, in either host's Python.

T-SQL (``heads.distill @teacher_head``) hands over the student's rows (``item_key``, ``text``,
``label``, and, where the teacher's set stored one, that set's ``teacher_vector`` and
``teacher_text_sha256`` for the key) with the teacher version's blob and kind, and for a teacher
that reads vectors its encoder. Python returns one row per student row with the teacher's
logits (from the stored vector when it was made from the same text, else scored now) and one
per transfer row it made from the rows the student may learn from and scored
(:mod:`engine.students.transfer`): ``item_key`` (made up for a transfer row), ``text``,
``logits``, ``origin_key``, ``transfer`` (1 for a transfer row).

Its steps are the embedded half's too (:mod:`sqlheads.verbs.teach`): :func:`load_teacher`,
:func:`teacher_logits`, :func:`learnable` and :func:`transfer_rows`. On SQL Server the transfer
rows are made and scored on every call; the embedded host caches them by teacher version and
recipe, and scores only those its cache lacks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import numpy as np
import pandas as pd

from sqlheads.compute.columns import in_key_order, text_sha256
from sqlheads.engine.constraints import MISSING, Instance, Params, Text, param
from sqlheads.engine.encoders.onnx_encoder import LONG_TEXT_MODES, EncoderRef, load_encoder
from sqlheads.engine.evaluation import TEST_FRACTION, held_out_keys
from sqlheads.engine.kinds import model_kind
from sqlheads.engine.progress import Progress
from sqlheads.engine.students.soft_labels import Teacher, as_logits
from sqlheads.engine.students.transfer import (
    TransferRecipe,
    TransferRow,
    build_transfer,
    encoder_neighbours,
    learnable_rows,
    transfer_keys,
)
from sqlheads.errors import InvalidParameterError, QueryShapeError
from sqlheads.keywords import Door
from sqlheads.store.vectors import pack_rows, unpack_rows

TEACH_INPUT = ("item_key", "text", "label", "teacher_vector", "teacher_text_sha256")
BLOB = Instance((bytes, bytearray), "a model's bytes")


@dataclass(frozen=True, kw_only=True)
class TeacherVersion(Params):
    """The version that teaches, as T-SQL hands it over: its blob, the blob's sha256 and its
    kind (``teacher_blob``, ``teacher_sha256``, ``teacher_kind`` at the door)."""

    blob: bytes = param(MISSING, BLOB, flat="teacher_blob")
    sha256: str = param(MISSING, Text("a blob's sha256"), flat="teacher_sha256")
    kind: str = param(MISSING, Text("a model kind"), flat="teacher_kind")


def teach(
    input_data: pd.DataFrame,
    *,
    teacher: TeacherVersion,
    encoder: EncoderRef | None = None,
    long_text: str = LONG_TEXT_MODES[0],
    student_encoder: Annotated[EncoderRef | None, Door(prefix="student_")] = None,
    recipe: TransferRecipe,
    test_fraction: float = TEST_FRACTION,
) -> pd.DataFrame:
    """The teacher's logits for the student's rows and for its transfer rows (see the module):
    a teacher that reads vectors embeds with ``encoder`` in mode ``long_text``; the transfer
    rows' replacement words come from ``student_encoder``'s graph (none: masks and n-grams
    alone); the held-out rows are those ``train`` makes at ``test_fraction`` and the recipe's
    seed."""
    missing = [c for c in TEACH_INPUT if c not in input_data.columns]
    if missing:
        raise QueryShapeError(f"the teaching input lacks column(s) {', '.join(missing)}")
    if hashlib.sha256(teacher.blob).hexdigest() != teacher.sha256:
        raise InvalidParameterError(
            f"the teacher's blob does not hash to {teacher.sha256[:12]}: the stored version is "
            "corrupt; train and deploy the teacher head again"
        )
    scoring = load_teacher(bytes(teacher.blob), teacher.kind, encoder, long_text)
    # In key order: the teacher scores the same rows in the same batches, and the transfer
    # rows are the same, whatever order T-SQL handed them over in.
    input_data = in_key_order(input_data, "source")
    keys = input_data["item_key"].tolist()
    texts = [None if t is None or t != t else str(t) for t in input_data["text"]]
    rows = [i for i, t in enumerate(texts) if t is not None and t.strip()]
    stored = list(zip(input_data["teacher_text_sha256"], input_data["teacher_vector"], strict=True))
    logits, _, _ = teacher_logits(scoring, [texts[i] for i in rows], [stored[i] for i in rows])
    origin, exclude = learnable(
        {keys[i]: texts[i] for i in rows},
        (keys, input_data["label"].tolist()),
        test_fraction,
        recipe.seed,
    )
    made = transfer_rows(origin, exclude, recipe, student_encoder)
    made_logits = as_logits(scoring.probabilities([r.text for r in made]))
    return pd.DataFrame(
        {
            "item_key": [keys[i] for i in rows] + transfer_keys(keys, len(made)),
            "text": [texts[i] for i in rows] + [r.text for r in made],
            "logits": pack_rows(logits) + pack_rows(made_logits),
            "origin_key": [keys[i] for i in rows] + [r.origin_key for r in made],
            "transfer": [0] * len(rows) + [1] * len(made),
        }
    )


def load_teacher(
    blob: bytes, kind_name: str, encoder: EncoderRef | None, long_text: str
) -> Teacher:
    """A version's model as a teacher; one that reads vectors with its set's ``encoder``,
    embedding long texts as ``long_text`` says."""
    kind = model_kind(kind_name)
    teacher = Teacher(kind.load(blob), kind.reads, long_text=long_text)
    if kind.reads == "vector":
        teacher.encoder = load_encoder(encoder or EncoderRef())
    return teacher


def teacher_logits(
    teacher: Teacher,
    texts: Sequence[str],
    stored: Sequence[tuple[Any, Any]],
    progress: Progress | None = None,
    stage: str | None = None,
) -> tuple[np.ndarray, np.ndarray | None, int]:
    """The teacher's logits for ``texts``, its encoder's vectors of them (None for a teacher
    that reads text) and how many came from stored vectors: a teacher that reads vectors
    reuses a text's ``stored`` ``(sha256, vector)`` when the vector was made from that very
    text; the rest are scored, ``progress`` hearing of them in ``stage``."""
    logits = np.zeros((len(texts), len(teacher.classes)), dtype=np.float32)
    vectors = None
    same = []
    if teacher.reads == "vector":
        vectors = np.zeros((len(texts), teacher.encoder.dim), dtype=np.float32)
        same = [n for n, (sha, _) in enumerate(stored) if sha == text_sha256(texts[n])]
    if same:
        vectors[same] = unpack_rows([stored[n][1] for n in same], teacher.encoder.dim)
        logits[same] = as_logits(teacher.probabilities_of_vectors(vectors[same]))
    todo = np.setdiff1d(np.arange(len(texts)), same)
    if len(todo):
        if progress is not None:
            progress(0, len(todo), stage)
        probabilities, embedded = teacher.scored([texts[n] for n in todo], progress)
        logits[todo] = as_logits(probabilities)
        if vectors is not None and embedded is not None:
            vectors[todo] = embedded
    return logits, vectors, len(same)


def learnable(
    texts: Mapping[str, Any],
    labelled: tuple[Sequence[str], Sequence[Any]],
    test_fraction: float,
    seed: int,
) -> tuple[dict[str, str], list[str]]:
    """``(origin, exclude)``: the rows of ``texts`` transfer rows may be made from (never one
    ``train`` holds out of the ``labelled`` keys and labels at ``test_fraction`` and ``seed``),
    and the held-out rows' texts, which no transfer row may equal."""
    keys, labels = labelled
    held_out = held_out_keys(keys, labels, test_fraction=test_fraction, seed=seed)
    return learnable_rows(texts, held_out)


def transfer_rows(
    origin: Mapping[str, str],
    exclude: Sequence[str],
    recipe: TransferRecipe,
    student_encoder: EncoderRef | None,
) -> list[TransferRow]:
    """``recipe``'s transfer rows made from ``origin``, never equal to a text of ``exclude``,
    replacing words by their neighbours in ``student_encoder``'s token embeddings (none
    without its tokenizer and graph)."""
    neighbours = None
    if student_encoder is not None and student_encoder.tokenizer_json and student_encoder.onnx:
        neighbours = encoder_neighbours(
            student_encoder.tokenizer_json, bytes(student_encoder.onnx), origin, recipe.neighbours
        )
    return build_transfer(origin, recipe, neighbours, exclude)
