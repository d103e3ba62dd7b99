"""Students: model kinds, soft labels, distillation, export parity and scoring by kind.

The teacher here is real but small: a head trained on the sample's gold labels, whose logits on
every row are stored as a table, as an analyst would store a teacher's output. Its quality does
not matter to these tests; the benchmark (bench/students.py) distils the mpnet-rt teacher.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pandas as pd
import pytest
from conftest import count_rows

from sqlheads import host, procedures
from sqlheads.compute import columns
from sqlheads.engine import kinds
from sqlheads.engine.encoders.onnx_encoder import OnnxEncoder, Tokenizer
from sqlheads.engine.evaluation import stratified_split
from sqlheads.engine.students.distillation import DistillParams
from sqlheads.engine.students.word import student as word_student
from sqlheads.engine.students.word.student import (
    WordStudent,
    WordStudentParams,
    encoded_token_embeddings,
)
from sqlheads.errors import (
    ClassMismatchError,
    ExportParityError,
    ForeignSoftLabelsError,
    HeldOutLeakError,
    InvalidNameError,
    InvalidParameterError,
    MissingTextError,
    NotFoundError,
    QueryShapeError,
    UnknownKindError,
)
from sqlheads.store import schema
from sqlheads.store.repository import Store
from sqlheads.verbs import encoders

LABELS = "SELECT item_key, label FROM reviews"
SOFT = "SELECT item_key, negative, positive FROM teacher_logits"
FAST = {"epochs": 2}


@pytest.fixture
def taught(taught_template: Path, copy_database) -> Store:
    """The sample embedded into set 'reviews', with a teacher's logits for every row in a user
    table (tests/conftest.py)."""
    return copy_database(taught_template)


def _count(store: Store, table) -> int:
    return count_rows(store, table)


def _distill(store: Store, **kwargs):
    arguments = {
        "head": "sentiment",
        "set_name": "reviews",
        "labels": LABELS,
        "soft_labels": SOFT,
        **FAST,
    } | kwargs
    return host.distill(store, **arguments)


# -- the engine ---------------------------------------------------------------------------------


def test_word_student_is_under_a_million_parameters_and_its_onnx_matches_pytorch(
    store: Store, rt_sample
):
    encoders.register_encoder(store)
    encoder = store.find_encoder(host.DEFAULT_ENCODER)
    onnx, tokenizer_json = store.encoder_bytes(encoder.encoder_id)
    texts = rt_sample["text"].tolist()
    classes = ["negative", "positive"]
    gold = np.array([classes.index(v) for v in rt_sample["label"]])
    logits = np.where(gold[:, None] == np.arange(2), 6.0, -6.0).astype(np.float32)
    student = WordStudent().fit(
        texts,
        classes,
        logits,
        gold,
        tokenizer_json=tokenizer_json,
        encoder_onnx=onnx,
        distill=DistillParams(epochs=3),
    )
    # the default (cnn) over the few thousand tokens 600 reviews use: well under the budget
    assert 200_000 < student.n_parameters_ < 1_000_000
    # fit itself refuses an export off by more than 1e-4; this asserts the figure it measured
    assert student.parity_max_abs_diff_ is not None and student.parity_max_abs_diff_ <= 1e-4
    # the blob alone (graph + tokenisation contract in its metadata) scores raw text again
    reloaded = WordStudent.from_bytes(student.to_bytes())
    assert reloaded.classes_ == classes and reloaded.n_parameters_ == student.n_parameters_
    np.testing.assert_allclose(
        reloaded.predict_proba(texts[:50]), student.predict_proba(texts[:50]), atol=1e-6
    )
    session = ort.InferenceSession(student.to_onnx(), providers=["CPUExecutionProvider"])
    meta = session.get_modelmeta().custom_metadata_map
    assert json.loads(meta["classes"]) == classes and meta["kind"] == "word_student"
    # it learnt from what it was shown: well above chance on its training rows after 3 epochs
    assert (student.predict(texts) == rt_sample["label"].to_numpy()).mean() > 0.7


def test_the_word_students_parity_check_refuses_an_export_beyond_its_tolerance(
    taught: Store, monkeypatch
):
    # Only a bit-identical graph meets a tolerance of 0: the real export is compared with
    # PyTorch (they differ by about 1e-7 here) and refused with its number; nothing is stored.
    monkeypatch.setattr(word_student, "PARITY_TOLERANCE", 0.0)
    with pytest.raises(ExportParityError, match="word student's ONNX export differs") as refused:
        _distill(taught, student="word")
    assert refused.value.number == 50010
    assert _count(taught, schema.models) == 1  # the teacher head only
    assert _count(taught, schema.teachers) == 0 and _count(taught, schema.soft_labels) == 0


def test_model2vec_init_starts_each_token_from_the_encoders_vector_of_that_token_alone(
    store: Store, rt_sample
):
    """init='model2vec' embeds each token of the student's vocabulary with the whole encoder,
    as Model2Vec distils static vectors, not only the encoder's input table."""
    encoders.register_encoder(store)
    encoder = store.find_encoder(host.DEFAULT_ENCODER)
    onnx, tokenizer_json = store.encoder_bytes(encoder.encoder_id)
    words = ["good", "great", "awful", "table"]
    framed = Tokenizer(tokenizer_json, 16).encode(words, truncate=True)
    assert all(len(ids) == 3 for ids in framed)  # [CLS] word [SEP]: one token each
    vectors = encoded_token_embeddings(onnx, tokenizer_json, np.array([f[1] for f in framed]))
    alone = OnnxEncoder(onnx, tokenizer_json, dim=encoder.dim, max_length=16).encode(words)
    np.testing.assert_allclose(vectors, alone.vectors, atol=1e-5)
    texts, classes = rt_sample["text"].tolist(), ["negative", "positive"]
    gold = np.array([classes.index(v) for v in rt_sample["label"]])
    logits = np.where(gold[:, None] == np.arange(2), 6.0, -6.0).astype(np.float32)
    student = WordStudent(WordStudentParams(init="model2vec")).fit(
        texts, classes, logits, gold, tokenizer_json=tokenizer_json, encoder_onnx=onnx,
        distill=DistillParams(epochs=1),
    )  # fmt: skip
    assert WordStudent.from_bytes(student.to_bytes()).params.init == "model2vec"


def test_kinds_registry_refuses_unknown_kinds_and_students():
    assert kinds.model_kind("word_student").reads == "text"
    assert kinds.model_kind("head").reads == "vector"
    with pytest.raises(UnknownKindError, match="pass one of word, head"):
        kinds.student_kind("transformer")
    with pytest.raises(UnknownKindError, match="known kinds are"):
        kinds.model_kind("forest")


def test_distillation_loss_is_the_tempered_kl_and_gold_weight_mixes_in_cross_entropy():
    import torch

    from sqlheads.engine.students.losses import distillation_loss

    student = torch.tensor([[2.0, 0.0], [0.0, 1.0]])
    teacher = torch.tensor([[1.0, 0.0], [0.0, 3.0]])
    has = torch.tensor([True, True])
    none = torch.tensor([-1, -1])
    same = distillation_loss(teacher, teacher, has, none, temperature=2.0, gold_weight=0.0)
    assert float(same) == pytest.approx(0.0, abs=1e-7)
    t = 2.0
    p = torch.softmax(teacher / t, 1)
    expected = t**2 * (p * (p.log() - torch.log_softmax(student / t, 1))).sum() / 2
    got = distillation_loss(student, teacher, has, none, temperature=t, gold_weight=0.0)
    assert float(got) == pytest.approx(float(expected), rel=1e-5)
    gold = torch.tensor([0, 1])
    ce = torch.nn.functional.cross_entropy(student, gold)
    mixed = distillation_loss(student, teacher, has, gold, temperature=t, gold_weight=0.5)
    assert float(mixed) == pytest.approx(0.5 * float(expected) + 0.5 * float(ce), rel=1e-5)


def test_the_gold_weight_is_the_student_kinds_unless_given():
    """The encoder student learns the gold labels at half weight beside the soft labels unless
    told (issue 39: 0.7-0.9 point over the KL alone for two layers, at each of three seeds);
    the others the teacher's KL alone, as the seed's; a weight given is kept, 0 included."""
    from sqlheads.engine.students.distillation import fit_student
    from sqlheads.engine.students.encoder import GOLD_WEIGHT

    assert GOLD_WEIGHT == 0.5 and DistillParams().gold_weight is None  # None: the kind's
    for student, weight in {"encoder": 0.5, "word": 0.0, "head": 0.0, "tfidf": 0.0}.items():
        kind = kinds.student_kind(student)
        assert kind.distill_params(DistillParams()).gold_weight == weight, student
        for given in (0.0, 0.3):
            assert kind.distill_params(DistillParams(gold_weight=given)).gold_weight == given
    with pytest.raises(InvalidParameterError, match="gold weight"):  # no kind chose one
        fit_student(None, None, np.zeros((1, 2)), np.zeros(1), DistillParams(epochs=1, lr=0.1))


# -- distill and predict through the embedded host ---------------------------------------------


# Held-out accuracy bars for students distilled with their kind's default epochs (word 8, head
# 30) from the tests' teacher, on the 120 held-out rows (60 of each class, seed 0). Chance is
# 0.5, and guessing reaches 0.6 one time in 57 and 0.65 one time in 1,540 (binomial). Measured
# on an AVX-512 VNNI Xeon: word 0.675, head 0.7083 (teacher 0.7167); the same with PyTorch
# held to AVX2 kernels; 0.6667 and 0.725 on fp32 vectors instead of int8 (a bigger change to
# the teacher's inputs than another CPU's int8 kernels should make); seeds 1-4 (other splits):
# word 0.6167-0.6833, head 0.7583-0.8083.
WORD_BAR, HEAD_BAR = 0.6, 0.65


def test_distill_word_and_head_students_then_predict_dispatches_on_kind(taught: Store, rt_sample):
    word = _distill(taught, student="word", deploy="always", epochs=None)
    assert word["kind"] == "word_student" and word["teacher"] == "sentiment_teacher"
    assert word["parameters"] < 1_000_000 and word["deployed"]
    assert word["rows_test"] == 120 and word["rows_train"] == 480  # held-out rows never distilled
    assert word["accuracy"] >= WORD_BAR and word["teacher_accuracy"] >= HEAD_BAR
    head = _distill(
        taught, student="head", teacher="sentiment_teacher", deploy="never", epochs=None
    )
    assert head["kind"] == "head" and head["parameters"] == 384 * 64 + 64 + 64 * 2 + 2
    assert head["teacher_accuracy"] == word["teacher_accuracy"]  # same teacher, same rows
    assert head["accuracy"] >= HEAD_BAR

    scored = host.predict(taught, head="sentiment", set_name="reviews")  # the word student
    assert scored["kind"] == "word_student" and scored["rows"] == len(rt_sample)
    latest = taught.read_view("latest_predictions", head="sentiment")
    assert len(latest) == len(rt_sample) and set(latest["version"]) == {word["version"]}
    assert set(latest["label"]) <= {"negative", "positive"}
    by_head = host.predict(taught, head="sentiment", set_name="reviews", version=head["version"])
    assert by_head["kind"] == "head" and by_head["rows"] == len(rt_sample)

    summary = taught.read_view("model_summary", head="sentiment").set_index("version")
    assert summary.loc[word["version"], "kind"] == "word_student"
    assert summary.loc[word["version"], "parameters"] == word["parameters"]
    assert summary.loc[word["version"], "teacher"] == "sentiment_teacher"
    assert summary.loc[word["version"], "teacher_accuracy"] == pytest.approx(
        word["teacher_accuracy"], abs=1e-4
    )
    assert summary.loc[word["version"], "is_deployed"] == 1
    # deployments and roll-back work the same for every kind
    host.deploy(taught, head="sentiment", version=head["version"])
    assert host.roll_back(taught, head="sentiment")["version"] == word["version"]


def test_the_held_out_split_is_trains_and_no_held_out_row_is_distilled_on(taught: Store, rt_sample):
    _, test = stratified_split(rt_sample["item_key"], rt_sample["label"], test_fraction=0.2, seed=0)
    held_out = rt_sample.loc[test, "item_key"].tolist()
    # a transfer query naming held-out rows is refused, and nothing is written
    leaking = "SELECT item_key FROM reviews"
    with pytest.raises(HeldOutLeakError, match="120 row"):
        _distill(taught, transfer=leaking)
    assert _count(taught, schema.teachers) == 0 and _count(taught, schema.models) == 1
    quoted = ", ".join(f"'{k}'" for k in held_out)
    allowed = f"SELECT item_key FROM reviews WHERE item_key NOT IN ({quoted}) LIMIT 100"
    result = _distill(taught, transfer=allowed)
    # the transfer rows plus the labelled training rows (all of them here): never a held-out one
    assert result["rows_train"] == 480 and result["rows_test"] == 120


def test_unlabelled_rows_with_soft_labels_are_distilled_on(taught: Store, rt_sample):
    labels_half = "SELECT item_key, label FROM reviews WHERE rowid % 2 = 0"
    result = _distill(taught, labels=labels_half)
    # 300 labelled rows: 60 held out, 240 train; the other 300 rows only have soft labels
    assert result["rows_test"] == 60 and result["rows_train"] == 240 + 300


@pytest.mark.parametrize(
    ("arguments", "error", "match"),
    [
        (
            {
                "soft_labels": "SELECT item_key, negative AS bad, positive AS good "
                "FROM teacher_logits"
            },
            ClassMismatchError,
            "name the soft-label columns after the label values",
        ),
        (
            {
                "soft_labels": SOFT + " UNION ALL SELECT 'imdb-00001', 0.1, 0.2",
                "student": "head",
            },
            ForeignSoftLabelsError,
            "1 of 601 soft-labelled key",
        ),
        ({"student": "transformer"}, UnknownKindError, "student kind 'transformer'"),
        ({"soft_labels": None}, InvalidParameterError, "--soft-labels"),
        ({"soft_labels": None, "teacher": "nobody"}, NotFoundError, "teacher 'nobody'"),
        (
            {"soft_labels": "SELECT item_key, negative FROM teacher_logits"},
            QueryShapeError,
            "one logit column per class",
        ),
        (
            {"soft_labels": "SELECT item_key, NULL AS negative, positive FROM teacher_logits"},
            InvalidParameterError,
            "NULL logits",
        ),
        ({"head": "bad name;"}, InvalidNameError, "not allowed"),
    ],
)
def test_distill_refusals_have_numbers_and_write_nothing(taught: Store, arguments, error, match):
    with pytest.raises(error, match=match) as raised:
        _distill(taught, **arguments)
    assert raised.value.number >= 50001
    assert _count(taught, schema.teachers) == 0 and _count(taught, schema.soft_labels) == 0
    assert _count(taught, schema.models) == 1  # the teacher head only


def test_soft_labels_of_another_set_are_refused(taught: Store, rt_sample):
    _distill(taught, student="head", teacher="rt_teacher")
    host.embed(taught, set_name="other", source="SELECT item_key, text FROM reviews LIMIT 50")
    with pytest.raises(ForeignSoftLabelsError, match="another set") as raised:
        host.distill(
            taught,
            head="other_head",
            set_name="other",
            labels=LABELS + " LIMIT 50",
            teacher="rt_teacher",
            student="head",
            **FAST,
        )
    assert raised.value.number == 50021


def test_a_text_model_without_text_is_refused(taught: Store):
    word = _distill(taught, student="word", deploy="always")
    with taught.engine.begin() as c:  # a set embedded before sets remembered their source
        c.execute(schema.embedding_sets.update().values(source_query=None))
    with pytest.raises(MissingTextError, match="pass --source") as raised:
        host.predict(taught, head="sentiment", set_name="reviews")
    assert raised.value.number == 50024
    # with a source of its own it scores, and a --keys query restricts it
    scored = host.predict(
        taught,
        head="sentiment",
        set_name="reviews",
        version=word["version"],
        source="SELECT item_key, text FROM reviews",
        keys="SELECT item_key FROM reviews LIMIT 10",
    )
    assert scored["rows"] == 10
    with pytest.raises(InvalidParameterError, match="drop --source"):
        host.predict(taught, head="teacher_head", set_name="reviews", version=1, source="SELECT 1")


def test_procedures_distill_takes_one_frame_as_sql_server_would(rt_sample):
    """The ``sp_execute_external_script`` contract: a DataFrame in, one row out."""
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(len(rt_sample), 8)).astype(np.float32)
    gold = (rt_sample["label"] == "positive").to_numpy()
    vectors[:, 0] += np.where(gold, 2.0, -2.0)
    logits = np.stack([-vectors[:, 0], vectors[:, 0]], axis=1).astype(np.float32)
    frame = pd.DataFrame(
        {
            "item_key": rt_sample["item_key"],
            "label": rt_sample["label"],
            "logits": [row.tobytes() for row in logits],
            "vector": [row.tobytes() for row in vectors],
        }
    )
    out = procedures.distill(
        frame, student="head", teacher_classes_json='["negative", "positive"]', dim=8
    )
    assert list(out.columns) == list(columns.DISTILL_OUTPUT) and len(out) == 1
    row = out.iloc[0]
    assert row["kind"] == "head" and row["accuracy"] > 0.9 and row["teacher_accuracy"] > 0.9
    assert kinds.model_kind("head").load(row["blob"]).classes_ == ["negative", "positive"]
    # teacher columns in another order are reordered to the classes' order
    swapped = frame.assign(logits=[row[::-1].tobytes() for row in logits])
    reordered = procedures.distill(
        swapped, student="head", teacher_classes_json='["positive", "negative"]', dim=8
    )
    assert reordered.iloc[0]["teacher_accuracy"] == row["teacher_accuracy"]


def test_word_student_params_are_validated_early():
    with pytest.raises(InvalidParameterError, match="init="):
        WordStudentParams(init="glove")
    with pytest.raises(InvalidParameterError, match="temperature="):
        DistillParams(temperature=0)


def test_cli_distill_reports_accuracy_teacher_parameters_and_seconds(taught: Store):
    from typer.testing import CliRunner

    from sqlheads.cli import app

    url = taught.engine.url.render_as_string(hide_password=False)
    arguments = ["--url", url, "--json", "distill", "--head", "sentiment", "--set", "reviews"]
    result = CliRunner().invoke(
        app, [*arguments, "--labels", LABELS, "--soft-labels", SOFT, "--epochs", "2"]
    )
    assert result.exit_code == 0, result.output
    reported = json.loads(result.stdout)
    assert reported["kind"] == "word_student" and reported["teacher"] == "sentiment_teacher"
    for field in ("accuracy", "macro_f1", "teacher_accuracy", "parameters", "seconds"):
        assert isinstance(reported[field], int | float), field
    refused = CliRunner().invoke(
        app, [*arguments, "--labels", LABELS, "--teacher", "sentiment_teacher", "--student", "x"]
    )
    assert refused.exit_code == 2 and json.loads(refused.stdout)["number"] == 50022
    listed = CliRunner().invoke(app, ["--url", url, "--json", "models", "--head", "sentiment"])
    (row,) = json.loads(listed.stdout)["models"]
    assert row["kind"] == "word_student" and row["parameters"] == reported["parameters"]
    assert row["teacher_accuracy"] == pytest.approx(reported["teacher_accuracy"], abs=1e-4)


@pytest.mark.parametrize(
    ("student", "unit", "counted"),
    [
        ("word", "epochs", "3 of 3"),
        ("head", "epochs", "3 of 3"),
        # L-BFGS stops when it converges: the last line counts the iterations it took
        ("tfidf", "iterations", r"(\d+) of \1"),
    ],
)
def test_cli_distill_reports_its_progress_on_stderr_as_train_does(
    taught: Store, student, unit, counted
):
    """Issue 20: distill ran 80 s with no sign of life (the encoder student's steps are
    checked in tests/test_encoder_student.py)."""
    from typer.testing import CliRunner

    from sqlheads.cli import app

    url = taught.engine.url.render_as_string(hide_password=False)
    result = CliRunner().invoke(
        app,
        ["--url", url, "--json", "distill", "--head", "sentiment", "--set", "reviews"]
        + ["--student", student, "--labels", LABELS, "--soft-labels", SOFT, "--epochs", "3"],
    )
    assert result.exit_code == 0, result.output
    json.loads(result.stdout)  # stdout stays one JSON object
    finished = rf"distilling sentiment: {counted} {unit} \(100 %\)"
    assert re.search(finished, result.stderr), result.stderr
    # a rate in a unit a person reads: epochs/s, or s/epoch under one a second (a loaded machine)
    assert f"{unit}/s" in result.stderr or f"s/{unit.rstrip('s')}" in result.stderr
