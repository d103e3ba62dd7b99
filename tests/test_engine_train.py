"""Heads: training refusals, versions, deployment, prediction and the views."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import onnxruntime as ort
import pandas as pd
import pytest
import torch
from sqlalchemy import func, select, text, update

from sqlheads import host, procedures
from sqlheads.compute import columns
from sqlheads.engine.heads import HeadClassifier, HeadParams, default_hidden
from sqlheads.errors import (
    DimensionMismatchError,
    EncoderMismatchError,
    InUseError,
    InvalidNameError,
    InvalidParameterError,
    MissingEmbeddingsError,
    NotFoundError,
    QueryShapeError,
    SingleClassError,
    TooFewRowsError,
)
from sqlheads.store import schema
from sqlheads.store.repository import Store
from sqlheads.store.vectors import unpack_rows
from sqlheads.verbs import encoders

LABELS = "SELECT item_key, label FROM reviews"


def _train(store: Store, labels: str = LABELS, **kwargs):
    return host.train(store, head="sentiment", set_name="reviews", labels=labels, **kwargs)


def _models(store: Store) -> int:
    with store.engine.connect() as c:
        return int(c.execute(select(func.count()).select_from(schema.models)).scalar_one())


def test_train_records_metrics_on_a_stratified_held_out_split(embedded: Store, rt_sample):
    result = _train(embedded)
    assert result["version"] == 1 and result["deployed"]
    assert result["rows_test"] == 120 and result["rows_train"] == 480
    # 600 real reviews are enough for a frozen-MiniLM head to be well above chance.
    assert result["accuracy"] > 0.65
    record = embedded.model_record(result["model_id"])
    metrics = json.loads(record["metrics_json"])
    matrix = np.array(metrics["confusion_matrix"])
    assert matrix.sum() == result["rows_test"]
    assert [metrics["per_class"][c]["support"] for c in metrics["classes"]] == [60, 60]
    curve = json.loads(record["loss_curve_json"])
    assert 1 <= len(curve) <= result["params"]["epochs"] and curve[-1] < curve[0]
    # The stored ONNX export scores like the stored blob (model_record leaves both blobs out).
    with embedded.engine.connect() as c:
        blob, onnx_bytes = c.execute(
            select(schema.models.c.blob, schema.models.c.onnx).where(
                schema.models.c.model_id == result["model_id"]
            )
        ).one()
    head = HeadClassifier.from_bytes(bytes(blob))
    X = np.random.default_rng(0).normal(size=(8, head.n_features_in_)).astype(np.float32)
    session = ort.InferenceSession(bytes(onnx_bytes), providers=["CPUExecutionProvider"])
    assert np.allclose(session.run(None, {"vector": X})[0], head.predict_proba(X), atol=1e-5)


@pytest.mark.parametrize(
    ("labels", "error", "match"),
    [
        ("SELECT item_key, 'positive' AS label FROM reviews", SingleClassError, "one class"),
        (
            "SELECT item_key, CASE WHEN rowid <= 3 THEN 'rare' ELSE label END AS label "
            "FROM reviews",
            TooFewRowsError,
            "'rare' \\(3\\)",
        ),
        (
            "SELECT item_key, label FROM reviews UNION ALL "
            "SELECT 'ghost-' || item_key, label FROM reviews WHERE rowid <= 7",
            MissingEmbeddingsError,
            "7 of 607",
        ),
        (
            "SELECT item_key, CASE WHEN rowid = 1 THEN NULL ELSE label END AS label FROM reviews",
            InvalidParameterError,
            "1 label\\(s\\) are NULL",
        ),
        ("SELECT item_key, label FROM reviews WHERE 0", MissingEmbeddingsError, "no rows"),
        ("SELECT item_key AS id, label FROM reviews", QueryShapeError, "missing item_key"),
        (
            "SELECT item_key, label FROM reviews UNION ALL "
            "SELECT item_key, label FROM reviews WHERE rowid = 1",
            InvalidParameterError,
            "more than once",
        ),
    ],
)
def test_bad_labels_are_refused_and_no_version_is_written(embedded, labels, error, match):
    with pytest.raises(error, match=match):
        _train(embedded, labels=labels)
    assert _models(embedded) == 0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"epochs": 0}, "epochs=0"),
        ({"lr": -1.0}, "lr=-1.0"),
        ({"test_fraction": 1.5}, "test_fraction=1.5"),
        ({"deploy": "sometimes"}, "if-better"),
    ],
)
def test_bad_parameters_are_refused(embedded, kwargs, match):
    with pytest.raises(InvalidParameterError, match=match):
        _train(embedded, **kwargs)


def test_missing_set_head_and_bad_names(embedded):
    with pytest.raises(NotFoundError, match="does not exist"):
        host.train(embedded, head="h", set_name="nope", labels=LABELS)
    with pytest.raises(InvalidNameError):
        host.train(embedded, head="x'; DROP TABLE models; --", set_name="reviews", labels=LABELS)
    with pytest.raises(NotFoundError, match="no trained versions"):
        host.predict(embedded, head="never_trained", set_name="reviews")


def test_encoder_mismatches_are_refused(embedded):
    encoders.register_encoder(embedded, name="minilm-fp32", quantization="none")
    with pytest.raises(EncoderMismatchError, match="holds vectors of encoder"):
        _train(embedded, encoder="minilm-fp32")
    _train(embedded)
    host.embed(
        embedded,
        set_name="reviews_fp32",
        source="SELECT item_key, text FROM reviews WHERE rowid <= 20",
        encoder="minilm-fp32",
    )
    with pytest.raises(EncoderMismatchError, match="embed the texts with the head's encoder"):
        host.predict(embedded, head="sentiment", set_name="reviews_fp32")


def test_vectors_of_the_wrong_size_are_refused(embedded):
    with embedded.engine.begin() as c:
        c.execute(
            update(schema.embeddings)
            .where(
                schema.embeddings.c.item_key.in_(
                    select(schema.embeddings.c.item_key).limit(1).scalar_subquery()
                )
            )
            .values(vector=b"\x00" * 12)
        )
    with pytest.raises(DimensionMismatchError, match="expected 1536"):
        _train(embedded)


def test_versions_deploy_rollback_and_predict_round_trip(embedded: Store, rt_sample):
    first = _train(embedded)
    second = _train(embedded, deploy="never", hidden=8, epochs=3)
    assert (second["version"], second["deployed"]) == (2, False)
    predicted = host.predict(embedded, head="sentiment", set_name="reviews")
    assert predicted["version"] == 1 and predicted["rows"] == len(rt_sample)

    # Predicting again replaces rows instead of adding them.
    host.predict(embedded, head="sentiment", set_name="reviews")
    with embedded.engine.connect() as c:
        assert c.execute(select(func.count()).select_from(schema.predictions)).scalar_one() == 600

    latest = embedded.read_view("latest_predictions", head="sentiment").set_index("item_key")
    assert len(latest) == 600 and set(latest["version"]) == {1}
    # The view's rows are the deployed head's scores of the stored vectors, row by row.
    set_id = embedded.require_set("reviews").set_id
    stored = embedded.vectors_for_keys(set_id, latest.index.tolist())
    head = HeadClassifier.from_bytes(embedded.model_blob(first["model_id"]))
    expected = head.predict_proba(unpack_rows([stored[k] for k in latest.index], 384))
    probabilities = np.array(
        [[json.loads(p)[c] for c in head.classes_] for p in latest["probabilities_json"]]
    )
    assert np.allclose(probabilities, expected, atol=1e-5)
    assert np.allclose(latest["score"], expected.max(axis=1), atol=1e-5)
    assert (latest["label"] == np.asarray(head.classes_)[expected.argmax(axis=1)]).all()

    host.deploy(embedded, head="sentiment", version=2)
    host.predict(
        embedded,
        head="sentiment",
        set_name="reviews",
        keys=("SELECT item_key FROM reviews WHERE rowid <= 10"),
    )
    latest = embedded.read_view("latest_predictions", head="sentiment")
    assert len(latest) == 600 and set(latest["version"]) == {2}  # deploy re-scored every row

    summary = embedded.read_view("model_summary", head="sentiment").set_index("version")
    assert summary.loc[2, "is_deployed"] == 1 and summary.loc[1, "is_deployed"] == 0
    for version, trained in ((1, first), (2, second)):
        row = summary.loc[version]
        assert row["model_id"] == trained["model_id"] and row["set_name"] == "reviews"
        assert row["encoder_name"] == trained["encoder"]
        assert row["rows_train"] == trained["rows_train"]
        assert row["rows_test"] == trained["rows_test"]
        assert row["accuracy"] == pytest.approx(trained["accuracy"], abs=1e-4)
        assert row["macro_f1"] == pytest.approx(trained["macro_f1"], abs=1e-4)

    rolled = host.roll_back(embedded, head="sentiment")
    assert rolled["version"] == 1  # re-scored in the roll-back's transaction
    latest = embedded.read_view("latest_predictions", head="sentiment")
    assert len(latest) == 600 and set(latest["version"]) == {1}

    with pytest.raises(NotFoundError, match="no version 9"):
        host.deploy(embedded, head="sentiment", version=9)


def test_if_better_deploys_only_an_improvement(embedded: Store):
    assert _train(embedded)["deployed"]
    worse = _train(embedded, hidden=2, epochs=1, lr=1e-4)
    assert not worse["deployed"]
    assert embedded.deployed_model("sentiment").version == 1


def test_drop_head_and_set(embedded: Store):
    _train(embedded)
    host.predict(embedded, head="sentiment", set_name="reviews")
    with pytest.raises(InUseError, match="drop those heads first") as refused:
        embedded.drop_set("reviews")
    assert refused.value.number == 50015
    assert embedded.drop_head("sentiment", 0) == 1
    embedded.drop_set("reviews")
    with embedded.engine.connect() as c:
        for table in ("models", "predictions", "embeddings", "deployments", "embedding_sets"):
            assert c.execute(text(f"SELECT COUNT(*) FROM {table}")).scalar_one() == 0


def test_head_onnx_export_matches_numpy_scoring():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 16)).astype(np.float32)
    y = np.where(X[:, 0] + X[:, 1] > 0, "up", "down")
    head = HeadClassifier(HeadParams(epochs=60)).fit(X, y)
    session = ort.InferenceSession(head.to_onnx(), providers=["CPUExecutionProvider"])
    onnx_probabilities = session.run(None, {"vector": X})[0]
    assert np.allclose(onnx_probabilities, head.predict_proba(X), atol=1e-5)
    restored = HeadClassifier.from_bytes(head.to_bytes())
    assert np.array_equal(restored.predict(X), head.predict(X))
    assert (head.predict(X) == y).mean() > 0.9


def test_default_hidden_suits_two_and_fifty_classes():
    assert default_hidden(2) == 64
    assert default_hidden(50) == 200
    assert default_hidden(1000) == 512


def test_procedure_contract_train_then_predict_on_dataframes():
    """The functions SQL Server calls, fed DataFrames shaped like their input queries."""
    rng = np.random.default_rng(1)
    centres = {"a": rng.normal(size=8), "b": rng.normal(size=8), "c": rng.normal(size=8)}
    rows = [
        (f"k{i}", label, (centres[label] + 0.1 * rng.normal(size=8)).astype("<f4").tobytes())
        for i, label in enumerate(["a", "b", "c"] * 30)
    ]
    frame = pd.DataFrame(rows, columns=list(columns.TRAIN_INPUT))
    trained = procedures.train(frame, dim=8, epochs=40)
    assert list(trained.columns) == list(columns.TRAIN_OUTPUT)
    row = trained.iloc[0]
    assert row["accuracy"] == 1.0 and bool(row["deploy"])
    scored = procedures.predict(
        frame[["item_key", "vector"]], model_sha256=row["sha256"], model_blob=row["blob"]
    )
    assert list(scored.columns) == list(columns.PREDICT_OUTPUT)
    assert (scored["label"].to_numpy() == frame["label"].to_numpy()).all()


def _separable(rows: int = 4_000, dim: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """Two classes a wide margin apart: every epoch after the first few only grows the logits."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, rows)
    X = rng.standard_normal((rows, dim)).astype(np.float32) + 4.0 * (2 * y[:, None] - 1)
    return X, y.astype(str)


def test_the_fast_recipe_stops_once_the_validation_loss_falls_by_less_than_tol():
    """Issue 16: on separable data the loss falls by ever fewer millionths, and with no
    threshold the fit ran until its last epoch."""
    X, y = _separable()
    params = HeadParams(recipe="fast", epochs=60)
    head = HeadClassifier(params).fit(X, y)
    assert len(head.validation_curve_) <= 10
    assert np.mean(head.predict(X) == y) == 1.0
    # The threshold is what stops it: counting any fall, the same fit runs on.
    every_fall = HeadClassifier(replace(params, tol=0.0)).fit(X, y)
    assert len(every_fall.validation_curve_) > 2 * len(head.validation_curve_)


def test_a_fall_under_tol_still_keeps_the_lowest_loss_epoch():
    X, y = _separable()
    head = HeadClassifier(HeadParams(recipe="fast", epochs=60, tol=0.05)).fit(X, y)
    assert head.best_epoch_ == int(np.argmin(head.validation_curve_)) + 1


@pytest.mark.parametrize("tol", [-1e-3, 1.0, float("nan")])
def test_tol_out_of_range_is_refused(tol: float):
    with pytest.raises(InvalidParameterError, match="tol"):
        HeadParams(tol=tol)


@pytest.mark.parametrize("patience", [1, 3])
def test_the_fast_recipe_stops_after_patience_epochs_without_improving_and_keeps_the_best(
    patience: int,
):
    """Overlapping classes and a high rate: the validation loss turns up within the epochs."""
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 4_000)
    X = rng.standard_normal((4_000, 32)).astype(np.float32) + 0.3 * y[:, None]
    params = HeadParams(recipe="fast", epochs=200, lr=3e-2, hidden=256, dropout=0.0)
    head = HeadClassifier(replace(params, patience=patience)).fit(X, y.astype(str))
    curve = head.validation_curve_
    best = int(np.argmin(curve))
    assert len(curve) < params.epochs  # it stopped early
    assert head.best_epoch_ == best + 1
    assert len(curve) == best + 1 + patience  # exactly `patience` epochs past the best
    # The weights kept are the best epoch's: the held-back rows score that epoch's loss.
    generator = torch.Generator().manual_seed(params.seed)
    held_back = torch.randperm(len(X), generator=generator)[: int(len(X) * 0.1)].numpy()
    probabilities = head.predict_proba(X[held_back])
    targets = y[held_back]
    loss = -np.mean(np.log(probabilities[np.arange(len(targets)), targets]))
    assert loss == pytest.approx(curve[best], rel=1e-4)
