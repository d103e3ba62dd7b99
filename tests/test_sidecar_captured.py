"""Issue 19's "done when" on SQLite: the sidecar never executes text that a caller wrote. A
request captures its inputs (keys, labels, texts) with the job, under the requester's own
permissions; dropping the caller's tables after the request changes nothing for the job. Jobs
record who asked, and only the requester may cancel one. Real SQLite, the real MiniLM encoder
and teacher, real reviews."""

from __future__ import annotations

import getpass
import json

import pandas as pd
import pytest
from sqlalchemy import select, update

from sqlheads import host
from sqlheads.errors import InvalidParameterError, JobOwnerError
from sqlheads.sidecar.requests import cancel_job, jobs, request_embed, request_teacher
from sqlheads.sidecar.worker import Sidecar, SidecarOptions
from sqlheads.store import schema as s
from sqlheads.store.jobs import JobQueue
from sqlheads.store.repository import Store
from sqlheads.verbs import encoders

SOURCE = "SELECT item_key, text FROM reviews"


@pytest.fixture
def reviews(store: Store, rt_sample: pd.DataFrame) -> Store:
    """40 real reviews (20 a class) with labels in a table of their own, plus a row with no
    text and a key given twice (both rejected by embed)."""
    tiny = pd.concat(g.head(20) for _, g in rt_sample.groupby("label")).reset_index(drop=True)
    odd = pd.DataFrame(
        {"item_key": ["empty", "twice", "twice"], "text": ["  ", "one copy", "another copy"]}
    )
    pd.concat([tiny[["item_key", "text"]], odd]).to_sql("reviews", store.engine, index=False)
    tiny[["item_key", "label"]].to_sql("review_labels", store.engine, index=False)
    return store


def _sidecar(store: Store) -> dict:
    return Sidecar(store, SidecarOptions(device="cpu", once=True)).run()


def _drop_callers_tables(store: Store) -> None:
    with store.engine.begin() as c:
        c.exec_driver_sql("DROP TABLE reviews")
        c.exec_driver_sql("DROP TABLE review_labels")


def test_an_embed_job_finishes_after_the_callers_table_is_dropped(reviews: Store) -> None:
    requested = request_embed(reviews, set_name="captured", source=SOURCE, parts=2, engine="onnx")
    assert requested["rows"] == 43
    _drop_callers_tables(reviews)
    ran = _sidecar(reviews)
    assert [j["state"] for j in ran["jobs"]] == ["done", "done"]
    found = reviews.require_set("captured")
    counts = reviews.set_counts(found.set_id)
    assert counts == {"set_rows": 40, "set_rejects": 2}  # rejected: "empty", "twice"
    results = [json.loads(j) for j in JobQueue(reviews).listing()["result_json"]]
    assert sum(r["rows_read"] for r in results) == 43  # each captured row in exactly one part
    # The caller's text is kept as the set's source query, as embed keeps it; never run here.
    assert found.source_query == SOURCE


def test_a_teacher_job_finishes_after_the_callers_tables_are_dropped(reviews: Store) -> None:
    host.embed(reviews, set_name="reviews", source=SOURCE)
    requested = request_teacher(
        reviews,
        head="sent",
        set_name="reviews",
        labels="SELECT item_key, label FROM review_labels",
        model="all-MiniLM-L6-v2",
        students=["word"],
        max_steps=2,
        max_length=32,
        batch_size=8,
        epochs=1,
        deploy="always",
    )
    _drop_callers_tables(reviews)
    ran = _sidecar(reviews)
    assert [(j["job_id"], j["state"]) for j in ran["jobs"]] == [(requested["job_id"], "done")]
    result = json.loads(JobQueue(reviews).listing()["result_json"].iloc[0])
    assert result["teacher"]["soft_labels"] == 41  # every key with text ("twice" once)
    assert set(result["students"]) == {"word"}
    versions = host.models(reviews)
    assert ("sent", "word_student") in set(zip(versions["head"], versions["kind"], strict=True))


def test_a_request_refuses_duplicate_labels_before_anything_is_queued(reviews: Store) -> None:
    twice = "SELECT item_key, label FROM review_labels UNION ALL SELECT 'x', 'good' FROM reviews"
    reviews.add_set("reviews", encoders.resolve_encoder(reviews, None).encoder_id, "window")
    with reviews.engine.begin() as c:
        c.execute(
            update(s.embedding_sets).values(source_query=SOURCE, source_user=getpass.getuser())
        )
    with pytest.raises(InvalidParameterError) as refused:
        request_teacher(reviews, head="sent", set_name="reviews", labels=twice)
    assert refused.value.number == 50012 and "more than once" in str(refused.value)
    assert JobQueue(reviews).listing().empty
    with reviews.engine.connect() as c:
        assert c.execute(select(s.job_inputs.c.input_id)).first() is None


def test_jobs_record_who_asked_and_only_the_requester_may_cancel(reviews: Store) -> None:
    requested = request_embed(reviews, set_name="mine", source=SOURCE, engine="onnx")
    (job_id,) = requested["job_ids"]
    (listed,) = jobs(reviews)["jobs"]
    assert listed["requested_by"] == listed["requested_user"] == getpass.getuser()
    with reviews.engine.begin() as c:
        c.execute(
            update(s.job_queue)
            .where(s.job_queue.c.job_id == job_id)
            .values(requested_user="someone_else")
        )
    with pytest.raises(JobOwnerError) as refused:
        cancel_job(reviews, job_id=job_id)
    # the refusal names no other user
    assert refused.value.number == 50070 and "someone_else" not in str(refused.value)
    assert JobQueue(reviews).get(job_id).state == "queued"
    with reviews.engine.begin() as c:  # back to its requester, who may cancel it
        c.execute(update(s.job_queue).values(requested_user=getpass.getuser()))
    assert cancel_job(reviews, job_id=job_id)["state"] == "cancelled"


def test_an_embed_part_embeds_every_row_its_request_captured(reviews: Store) -> None:
    """The request decides which part holds a row (heads.request_embed cuts the keys in BIN2,
    UTF-16 code units, where U+1F600 sorts before U+FFFD; Python compares code points, where
    it sorts after): a part embeds the rows captured with it and filters none out again."""
    smiley, replacement = "\U0001f600", "\ufffd"
    rows = pd.DataFrame(
        {"item_key": [smiley, replacement], "text": ["a moving film", "a dull film"]}
    )
    JobQueue(reviews).enqueue(
        "embed",
        "cut",
        {"source": SOURCE, "encoder": encoders.resolve_encoder(reviews, None).name},
        ranges=[(None, replacement), (replacement, None)],  # as BIN2 cuts them
        inputs=[rows.iloc[[0]], rows.iloc[[1]]],
    )
    ran = _sidecar(reviews)
    assert [j["state"] for j in ran["jobs"]] == ["done", "done"]
    found = reviews.require_set("cut")
    assert reviews.set_counts(found.set_id) == {"set_rows": 2, "set_rejects": 0}


def test_an_embed_job_records_its_requester_as_the_author_of_the_source(reviews: Store) -> None:
    """The set's source query is the requester's, so it runs for the requester alone: the
    sidecar records the job's requester as its author, never itself."""
    requested = request_embed(reviews, set_name="theirs", source=SOURCE, engine="onnx")
    with reviews.engine.begin() as c:
        c.execute(
            update(s.job_queue)
            .where(s.job_queue.c.job_id.in_(requested["job_ids"]))
            .values(requested_user="alice")
        )
    assert [j["state"] for j in _sidecar(reviews)["jobs"]] == ["done"]
    found = reviews.require_set("theirs")
    assert (found.source_query, found.source_user) == (SOURCE, "alice")
