"""Students on a speed dial: the encoder student in depths, learning its teacher's vectors.

A teacher head keeps the vectors its encoder made of the transfer rows beside their soft labels
(float16), so a second student embeds nothing; ``--layers N`` keeps N of MiniLM's layers (out
of range: 50012, before a teacher scores a row); a shallow student's ONNX graph is checked
against PyTorch (a broken graph is refused, 50010) and scores through ``compute/`` as the
embedded host does. Real MiniLM weights, real SQLite, a few CPU steps on tens of rows: the
mechanics, not the accuracy (``python -m bench students`` measures that).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import onnx
import pandas as pd
import pytest
from conftest import count_rows
from sqlalchemy import select
from typer.testing import CliRunner

from sqlheads import cli, host, plots, procedures
from sqlheads.engine import kinds
from sqlheads.engine.encoders import text_classifier
from sqlheads.engine.encoders.onnx_encoder import OnnxEncoder
from sqlheads.engine.students.distillation import DistillParams
from sqlheads.engine.students.encoder import (
    FEATURE_LAYERS,
    FEATURE_WEIGHT,
    EncoderStudent,
    EncoderStudentParams,
    default_feature_weight,
    default_lr,
    kept_layers,
)
from sqlheads.errors import ExportParityError, InvalidParameterError
from sqlheads.store import schema as s
from sqlheads.store.repository import Store
from sqlheads.store.vectors import HALF_DTYPE, unpack_rows

LABELS = "SELECT item_key, label FROM reviews"
TRANSFER_ROWS = 60
SHALLOW = {"student": "encoder", "layers": 1, "max_length": 32, "max_steps": 2, "device": "cpu"}


class EmbeddedTexts:
    """Counts the texts every encoder embeds while it is installed (a spy on the real
    ``OnnxEncoder.encode``, which still runs)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.texts = 0
        real = OnnxEncoder.encode

        def counted(encoder, texts, **kwargs):
            self.texts += len(texts)
            return real(encoder, texts, **kwargs)

        monkeypatch.setattr(OnnxEncoder, "encode", counted)


@pytest.fixture(scope="module")
def dial(tmp_path_factory, embedded_template: Path, copy_sqlite) -> dict:
    """A deployed head teaches twice on the session's sample: a TF-IDF student first (the
    teacher scores the transfer rows, keeping its vectors), then a one-layer encoder student
    told to learn the soft labels and the vectors (under FEATURE_LAYERS layers it would learn
    the soft labels alone), counting the texts embedded meanwhile."""
    store = copy_sqlite(embedded_template, tmp_path_factory.mktemp("dial") / "heads.db")
    host.train(store, head="teacher", set_name="reviews", labels=LABELS, deploy="always")
    taught = {"head": "sentiment", "set_name": "reviews", "labels": LABELS}
    taught |= {"teacher_head": "teacher", "transfer_rows": TRANSFER_ROWS}
    with pytest.MonkeyPatch.context() as patch:
        embedded = EmbeddedTexts(patch)
        first = host.distill(store, student="tfidf", **taught)
        after_first = embedded.texts
        second = host.distill(
            store, batch_size=8, deploy="always", feature_weight=2.0, **SHALLOW, **taught
        )
    return {
        "store": store,
        "first": first,
        "second": second,
        "embedded": (after_first, embedded.texts - after_first),
    }


def test_the_teachers_vectors_are_kept_beside_its_soft_labels_and_never_embedded_twice(dial):
    store: Store = dial["store"]
    first_embedded, second_embedded = dial["embedded"]
    # The first student's teacher embedded the transfer rows once (its own rows: the set's
    # stored vectors); the second student's embedded nothing at all.
    assert first_embedded == TRANSFER_ROWS and second_embedded == 0
    assert dial["first"]["teacher_rows_scored"]["transfer_rows_scored"] == TRANSFER_ROWS
    assert dial["second"]["teacher_rows_scored"] == {
        "own_rows_from_stored_vectors": 600,
        "own_rows_scored": 0,
        "transfer_rows_scored": 0,
        "transfer_rows_cached": TRANSFER_ROWS,
    }
    with store.engine.connect() as c:
        cached = c.execute(
            select(s.transfer_rows.c.text, s.transfer_rows.c.vector).order_by(
                s.transfer_rows.c.ordinal
            )
        ).all()
    assert len(cached) == TRANSFER_ROWS
    kept = unpack_rows([r.vector for r in cached], 384, HALF_DTYPE)
    # float16 of the teacher encoder's own vectors of those texts
    encoder = store.encoder(store.require_set("reviews").encoder_id)
    onnx_bytes, tokenizer_json = store.encoder_bytes(encoder.encoder_id)
    again = OnnxEncoder(onnx_bytes, tokenizer_json, dim=384, max_length=encoder.max_length)
    fresh = again.encode([r.text for r in cached]).vectors
    cosine = np.sum(kept * fresh, axis=1) / np.linalg.norm(kept, axis=1)
    assert cosine.min() > 0.999


def test_a_shallow_student_learns_the_vectors_of_every_row_it_distils_on(dial):
    second = dial["second"]
    assert second["kind"] == "encoder_student"
    with dial["store"].engine.connect() as c:
        row = c.execute(
            select(s.models.c.metrics_json, s.models.c.params_json).where(
                s.models.c.model_id == second["model_id"]
            )
        ).one()
    metrics, params = json.loads(row.metrics_json), json.loads(row.params_json)
    assert metrics["layers_kept"] == [0] and params["layers"] == 1
    # every row distilled on (480 training rows, the transfer rows) had its teacher's vector
    assert metrics["feature_rows"] == second["rows_train"] == 480 + TRANSFER_ROWS
    assert params["feature_weight"] == metrics["feature_weight"] == 2.0  # as told
    assert second["parameters"] < 15_000_000  # MiniLM-L6 keeps 22.7 M; one layer of six


def test_scoring_a_shallow_student_through_compute_equals_the_embedded_hosts(dial, rt_sample):
    store: Store = dial["store"]
    scored = host.predict(store, head="sentiment", set_name="reviews")
    assert scored["kind"] == "encoder_student" and scored["rows"] == len(rt_sample)
    hosted = store.read_view("latest_predictions", head="sentiment").set_index("item_key")
    model = store.find_model("sentiment", dial["second"]["version"])
    blob = store.model_blob(model.model_id)

    def through_compute(rows: pd.DataFrame) -> pd.DataFrame:
        output, number, message = procedures.sql_server_call(
            "predict",
            rows[["item_key", "text"]],
            model_sha256=hashlib.sha256(blob).hexdigest(),
            model_blob=blob,
            kind="encoder_student",
        )
        assert number == 0, message
        return output.set_index("item_key")

    same_order = through_compute(rt_sample).loc[hosted.index]  # as the host read them
    assert (same_order["label"] == hosted["label"]).all()
    np.testing.assert_array_equal(same_order["score"], hosted["score"])
    # In another order, or in parts, the rows share other batches: the int8 graph quantises each
    # row on its own scale (engine/encoders/int8_graph.py), so a row's score does not depend on
    # them.
    # A text is scored in a batch of its own token length, unpadded: its score does not move
    # by a float's last bit with the rows beside it either (it did, with a padded width).
    shuffled = through_compute(rt_sample.sample(frac=1.0, random_state=7)).loc[hosted.index]
    np.testing.assert_array_equal(shuffled["score"], hosted["score"])
    assert (shuffled["label"] == hosted["label"]).all()
    # In parts of 7 rows (fewer rows a batch) too: the mean over the tokens is a running sum
    # along the text (export.masked_mean). A sum over the padded axis moved 178 of these 600
    # scores by a float's last bits, and one by 5e-4 where its pooled vector's int8 value
    # moved a step (issue 39).
    rows = rt_sample.sample(frac=1.0, random_state=8)
    parts = pd.concat([through_compute(rows[i : i + 7]) for i in range(0, len(rows), 7)])
    parts = parts.loc[hosted.index]
    assert (parts["label"] == hosted["label"]).all()
    np.testing.assert_array_equal(parts["score"], hosted["score"])


def test_plot_students_names_each_encoder_students_depth(dial, tmp_path: Path):
    drawn = plots.plot_students(dial["store"], "sentiment", tmp_path / "students.png")
    kinds = {p["kind"] for p in drawn["points"]}
    assert "encoder_student L1" in kinds and "tfidf_student" in kinds
    assert (tmp_path / "students.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("layers", [0, 7])
def test_layers_out_of_range_are_refused_with_a_number_before_a_teacher_scores(
    tmp_path: Path, embedded_template: Path, copy_sqlite, layers: int
):
    store = copy_sqlite(embedded_template, tmp_path / "heads.db")
    host.train(store, head="teacher", set_name="reviews", labels=LABELS, deploy="always")
    command = ["--url", str(store.engine.url), "--json", "distill", "--head", "sentiment"]
    command += ["--set", "reviews", "--labels", LABELS, "--teacher-head", "teacher"]
    result = CliRunner().invoke(
        cli.app, [*command, "--student", "encoder", "--layers", str(layers)]
    )
    assert result.exit_code != 0
    error = json.loads(result.stdout)
    assert error["number"] == 50012
    # below 1: out of any model's range; above its depth: the model's own (MiniLM-L6: 6)
    bound = "of at least 1" if layers < 1 else "between 1 and 6"
    assert f"layers={layers} is out of range" in error["error"] and bound in error["error"]
    assert count_rows(store, s.transfer_rows) == 0 and count_rows(store, s.transfer_sets) == 0
    word = CliRunner().invoke(cli.app, [*command, "--layers", "2"])  # the word student has none
    assert (
        json.loads(word.stdout)["number"] == 50012 and "layers" in json.loads(word.stdout)["error"]
    )


def test_a_feature_weight_without_a_teachers_vectors_is_refused(store: Store, taught_tiny):
    taught_tiny[["item_key", "text", "label"]].to_sql("reviews", store.engine, index=False)
    taught_tiny[["item_key", "negative", "positive"]].to_sql(
        "teacher_logits", store.engine, index=False
    )
    host.embed(store, set_name="reviews", source="SELECT item_key, text FROM reviews")
    soft = "SELECT item_key, negative, positive FROM teacher_logits"  # logits, no vectors
    with pytest.raises(InvalidParameterError, match="teacher gave none") as refused:
        host.distill(
            store, head="sentiment", set_name="reviews", labels=LABELS, soft_labels=soft,
            feature_weight=1.0, **SHALLOW,
        )  # fmt: skip
    assert refused.value.number == 50012 and host.models(store).empty


def test_request_teacher_refuses_a_student_deeper_than_its_model(embedded: Store):
    command = ["--url", str(embedded.engine.url), "--json", "request-teacher", "--head", "h"]
    command += ["--set", "reviews", "--labels", LABELS, "--student-layers", "9"]
    result = CliRunner().invoke(cli.app, command)
    error = json.loads(result.stdout)
    assert error["number"] == 50012 and "layers=9 is out of range" in error["error"]
    assert count_rows(embedded, s.job_queue) == 0


def test_a_shallower_student_learns_faster_unless_told():
    assert default_lr("all-MiniLM-L6-v2", None) == default_lr("all-MiniLM-L6-v2", 6) == 5e-5
    assert default_lr("all-MiniLM-L6-v2", 3) == 2e-4
    kind = kinds.student_kind("encoder")
    shallow = kinds.student_params("encoder", layers=2)  # as a door builds it
    assert kind.distill_params(DistillParams(), shallow).lr == 2e-4
    assert kind.distill_params(DistillParams(lr=1e-5), shallow).lr == 1e-5  # the caller's
    assert kind.distill_params(DistillParams()).lr == 5e-5


def test_the_layers_kept_are_spread_from_the_first():
    assert kept_layers(6, 6) == [0, 1, 2, 3, 4, 5]
    assert kept_layers(6, 3) == [0, 2, 4] and kept_layers(6, 2) == [0, 3]
    assert kept_layers(6, 1) == [0]
    assert kept_layers(6, 3, "first") == [0, 1, 2]
    assert kept_layers(6, 3, "spread_to_last") == [1, 3, 5]
    assert kept_layers(6, 2, "spread_to_last") == [2, 5]


def _shallow_fit(
    taught_tiny: pd.DataFrame,
    vectors: np.ndarray | None,
    pooling: str = "mean",
    feature_weight: float | None = FEATURE_WEIGHT,
) -> EncoderStudent:
    params = EncoderStudentParams(
        max_length=32, batch_size=8, max_steps=1, device="cpu", layers=1, pooling=pooling,
        feature_weight=feature_weight,
    )  # fmt: skip
    return EncoderStudent(params).fit(
        taught_tiny["text"].tolist()[:16],
        ["negative", "positive"],
        taught_tiny[["negative", "positive"]].to_numpy(np.float32)[:16],
        np.full(16, -1),
        teacher_vectors=vectors,
        distill=DistillParams(epochs=1, lr=5e-5),
    )


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_a_shallow_students_onnx_graph_agrees_with_pytorch(taught_tiny: pd.DataFrame, pooling):
    vectors = np.random.default_rng(0).normal(size=(16, 768)).astype(np.float32)
    vectors[::4] = np.nan  # rows without a teacher vector teach the soft labels alone
    student = _shallow_fit(taught_tiny, vectors, pooling)
    assert student.layers_kept_ == [0] and student.feature_rows_ == 12
    assert student.parity_max_abs_diff_ is not None and student.parity_max_abs_diff_ <= 1e-3
    graph = onnx.load_from_string(student.to_bytes())
    layers = {
        n.name.split("/layer.")[1].split("/")[0] for n in graph.graph.node if "/layer." in n.name
    }
    assert layers == {"0"}  # one transformer layer in the shipped graph, no projection
    meta = {p.key: p.value for p in graph.metadata_props}
    assert json.loads(meta["layers"]) == [0] and "projection" not in str(graph.graph.initializer)
    assert student.quantization_ == "int8"


def test_the_teachers_vectors_are_learnt_by_default_from_three_layers_up(taught_tiny):
    assert FEATURE_LAYERS == 3 and FEATURE_WEIGHT > 0
    assert [default_feature_weight(n) for n in range(1, 7)] == [0.0, 0.0] + [FEATURE_WEIGHT] * 4
    vectors = np.random.default_rng(0).normal(size=(16, 768)).astype(np.float32)
    student = _shallow_fit(taught_tiny, vectors, feature_weight=None)  # one layer, none told
    assert student.feature_weight_ == 0.0 and student.feature_rows_ == 0


def test_a_shallow_students_parity_check_refuses_a_broken_graph(taught_tiny, monkeypatch):
    traced = text_classifier._trace

    def broken(model, tokenizer) -> bytes:
        graph = onnx.load_from_string(traced(model, tokenizer))
        for weight in graph.graph.initializer:
            if "classifier.weight" in weight.name:  # the graph no longer is the model
                values = onnx.numpy_helper.to_array(weight) * 3.0
                weight.CopyFrom(onnx.numpy_helper.from_array(values, weight.name))
        return graph.SerializeToString()

    monkeypatch.setattr(text_classifier, "_trace", broken)
    with pytest.raises(ExportParityError, match="encoder student's ONNX export") as refused:
        _shallow_fit(taught_tiny, None)
    assert refused.value.number == 50010
