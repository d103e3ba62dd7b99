"""The contract every model kind keeps, run over the registry as scikit-learn's
``parametrize_with_checks`` runs over estimators: fitted the way the kind is fitted, a model
serialises to bytes without pickle, loads again through its kind, and scores as it did.

Real parts on tiny data: Rotten Tomatoes rows, the default encoder's tokenizer (word student),
MiniLM for a teacher and an encoder student fine-tuned for a few CPU steps.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import pytest

from sqlheads import host
from sqlheads.engine import kinds
from sqlheads.engine.encoders.text_classifier import PARITY_TOLERANCE
from sqlheads.engine.students.distillation import DistillParams
from sqlheads.store.repository import Store
from sqlheads.verbs import encoders

CLASSES = ["negative", "positive"]


@pytest.fixture(scope="module")
def rows(taught_tiny: pd.DataFrame) -> pd.DataFrame:
    """40 reviews, 20 of each class, and a confident teacher's logits (a tenth of them wrong):
    the rows the session's encoder student was distilled from."""
    return taught_tiny


def _teaching(rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Gold class indices and the teacher's logits."""
    gold = (rows["label"] == "positive").astype(int).to_numpy()
    return gold, rows[CLASSES].to_numpy(np.float32)


def _distilled(kind: kinds.ModelKind, inputs, rows: pd.DataFrame, encoder=(None, None), **options):
    gold, logits = _teaching(rows)
    distill = kind.distill_params(DistillParams(epochs=1, seed=0, batch_size=8))
    params = kinds.student_params(kind.student, **options)
    tokenizer_json, onnx = encoder
    fit = kinds.StudentFit(params, distill, tokenizer_json=tokenizer_json, encoder_onnx=onnx)
    return kind.distill(inputs, CLASSES, logits, gold, fit)


def fit_head(rows: pd.DataFrame, tmp_path, request):
    vectors = np.random.default_rng(0).normal(size=(len(rows), 16)).astype(np.float32)
    return _distilled(kinds.KINDS["head"], vectors, rows), vectors


def fit_word_student(rows: pd.DataFrame, tmp_path, request):
    store = Store.from_url(f"sqlite:///{tmp_path / 'heads.db'}")
    host.init(store)
    encoder = encoders.register_encoder(store)
    onnx, tokenizer_json = store.encoder_bytes(encoder.encoder_id)
    texts = rows["text"].tolist()
    model = _distilled(kinds.KINDS["word_student"], texts, rows, encoder=(tokenizer_json, onnx))
    return model, texts


def fit_encoder_student(rows: pd.DataFrame, tmp_path, request):
    """The session's encoder student (tests/conftest.py): distilled through this registry on
    these rows and this teacher's logits, 3 CPU steps; fitted once for this test and
    test_encoder_student.py."""
    return request.getfixturevalue("encoder_student"), rows["text"].tolist()


def fit_tfidf_student(rows: pd.DataFrame, tmp_path, request):
    texts = rows["text"].tolist()
    return _distilled(kinds.KINDS["tfidf_student"], texts, rows), texts


def fit_teacher(rows: pd.DataFrame, tmp_path, request):
    """The teacher is trained on gold labels by the sidecar's job; its blob is its export."""
    from sqlheads.engine.training.fine_tuning import TeacherClassifier
    from sqlheads.engine.training.params import TeacherParams

    texts = rows["text"].tolist()
    params = TeacherParams(max_length=32, batch_size=8, epochs=1, max_steps=2)
    teacher = TeacherClassifier("all-MiniLM-L6-v2", params, work_dir=tmp_path / "teacher")
    teacher.fit(texts, rows["label"].astype(str).tolist())
    graph, _ = teacher.export(texts)
    return graph, texts


FITTERS: dict[str, Callable] = {
    "head": fit_head,
    "word_student": fit_word_student,
    "encoder_student": fit_encoder_student,
    "tfidf_student": fit_tfidf_student,
    "teacher": fit_teacher,
}


def test_every_kind_has_a_contract_case() -> None:
    assert set(FITTERS) == set(kinds.KINDS)


@pytest.mark.parametrize("name", sorted(kinds.KINDS))
def test_the_registry_says_how_each_kind_is_fitted_and_where(name: str) -> None:
    kind = kinds.KINDS[name]
    assert kind.name == name and kind.reads in kinds.READS
    assert kind.runs_on in ("server", "sidecar")
    assert set(kind.fitted_by) <= {"train", "distill"} and kind.fitted_by
    distils = "distill" in kind.fitted_by
    assert distils == (kind.distill is not None) == (kind.student is not None)
    if distils:  # a student distils with defaults of its own unless told otherwise
        assert kind.epochs and kind.lr
        assert kinds.student_kind(kind.student) is kind
        assert (kind.student in kinds.SIDECAR_STUDENTS) == (kind.runs_on == "sidecar")


@pytest.mark.parametrize("name", sorted(kinds.KINDS))
def test_fit_then_bytes_then_load_scores_the_same(name: str, rows, tmp_path, request) -> None:
    kind = kinds.KINDS[name]
    model, inputs = FITTERS[name](rows, tmp_path, request)
    blob = model.to_bytes()
    assert isinstance(blob, bytes) and not blob.startswith(b"\x80")  # no pickle protocol header
    loaded = kind.load(blob)
    assert list(loaded.classes_) == CLASSES
    before, after = model.predict_proba(inputs), loaded.predict_proba(inputs)
    assert after.shape == (len(rows), len(CLASSES))
    np.testing.assert_allclose(after.sum(axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(after, before, atol=PARITY_TOLERANCE)
    assert kinds.parameter_count(loaded) > 0
