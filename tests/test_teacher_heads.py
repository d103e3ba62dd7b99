"""``distill --teacher-head``: a deployed version teaches on the CPU, with transfer rows that are
cached for the next student and never come from held-out rows; the refusals are numbered.

MiniLM (the default encoder) stands in for MPNet so that this stays cheap: the code path is the
same for any encoder (`python -m bench students` runs it with all-mpnet-base-v2).
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pandas as pd
import pytest
from conftest import count_rows
from sqlalchemy import select

from sqlheads import host
from sqlheads.engine.evaluation import held_out_keys
from sqlheads.errors import (
    BusyError,
    ClassMismatchError,
    InvalidParameterError,
    NotFoundError,
    TeacherDroppedError,
    TeacherNotDeployedError,
)
from sqlheads.store import schema as s
from sqlheads.store.repository import HEAD_BUSY, Store
from sqlheads.verbs import encoders

LABELS = "SELECT item_key, label FROM reviews"
FAST = {"epochs": 1}


@pytest.fixture(scope="module")
def teacher_template(tmp_path_factory, embedded_template: Path, copy_sqlite) -> Path:
    """The session's embedded sample (tests/conftest.py) with a deployed head 'teacher' on it;
    built once."""
    path = tmp_path_factory.mktemp("teacher") / "heads.db"
    store = copy_sqlite(embedded_template, path)
    host.train(store, head="teacher", set_name="reviews", labels=LABELS, deploy="always")
    store.engine.dispose()
    return path


@pytest.fixture
def taught(teacher_template: Path, copy_database) -> Store:
    return copy_database(teacher_template)


def _count(store: Store, table) -> int:
    return count_rows(store, table)


def _distill(store: Store, **kwargs):
    arguments = {
        "head": "sentiment",
        "set_name": "reviews",
        "labels": LABELS,
        "teacher_head": "teacher",
        "transfer_rows": 300,
        **FAST,
    } | kwargs
    return host.distill(store, **arguments)


def test_a_deployed_head_teaches_and_its_transfer_rows_are_cached_for_the_next_student(
    taught: Store,
):
    scored: list[int] = []
    first = _distill(taught, teacher_progress=lambda done, total, stage: scored.append(done))
    assert first["kind"] == "word_student" and first["teacher"] == "teacher.v1"
    assert first["teacher_head"] == "teacher" and first["teacher_version"] == 1
    rows = first["teacher_rows_scored"]
    # the teacher was trained on this set: its stored vectors score the rows, nothing is embedded
    assert rows["own_rows_from_stored_vectors"] == 600 and rows["own_rows_scored"] == 0
    assert rows["transfer_rows_scored"] == 300 and rows["transfer_rows_cached"] == 0
    assert scored[-1] == 300  # progress while the teacher scores the transfer rows
    assert {"transfer_scoring", "own_rows"} <= set(first["teacher_seconds"])
    assert first["rows_train"] == 480 + 300  # the training rows and the transfer rows
    assert first["teacher_accuracy"] is not None  # on the same held-out rows
    assert _count(taught, s.transfer_rows) == 300

    again = _distill(taught, student="tfidf")  # a second student: the teacher scores nothing
    assert again["teacher_rows_scored"]["transfer_rows_scored"] == 0
    assert again["teacher_rows_scored"]["transfer_rows_cached"] == 300
    assert again["rows_train"] == 480 + 300
    more = _distill(taught, student="tfidf", transfer_rows=400)  # only the 100 new ones
    assert more["teacher_rows_scored"]["transfer_rows_scored"] == 100
    assert more["teacher_rows_scored"]["transfer_rows_cached"] == 300
    assert _count(taught, s.transfer_rows) == 400
    fewer = _distill(taught, student="tfidf", transfer_rows=50)  # the first 50 of the cache
    assert fewer["rows_train"] == 480 + 50
    assert fewer["teacher_rows_scored"]["transfer_rows_scored"] == 0


def test_transfer_rows_are_never_copies_of_held_out_rows(taught: Store, rt_sample):
    _distill(taught, student="tfidf", transfer_rows=1000)
    with taught.engine.connect() as c:
        made = pd.read_sql(select(s.transfer_rows.c.origin_key, s.transfer_rows.c.text), c)
    assert len(made) == 1000
    labelled = rt_sample[["item_key", "label"]]
    held_out = held_out_keys(labelled["item_key"], labelled["label"], test_fraction=0.2, seed=0)
    assert len(held_out) == 120
    assert not set(made["origin_key"]) & held_out  # made only from rows the student learns
    held_out_texts = {
        " ".join(t.lower().split()) for t in rt_sample[rt_sample["item_key"].isin(held_out)].text
    }
    assert not {" ".join(t.lower().split()) for t in made["text"]} & held_out_texts


def test_a_teacher_head_of_another_set_and_encoder_teaches(taught: Store):
    encoders.register_encoder(taught, name="minilm-fp32", quantization="none")
    host.embed(
        taught,
        set_name="teacher_rows",
        source="SELECT item_key, text FROM reviews WHERE substr(item_key, -1) IN ('0', '1', '2')",
        encoder="minilm-fp32",
    )
    host.train(
        taught,
        head="other_teacher",
        set_name="teacher_rows",
        labels="SELECT item_key, label FROM reviews WHERE substr(item_key, -1) IN ('0', '1', '2')",
        deploy="always",
    )
    result = _distill(taught, teacher_head="other_teacher", student="tfidf", transfer_rows=100)
    rows = result["teacher_rows_scored"]
    stored = rows["own_rows_from_stored_vectors"]
    assert 0 < stored < 600 and rows["own_rows_scored"] == 600 - stored  # the rest embedded now
    assert result["teacher"] == "other_teacher.v1" and result["accuracy"] > 0.5


@pytest.mark.parametrize(
    ("setup", "arguments", "error", "number"),
    [
        (None, {"teacher_head": "nobody"}, NotFoundError, 50001),
        ("never", {}, TeacherNotDeployedError, 50027),
        ("classes", {}, ClassMismatchError, 50020),
        (None, {"soft_labels": "SELECT item_key FROM reviews"}, InvalidParameterError, 50012),
        # refused before the teacher scores a row, not after it scored and cached them
        (None, {"student": "head", "arch": "cnn"}, InvalidParameterError, 50012),
        (None, {"arch": "nosuch"}, InvalidParameterError, 50012),
    ],
    ids=[
        "no-such-head",
        "never-deployed",
        "other-classes",
        "with-soft-labels",
        "arch-for-a-head-student",
        "unknown-arch",
    ],
)
def test_teacher_head_refusals_are_numbered_name_the_head_and_write_nothing(
    taught: Store, setup, arguments, error, number
):
    if setup == "never":
        taught.drop_head("teacher", 0)
        host.train(taught, head="teacher", set_name="reviews", labels=LABELS, deploy="never")
    if setup == "classes":
        taught.drop_head("teacher", 0)
        host.train(
            taught,
            head="teacher",
            set_name="reviews",
            labels="SELECT item_key, CASE WHEN label = 'positive' THEN 'good' ELSE 'bad' END "
            "AS label FROM reviews",
            deploy="always",
        )
    versions = _count(taught, s.models)
    with pytest.raises(error) as raised:
        _distill(taught, **arguments)
    assert raised.value.number == number
    if number != 50012:
        assert ("nobody" if setup is None else "'teacher'") in raised.value.message
    assert _count(taught, s.models) == versions
    assert _count(taught, s.transfer_rows) == 0


def test_a_teacher_head_dropped_during_distill_is_refused_and_nothing_is_stored(taught: Store):
    def drop_the_teacher(done: int, total: int | None, stage: str | None) -> None:
        if _count(taught, s.models) and taught.deployed_model("teacher") is not None:
            taught.drop_head("teacher", 0)

    versions = _count(taught, s.models)
    with pytest.raises(TeacherDroppedError) as raised:
        _distill(taught, teacher_progress=drop_the_teacher)
    assert raised.value.number == 50028 and "'teacher'" in raised.value.message
    assert _count(taught, s.models) == versions - 1  # the teacher's version went, no student
    assert _count(taught, s.transfer_sets) == 0  # its cached rows went with it
    assert taught.read_view("model_summary", head="sentiment").empty


def test_distill_waits_for_the_heads_lock_as_train_does(taught: Store):
    """``lock_timeout_ms`` reaches the head's lock (it used to reach the fit, and fail)."""
    result = _distill(taught, student="head", transfer_rows=0, lock_timeout_ms=0)
    assert result["kind"] == "head" and result["teacher"] == "teacher.v1"


def test_distill_waits_for_the_head_at_its_write_no_longer_than_asked(taught: Store):
    """The head's lock comes only when the version is written, and ``lock_timeout_ms`` bounds
    that wait too: held elsewhere (released a few seconds later), it is refused at once rather
    than waited for with the 600 s default."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:  # a lock object of its own: it excludes this thread's as another's
        with taught.lock("head", "sentiment", 0, HEAD_BUSY):
            held.set()
            release.wait(5)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(60)
        with pytest.raises(BusyError) as busy:
            _distill(taught, student="head", transfer_rows=0, lock_timeout_ms=0)
    finally:
        release.set()
        holder.join(60)
    assert busy.value.number == 50016
    assert taught.read_view("model_summary", head="sentiment").empty


def test_the_teachers_progress_counts_each_stage_against_its_own_total(taught: Store):
    """The teacher's line on stderr: the student's rows (edited texts here, so the teacher scores
    them rather than reading its set's vectors), then the transfer rows, each to its own total."""
    from typer.testing import CliRunner

    from sqlheads.cli import app

    some = "substr(item_key, -1) = '3'"  # a tenth of the rows, of both classes
    url = taught.engine.url.render_as_string(hide_password=False)
    result = CliRunner().invoke(
        app,
        ["--url", url, "--json", "distill", "--head", "sentiment", "--set", "reviews"]
        + ["--labels", f"SELECT item_key, label FROM reviews WHERE {some}"]
        + ["--source", f"SELECT item_key, text || ' Really.' AS text FROM reviews WHERE {some}"]
        + ["--teacher-head", "teacher", "--transfer-rows", "50", "--student", "tfidf"],
    )
    assert result.exit_code == 0, result.output
    percents = [int(p) for p in re.findall(r"\((\d+) %\)", result.stderr)]
    assert percents and max(percents) <= 100, result.stderr
    for stage in ("the student's rows", "transfer rows"):
        finished = rf"teacher teacher: {stage}: (\d+) of \1 rows \(100 %\)"
        assert re.search(finished, result.stderr), result.stderr


def test_the_default_count_of_transfer_rows_is_the_student_kinds(taught: Store):
    """With no ``transfer_rows`` a student asks for its kind's measured count (the TF-IDF
    student 6,000, the word student DEFAULT_ROWS); the bigger ask reuses the smaller's cache."""
    from sqlheads.engine.kinds import student_kind
    from sqlheads.engine.students.transfer import DEFAULT_ROWS

    assert student_kind("word").transfer_rows == DEFAULT_ROWS > 6_000
    assert student_kind("tfidf").transfer_rows == student_kind("encoder").transfer_rows == 6_000
    tfidf = _distill(taught, student="tfidf", transfer_rows=None)
    assert tfidf["teacher_rows_scored"]["transfer_rows_scored"] == 6_000
    assert tfidf["rows_train"] == 480 + 6_000
    word = _distill(taught, transfer_rows=None)
    scored = word["teacher_rows_scored"]
    assert scored["transfer_rows_cached"] == 6_000 and scored["transfer_rows_scored"] > 0
    # 480 training rows make fewer than DEFAULT_ROWS copies: all of them, then
    assert word["rows_train"] == 480 + 6_000 + scored["transfer_rows_scored"]
    assert _count(taught, s.transfer_rows) == 6_000 + scored["transfer_rows_scored"]
