"""The job queue on a real SQLite file: enqueue, claim, beat, finish, fail, cancel, take over."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from sqlalchemy import func, update

from sqlheads.errors import (
    BusyError,
    JobClaimLostError,
    JobStateError,
    NotFoundError,
    UnknownJobKindError,
)
from sqlheads.store import schema as s
from sqlheads.store.jobs import JobQueue, in_range, split_keys
from sqlheads.store.repository import Store

PARAMS = {"source": "SELECT item_key, text FROM reviews", "engine": "onnx"}


def test_enqueue_claim_finish(store: Store) -> None:
    queue = JobQueue(store)
    (job,) = queue.enqueue("embed", "reviews", PARAMS)
    assert (job.state, job.attempts, job.parts, job.group_id) == ("queued", 0, 1, None)
    claimed = queue.claim("w1")
    assert claimed is not None and claimed.job_id == job.job_id
    assert (claimed.state, claimed.attempts, claimed.claimed_by) == ("running", 1, "w1")
    assert claimed.parameters == PARAMS
    assert queue.claim("w2") is None  # nothing else is claimable
    assert queue.heartbeat(job.job_id, "w1") is False
    assert queue.progress(job.job_id, "w1", 5, 10, "embedding") is False
    queue.finish(job.job_id, "w1", {"embedded": 10})
    row = queue.listing(state="done").iloc[0]
    assert (row.state, row.result_json, row.stage) == ("done", '{"embedded": 10}', "done")
    assert row.heartbeat_at is not None and row.finished_at is not None


def test_parts_share_a_group_and_cut_keys_at_quantiles(store: Store) -> None:
    keys = [f"k{i:03d}" for i in range(10)] + ["k000"]  # a duplicate counts once
    ranges = split_keys(keys, 3)
    assert ranges == [(None, "k003"), ("k003", "k006"), ("k006", None)]
    # Every key falls in exactly one range.
    for key in keys:
        assert sum(in_range(key, a, b) for a, b in ranges) == 1
    assert split_keys(["a", "b"], 5) == [(None, "b"), ("b", None)]  # fewer keys, fewer parts
    jobs = JobQueue(store).enqueue("embed", "reviews", PARAMS, ranges=ranges)
    assert [j.part for j in jobs] == [1, 2, 3]
    assert {j.group_id for j in jobs} == {jobs[0].job_id}
    assert {j.parts for j in jobs} == {3}


def test_claims_are_disjoint_and_in_order(store: Store) -> None:
    queue = JobQueue(store)
    ids = [queue.enqueue("embed", "reviews", PARAMS)[0].job_id for _ in range(3)]
    first, second = queue.claim("w1"), queue.claim("w2")
    assert [first.job_id, second.job_id] == ids[:2]
    assert queue.claim("w3", kinds=["teacher"]) is None  # only embed jobs queued
    assert queue.claim("w3", kinds=["embed"]).job_id == ids[2]


def test_failure_retries_until_max_attempts(store: Store) -> None:
    queue = JobQueue(store, max_attempts=2)
    (job,) = queue.enqueue("embed", "reviews", PARAMS)
    error = BusyError("set 'reviews' is busy: another process is embedding or dropping it")
    assert queue.claim("w1").attempts == 1
    assert queue.fail(job.job_id, "w1", error) == "queued"
    again = queue.claim("w1")
    assert again.attempts == 2
    assert queue.fail(job.job_id, "w1", error) == "failed"
    row = queue.listing().iloc[0]
    assert (row.state, row.error_number, row.attempts) == ("failed", 50016, 2)
    assert "is busy" in row.error
    assert queue.claim("w1") is None


def test_cancel_queued_running_and_finished(store: Store) -> None:
    queue = JobQueue(store)
    (queued,) = queue.enqueue("embed", "reviews", PARAMS)
    assert queue.cancel(queued.job_id) == "cancelled"
    with pytest.raises(JobStateError) as refused:
        queue.cancel(queued.job_id)
    assert refused.value.number == 50050
    (running,) = queue.enqueue("embed", "reviews", PARAMS)
    queue.claim("w1")
    assert queue.cancel(running.job_id) == "cancel_requested"
    assert queue.heartbeat(running.job_id, "w1") is True  # the sidecar hears of it
    queue.mark_cancelled(running.job_id, "w1")
    assert queue.get(running.job_id).state == "cancelled"
    with pytest.raises(NotFoundError):
        queue.cancel(12345)


def test_stale_claim_is_taken_over(store: Store) -> None:
    queue = JobQueue(store, stale_after_seconds=2)
    (job,) = queue.enqueue("embed", "reviews", PARAMS)
    queue.claim("killed")
    assert queue.claim("w2") is None  # its heartbeat is fresh
    time.sleep(3.1)  # CURRENT_TIMESTAMP has whole seconds
    taken = queue.claim("w2")
    assert (taken.job_id, taken.attempts, taken.claimed_by) == (job.job_id, 2, "w2")
    with pytest.raises(JobClaimLostError) as lost:  # the old claimer, if it comes back
        queue.heartbeat(job.job_id, "killed")
    assert lost.value.number == 50054
    queue.finish(job.job_id, "w2", {})
    assert queue.get(job.job_id).state == "done"


def test_stale_claim_on_its_last_attempt_fails(store: Store) -> None:
    queue = JobQueue(store, stale_after_seconds=2, max_attempts=1)
    (job,) = queue.enqueue("embed", "reviews", PARAMS)
    queue.claim("killed")
    with store.engine.begin() as c:  # its heartbeat as a killed sidecar leaves it, long ago
        c.execute(update(s.job_queue).values(heartbeat_at=func.datetime("now", "-1 hour")))
    assert queue.claim("w2") is None
    row = queue.listing().iloc[0]
    assert (row.state, row.error_number) == ("failed", 50057)


def test_stale_claim_with_cancel_requested_is_cancelled(store: Store) -> None:
    queue = JobQueue(store, stale_after_seconds=2)
    (job,) = queue.enqueue("embed", "reviews", PARAMS)
    queue.claim("killed")
    queue.cancel(job.job_id)
    with store.engine.begin() as c:
        c.execute(update(s.job_queue).values(heartbeat_at=func.datetime("now", "-1 hour")))
    assert queue.claim("w2") is None
    assert queue.get(job.job_id).state == "cancelled"


def test_heartbeats_use_database_time(store: Store) -> None:
    """SQLite's CURRENT_TIMESTAMP is UTC whatever the machine's zone: every sidecar agrees."""
    queue = JobQueue(store)
    queue.enqueue("embed", "reviews", PARAMS)
    job = queue.claim("w1")
    beat = queue.listing().iloc[0].heartbeat_at
    utc = datetime.now(UTC).replace(tzinfo=None)
    assert abs((utc - beat.to_pydatetime()).total_seconds()) < 5
    assert job.state == "running"


def test_refusals(store: Store) -> None:
    queue = JobQueue(store)
    with pytest.raises(UnknownJobKindError) as kind:
        queue.enqueue("train", "reviews", PARAMS)
    assert kind.value.number == 50053
    with pytest.raises(UnknownJobKindError):
        queue.listing(state="finished")
    with pytest.raises(UnknownJobKindError):
        queue.claim("w1", kinds=["bogus"])
