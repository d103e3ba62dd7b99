"""Jobs that cannot succeed fail once, and say so (issue 16, part 3): a numbered user error
fails its job at the first attempt; only transient faults (a lost connection, out of memory;
a killed sidecar's stale claim is taken over by the queue) are tried again; ``sidecar --once``
exits non-zero when a job it ran failed."""

from __future__ import annotations

import json

import pytest
import torch
from sqlalchemy.exc import OperationalError
from typer.testing import CliRunner

from sqlheads.cli import app
from sqlheads.errors import BusyError, QueryShapeError, SingleClassError, SqlheadsError
from sqlheads.sidecar.requests import request_embed, request_teacher
from sqlheads.store.jobs import JobQueue
from sqlheads.store.repository import Store
from sqlheads.verbs import encoders

runner = CliRunner()
PARAMS = {"source": "SELECT item_key, text FROM nowhere", "engine": "onnx"}


@pytest.mark.parametrize(
    "error",
    [
        QueryShapeError("the source query failed: no such table: nowhere"),
        SingleClassError("the labels hold one class: 'positive'"),
        KeyError("a bug is not a fault that goes away"),
    ],
)
def test_a_user_error_or_a_bug_fails_the_job_at_once(store: Store, error: Exception) -> None:
    queue = JobQueue(store)
    (job,) = queue.enqueue("embed", "reviews", PARAMS)
    queue.claim("w1")
    assert queue.fail(job.job_id, "w1", error) == "failed"
    row = queue.listing().iloc[0]
    assert (row.state, row.attempts, row.max_attempts) == ("failed", 1, 3)
    assert queue.claim("w1") is None


@pytest.mark.parametrize(
    "fault",
    [
        OperationalError("SELECT 1", {}, ConnectionResetError("connection reset by peer")),
        MemoryError(),
        torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
        ConnectionError("the server closed the connection"),
        BusyError("set 'reviews' is busy: another process is embedding or dropping it"),
    ],
)
def test_a_transient_fault_is_retried_until_max_attempts(store: Store, fault: Exception) -> None:
    queue = JobQueue(store, max_attempts=2)
    (job,) = queue.enqueue("embed", "reviews", PARAMS)
    queue.claim("w1")
    assert queue.fail(job.job_id, "w1", fault) == "queued"
    assert queue.claim("w1").attempts == 2
    assert queue.fail(job.job_id, "w1", fault) == "failed"


def test_sidecar_once_exits_non_zero_when_a_job_failed(store: Store) -> None:
    JobQueue(store).enqueue("embed", "reviews", PARAMS)  # its source table does not exist
    url = store.engine.url.render_as_string(hide_password=False)
    result = runner.invoke(app, ["--url", url, "--json", "sidecar", "--once", "--device", "cpu"])
    assert result.exit_code == 1, result.output
    ran = json.loads(result.stdout.splitlines()[-1])["jobs"]
    assert [(j["state"], j["error_number"]) for j in ran] == [("failed", 50003)]
    nothing_left = runner.invoke(app, ["--url", url, "sidecar", "--once", "--device", "cpu"])
    assert nothing_left.exit_code == 0, nothing_left.output


@pytest.fixture
def textual(store: Store, rt_sample) -> Store:
    """Set 'reviews' with a source query to read text through (no vectors are needed)."""
    rt_sample.groupby("label").head(20).to_sql("reviews", store.engine, index=False)
    encoder = encoders.resolve_encoder(store, None)
    found = store.add_set("reviews", encoder.encoder_id, "window")
    store.set_source_query(found.set_id, "SELECT item_key, text FROM reviews")
    return store


@pytest.mark.parametrize(
    ("arguments", "number", "match"),
    [
        ({"labels": "SELECT item_key, 'positive' AS label FROM reviews"}, 50004, "hold 1 class"),
        ({"labels": "SELECT NULL AS item_key, label FROM reviews"}, 50003, "NULL"),
        ({"model": "/nowhere/teacher"}, 50012, "neither a catalogue model"),
        ({"students": "encoder", "student_model": "/nowhere/student"}, 50012, "/nowhere/student"),
    ],
)
def test_request_teacher_refuses_a_job_that_cannot_succeed(
    textual: Store, arguments: dict, number: int, match: str
) -> None:
    """Checked at request time, so nothing doomed is queued (the sidecar of a SQLite file runs
    on this machine: the models it would load are the ones installed here)."""
    request = {"labels": "SELECT item_key, label FROM reviews"} | arguments
    with pytest.raises(SqlheadsError, match=match) as refused:
        request_teacher(textual, head="h", set_name="reviews", **request)
    assert refused.value.number == number
    assert JobQueue(textual).listing().empty


def test_request_embed_refuses_a_null_key_as_heads_request_embed_does(textual: Store) -> None:
    source = "SELECT CASE WHEN label = 'positive' THEN item_key END AS item_key, text FROM reviews"
    with pytest.raises(QueryShapeError, match="NULL") as refused:
        request_embed(textual, set_name="parts", source=source)
    assert refused.value.number == 50003
    assert JobQueue(textual).listing().empty
