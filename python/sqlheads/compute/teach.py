"""``heads.distill @teacher_head`` on SQL Server: a deployed version teaches in the server's
Python (the ``sp_execute_external_script`` contract: a DataFrame in, a DataFrame out; its
embedded half, with the cache of transfer rows, is :mod:`sqlheads.verbs.teach`).

T-SQL hands over the student's rows (``item_key``, ``text``, ``label``, and, where the teacher's
set stored one, that set's ``teacher_vector`` and ``teacher_text_sha256`` for the key) with the
teacher version's blob and kind, and for a teacher that reads vectors its encoder. Python
returns one row per student row with the teacher's logits (from the stored vector when it was
made from the same text, else scored now) and one per transfer row it made from the rows the
student may learn from and scored (:mod:`engine.students.transfer`): ``item_key`` (made up for
a transfer row), ``text``, ``logits``, ``origin_key``, ``transfer`` (1 for a transfer row).
On SQL Server the transfer rows are made and scored on every call: the cache of
``transfer_rows`` is the embedded host's (the CLI's).
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

from sqlheads.compute.columns import in_key_order
from sqlheads.engine.encoders.onnx_encoder import load_encoder
from sqlheads.engine.evaluation import TEST_FRACTION, held_out_keys
from sqlheads.engine.kinds import model_kind
from sqlheads.engine.students.soft_labels import Teacher, as_logits
from sqlheads.engine.students.transfer import (
    DEFAULT_ROWS,
    TransferRecipe,
    build_transfer,
    encoder_neighbours,
    learnable_rows,
    transfer_keys,
)
from sqlheads.errors import InvalidParameterError, QueryShapeError
from sqlheads.store.vectors import pack_rows, unpack_rows

TEACH_INPUT = ("item_key", "text", "label", "teacher_vector", "teacher_text_sha256")


def teach(
    input_data: pd.DataFrame,
    *,
    teacher_blob: bytes,
    teacher_sha256: str,
    teacher_kind: str,
    encoder_sha256: str | None = None,
    encoder_onnx: bytes | None = None,
    tokenizer_json: str | None = None,
    dim: int | None = None,
    max_length: int | None = None,
    long_text: str = "window",
    student_tokenizer_json: str | None = None,
    student_encoder_onnx: bytes | None = None,
    transfer_rows: int = DEFAULT_ROWS,
    test_fraction: float = TEST_FRACTION,
    seed: int = 0,
) -> pd.DataFrame:
    """The teacher's logits for the student's rows and for its transfer rows (see the module)."""
    missing = [c for c in TEACH_INPUT if c not in input_data.columns]
    if missing:
        raise QueryShapeError(f"the teaching input lacks column(s) {', '.join(missing)}")
    if hashlib.sha256(teacher_blob).hexdigest() != teacher_sha256:
        raise InvalidParameterError(
            f"the teacher's blob does not hash to {teacher_sha256[:12]}: the stored version is "
            "corrupt; train and deploy the teacher head again"
        )
    kind = model_kind(teacher_kind)
    teacher = Teacher(kind.load(teacher_blob), kind.reads, long_text=long_text)
    if kind.reads == "vector":
        teacher.encoder = load_encoder(
            encoder_sha256 or "",
            onnx=encoder_onnx,
            tokenizer_json=tokenizer_json,
            dim=dim,
            max_length=max_length,
        )
    # In key order: the teacher scores the same rows in the same batches, and the transfer
    # rows are the same, whatever order T-SQL handed them over in.
    input_data = in_key_order(input_data, "source")
    keys = input_data["item_key"].tolist()
    texts = [None if t is None or t != t else str(t) for t in input_data["text"]]
    rows = [i for i, t in enumerate(texts) if t is not None and t.strip()]
    logits = np.zeros((len(rows), len(teacher.classes)), dtype=np.float32)
    scored = np.ones(len(rows), dtype=bool)
    if kind.reads == "vector":
        stored, hashes = input_data["teacher_vector"], input_data["teacher_text_sha256"]
        same = [
            n
            for n, i in enumerate(rows)
            if hashes.iloc[i] == hashlib.sha256(texts[i].encode("utf-8")).hexdigest()
        ]
        if same:
            vectors = unpack_rows([stored.iloc[rows[n]] for n in same], teacher.encoder.dim)
            logits[same] = as_logits(teacher.probabilities_of_vectors(vectors))
            scored[same] = False
    todo = np.flatnonzero(scored)
    if len(todo):
        logits[todo] = as_logits(teacher.probabilities([texts[rows[n]] for n in todo]))
    held_out = held_out_keys(
        keys, input_data["label"].tolist(), test_fraction=test_fraction, seed=seed
    )
    origin, exclude = learnable_rows({keys[i]: texts[i] for i in rows}, held_out)
    recipe = TransferRecipe(rows=transfer_rows, seed=seed).validate()
    neighbours = (
        encoder_neighbours(student_tokenizer_json, student_encoder_onnx, origin, recipe.neighbours)
        if student_tokenizer_json and student_encoder_onnx
        else None
    )
    made = build_transfer(origin, recipe, neighbours, exclude)
    made_logits = as_logits(teacher.probabilities([r.text for r in made]))
    return pd.DataFrame(
        {
            "item_key": [keys[i] for i in rows] + transfer_keys(keys, len(made)),
            "text": [texts[i] for i in rows] + [r.text for r in made],
            "logits": pack_rows(logits) + pack_rows(made_logits),
            "origin_key": [keys[i] for i in rows] + [r.origin_key for r in made],
            "transfer": [0] * len(rows) + [1] * len(made),
        }
    )
