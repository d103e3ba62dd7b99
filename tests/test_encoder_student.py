"""The encoder student: MiniLM distilled on soft labels, exported to int8 ONNX, scored from text.

Real MiniLM weights, real onnxruntime, real SQLite; a few CPU steps on tens of rows (the
mechanics and the export checks, not the student's accuracy).
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import pandas as pd
import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from sqlheads import cli, host
from sqlheads.engine import kinds
from sqlheads.engine.encoders import text_classifier
from sqlheads.engine.encoders.text_classifier import PARITY_TOLERANCE, OnnxTextClassifier, softmax
from sqlheads.engine.students.distillation import DistillParams
from sqlheads.engine.students.encoder import (
    INT8_TOLERANCE,
    PARITY_ROWS,
    EncoderStudent,
    EncoderStudentParams,
)
from sqlheads.errors import ExportParityError, InvalidParameterError, UnknownKindError
from sqlheads.store import schema
from sqlheads.store.repository import Store

LABELS = "SELECT item_key, label FROM reviews"
SOFT = "SELECT item_key, negative, positive FROM teacher_logits"


def test_the_export_is_checked_fp32_against_pytorch_and_int8_against_fp32(
    encoder_student, taught_tiny
):
    # Measured agreement, recorded on the student (and in its version's metrics by distill).
    assert (
        encoder_student.parity_max_abs_diff_ is not None
        and encoder_student.parity_max_abs_diff_ <= PARITY_TOLERANCE <= 1e-3
    )
    assert (
        encoder_student.int8_max_abs_diff_ is not None
        and encoder_student.int8_max_abs_diff_ <= INT8_TOLERANCE
    )
    # Agreement of predicted classes (near-even probabilities of a 3-step student may flip):
    # int8 can change a row's class only by moving its probability across 0.5, so every
    # parity row further from 0.5 in the shipped int8 graph than the largest measured move
    # counts as agreeing. The same graph on the same rows in the same batches as the check.
    assert encoder_student.quantization_ != "fp32"
    int8 = softmax(
        OnnxTextClassifier(encoder_student.onnx_).logits(taught_tiny["text"].tolist()[:PARITY_ROWS])
    )
    clear = np.abs(int8[:, 1] - 0.5) > encoder_student.int8_max_abs_diff_
    assert encoder_student.int8_agreement_ >= clear.mean()
    graph = onnx.load_from_string(encoder_student.to_bytes())
    meta = {p.key: p.value for p in graph.metadata_props}
    assert meta["kind"] == "encoder_student" and json.loads(meta["classes"]) == [
        "negative",
        "positive",
    ]
    assert meta["max_length"] == "32" and "tokenizer_json" in meta
    # int8: integer weights in the graph, ~4x smaller than MiniLM's 91 MB fp32 graph
    assert any(i.data_type == onnx.TensorProto.INT8 for i in graph.graph.initializer)
    assert len(encoder_student.to_bytes()) < 40e6
    assert encoder_student.n_parameters_ > 20e6 and encoder_student.steps_ == 3


def test_an_fp32_export_beyond_the_parity_tolerance_is_refused(taught_tiny, monkeypatch):
    # Only a bit-identical graph meets a tolerance of 0: both the fused and the plain graph
    # are compared with PyTorch (they differ by about 1e-7 here), and the student is refused.
    monkeypatch.setattr(text_classifier, "PARITY_TOLERANCE", 0.0)
    one_step = EncoderStudentParams(max_length=32, batch_size=8, max_steps=1, device="cpu")
    with pytest.raises(ExportParityError, match="encoder student's ONNX export") as refused:
        EncoderStudent(one_step).fit(
            taught_tiny["text"].tolist()[:16],
            ["negative", "positive"],
            taught_tiny[["negative", "positive"]].to_numpy(np.float32)[:16],
            np.full(16, -1),
            distill=DistillParams(epochs=1, lr=5e-5),
        )
    assert refused.value.number == 50010


def test_an_int8_graph_beyond_the_tolerance_ships_the_fp32_graph_instead(taught_tiny):
    # A tolerance no quantisation meets: both int8 graphs are measured, and the student keeps
    # its checked fp32 graph rather than being thrown away after its training.
    strict = EncoderStudentParams(
        max_length=32, batch_size=8, max_steps=1, device="cpu", int8_tolerance=0.0
    )
    student = EncoderStudent(strict).fit(
        taught_tiny["text"].tolist()[:16],
        ["negative", "positive"],
        taught_tiny[["negative", "positive"]].to_numpy(np.float32)[:16],
        np.full(16, -1),
        distill=DistillParams(epochs=1, lr=5e-5),
    )
    assert student.quantization_ == "fp32" and student.int8_max_abs_diff_ > 0
    graph = onnx.load_from_string(student.to_bytes())
    assert not any(i.data_type == onnx.TensorProto.INT8 for i in graph.graph.initializer)
    assert student.predict_proba(taught_tiny["text"].tolist()[:4]).shape == (4, 2)


def test_a_stored_blob_scores_text_alone_as_the_fitted_student(encoder_student, taught_tiny):
    loaded = kinds.model_kind("encoder_student").load(encoder_student.to_bytes())
    texts = taught_tiny["text"].tolist()[:10]
    np.testing.assert_allclose(
        loaded.predict_proba(texts), encoder_student.predict_proba(texts), atol=1e-6
    )
    assert loaded.classes_ == ["negative", "positive"]
    with pytest.raises(InvalidParameterError, match="not a teacher"):
        kinds.model_kind("teacher").load(encoder_student.to_bytes())


def test_encoder_is_a_student_of_distill():
    assert kinds.student_kind("encoder").name == "encoder_student"
    assert kinds.model_kind("encoder_student").reads == "text"
    with pytest.raises(UnknownKindError, match="encoder"):
        kinds.student_kind("transformer")
    with pytest.raises(InvalidParameterError, match="max_length"):
        EncoderStudentParams(max_length=4)


def test_distill_an_encoder_student_then_predict_into_latest_predictions(
    store: Store, taught_tiny: pd.DataFrame
):
    taught_tiny[["item_key", "text", "label"]].to_sql("reviews", store.engine, index=False)
    taught_tiny[["item_key", "negative", "positive"]].to_sql(
        "teacher_logits", store.engine, index=False
    )
    host.embed(store, set_name="reviews", source="SELECT item_key, text FROM reviews")
    result = CliRunner().invoke(
        cli.app,
        [
            "--url",
            str(store.engine.url),
            "distill",
            "--head",
            "sent",
            "--set",
            "reviews",
            "--labels",
            LABELS,
            "--soft-labels",
            SOFT,
            "--student",
            "encoder",
            "--max-length",
            "32",
            "--max-steps",
            "2",
            "--batch-size",
            "8",
            "--device",
            "cpu",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "distilling sent: 2 of 2 steps (100 %)" in result.stderr  # issue 20: progress
    summary = host.models(store).iloc[0]
    assert summary["kind"] == "encoder_student" and summary["teacher"] == "sent_teacher"
    assert summary["is_deployed"] == 1  # the head's first version, if-better
    with store.engine.connect() as c:
        stored = c.execute(
            select(schema.models.c.metrics_json, schema.models.c.params_json)
        ).first()
    assert json.loads(stored.params_json)["gold_weight"] == 0.5  # the kind's: none was given
    metrics = json.loads(stored.metrics_json)
    assert metrics["int8_max_abs_diff"] <= INT8_TOLERANCE and "int8_agreement" in metrics
    # Reusing the stored teacher by name (no soft-labels query) is what run_teacher does for its
    # encoder student: tests/test_teacher.py checks that version.

    scored = host.predict(store, head="sent", set_name="reviews")
    assert scored["kind"] == "encoder_student" and scored["rows"] == len(taught_tiny)
    latest = store.read_view("latest_predictions", head="sent")
    assert len(latest) == len(taught_tiny) and set(latest["label"]) <= {"negative", "positive"}
    assert (latest["version"] == 1).all()
