"""What a sidecar may write, and into whose set anyone may write (the fourth SQL Server audit,
findings 3 and 5), on SQLite, where the equivalents of the procedures that decide it on SQL Server
refuse with the same numbers (the live tests show the server's):

- a job changes state only through a transition of the worker that holds it as running: a
  finished or cancelled job is never revived, another worker's never touched (50054), and a
  sidecar cancels only what its requester cancelled (50072);
- a sidecar's writes reach the set and head of the job it holds alone (50072): versions,
  soft labels, transfer rows and vectors of another head, teacher or set are refused;
- a set belongs to the user who made it: another user's embed or request into it is refused
  (50074), and a set without a known owner is taken by the next user to write into it.

Real SQLite, the real MiniLM encoder, real reviews."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from sqlalchemy import update

from sqlheads import host
from sqlheads.errors import (
    BusyError,
    JobClaimLostError,
    JobScopeError,
    SetOwnerError,
)
from sqlheads.sidecar.requests import request_embed, request_teacher
from sqlheads.store import schema as s
from sqlheads.store import transfer_cache
from sqlheads.store.claims import JobClaim
from sqlheads.store.jobs import JobQueue
from sqlheads.store.repository import Store
from sqlheads.store.soft_labels import store_soft_labels
from sqlheads.verbs.versions import add_version

SOURCE = "SELECT item_key, text FROM reviews"
LABELS = "SELECT item_key, label FROM reviews"
PARAMS = {"source": SOURCE, "engine": "onnx"}
MINILM = "all-MiniLM-L6-v2"


# -- transitions -------------------------------------------------------------------------------


def _transitions(queue: JobQueue, job_id: int, worker: str) -> dict:
    """Every transition a sidecar has, for one job: each one's refusal (None: it went)."""
    attempts = {
        "heartbeat": lambda: queue.heartbeat(job_id, worker),
        "progress": lambda: queue.progress(job_id, worker, 1, 2, "stage"),
        "finish": lambda: queue.finish(job_id, worker, {"revived": True}),
        "fail (transient)": lambda: queue.fail(job_id, worker, BusyError("busy")),
        "release": lambda: queue.release(job_id, worker),
        "mark_cancelled": lambda: queue.mark_cancelled(job_id, worker),
    }
    found = {}
    for name, attempt in attempts.items():
        try:
            attempt()
            found[name] = None
        except (JobClaimLostError, JobScopeError) as refused:
            found[name] = refused
    return found


@pytest.mark.parametrize("ended", ["done", "failed", "cancelled"])
def test_a_finished_job_is_never_revived(store: Store, ended: str) -> None:
    queue = JobQueue(store)
    (job,) = queue.enqueue("embed", "reviews", PARAMS)
    if ended == "cancelled":
        queue.cancel(job.job_id)
    else:
        queue.claim("w1")
        if ended == "done":
            queue.finish(job.job_id, "w1", {"embedded": 1})
        else:
            queue.fail(job.job_id, "w1", KeyError("a bug"))
    refused = _transitions(queue, job.job_id, "w1")
    assert {name: e.number for name, e in refused.items()} == dict.fromkeys(refused, 50054)
    assert all(f"it is {ended}" in str(e) for e in refused.values())
    assert queue.get(job.job_id).state == ended
    assert queue.claim("w2") is None  # nor claimed again


def test_another_workers_job_is_not_touched(store: Store) -> None:
    queue = JobQueue(store)
    (job,) = queue.enqueue("embed", "reviews", PARAMS)
    queue.claim("w1")
    refused = _transitions(queue, job.job_id, "w2")
    assert {name: e.number for name, e in refused.items()} == dict.fromkeys(refused, 50054)
    assert all("another sidecar holds it: w1" in str(e) for e in refused.values())
    held = queue.get(job.job_id)
    assert (held.state, held.claimed_by, held.attempts) == ("running", "w1", 1)


def test_a_sidecar_cancels_only_what_its_requester_cancelled(store: Store) -> None:
    queue = JobQueue(store)
    (job,) = queue.enqueue("embed", "reviews", PARAMS)
    queue.claim("w1")
    with pytest.raises(JobScopeError) as refused:
        queue.mark_cancelled(job.job_id, "w1")
    assert refused.value.number == 50072 and queue.get(job.job_id).state == "running"
    assert queue.cancel(job.job_id) == "cancel_requested"
    queue.mark_cancelled(job.job_id, "w1")
    assert queue.get(job.job_id).state == "cancelled"


# -- writes for the held job ------------------------------------------------------------------


@pytest.fixture(scope="module")
def scoped_template(tmp_path_factory, tiny_embedded_template: Path, copy_sqlite) -> Path:
    """40 reviews embedded into set 'reviews', a head 'h' trained on them, a teacher job for
    head 'sent' and an embed job for set 'more', both queued."""
    path = tmp_path_factory.mktemp("scope") / "heads.db"
    store = copy_sqlite(tiny_embedded_template, path)
    host.train(store, head="h", set_name="reviews", labels=LABELS, epochs=2, deploy="never")
    request_teacher(store, head="sent", set_name="reviews", labels=LABELS, model=MINILM)
    request_embed(store, set_name="more", source=SOURCE, engine="onnx")
    store.engine.dispose()
    return path


@pytest.fixture
def held(scoped_template: Path, copy_database) -> dict:
    """The copy, with both jobs claimed by worker w1; ``teacher`` and ``embed``: the stores
    w1 writes through for each."""
    store = copy_database(scoped_template)
    queue = JobQueue(store)
    teacher, embed = queue.claim("w1", ["teacher"]), queue.claim("w1", ["embed"])
    user = store.database_user()
    return {
        "store": store,
        "teacher": store.for_job(JobClaim(teacher.job_id, "w1", user)),
        "embed": store.for_job(JobClaim(embed.job_id, "w1", user)),
        "other_worker": store.for_job(JobClaim(teacher.job_id, "w2", user)),
    }


def _version(store: Store, head: str) -> dict:
    """The columns of head 'h''s version 1 (a real trained row), renamed to ``head``."""
    model = store.find_model("h", 1)
    values = store.model_record(model.model_id)
    for generated in ("model_id", "version", "created_at"):
        values.pop(generated)
    return values | {"head": head, "blob": store.model_blob(model.model_id), "onnx": None}


def test_a_sidecar_writes_versions_of_its_jobs_head_alone(held: dict) -> None:
    store, teacher = held["store"], held["teacher"]
    for head, writer in (("h", teacher), ("sent", held["other_worker"])):
        with pytest.raises(JobScopeError) as refused:
            add_version(writer, _version(store, head), "always")
        assert refused.value.number == 50072, head
    written = add_version(teacher, _version(store, "sent_teacher"), "never")
    assert (written.model.head, written.model.version) == ("sent_teacher", 1)
    # The job's own policy decides, not the caller's: the request's is if-better.
    assert add_version(teacher, _version(store, "sent"), "never").deployed


def test_a_sidecar_writes_its_jobs_teacher_and_transfer_rows_alone(held: dict) -> None:
    store, teacher = held["store"], held["teacher"]
    set_id = store.require_set("reviews").set_id
    with pytest.raises(JobScopeError) as refused:
        store_soft_labels(teacher, "h_teacher", set_id, ["negative", "positive"], [], [])
    assert refused.value.number == 50072
    store_soft_labels(teacher, "sent_teacher", set_id, ["negative", "positive"], [], [])
    other = store.find_model("h", 1).model_id  # not a version of the job's teacher
    with pytest.raises(JobScopeError) as refused:
        transfer_cache.open_transfer_set(
            teacher, model_id=other, teacher="h", recipe_key="k", recipe={}, classes=["a", "b"]
        )
    assert refused.value.number == 50072
    own = add_version(teacher, _version(store, "sent_teacher"), "never").model.model_id
    cached = transfer_cache.open_transfer_set(
        teacher, model_id=own, teacher="sent_teacher", recipe_key="k", recipe={}, classes=["a"]
    )
    assert cached.model_id == own and cached.classes == ["a"]


def test_a_sidecar_writes_vectors_of_its_jobs_rows_into_its_jobs_set_alone(held: dict) -> None:
    store, embed = held["store"], held["embed"]
    reject = pd.DataFrame(
        {
            "item_key": ["1"],
            "text_sha256": [None],
            "vector": [None],
            "windows": [None],
            "reject_reason": ["text is empty"],
        }
    )
    captured = reject.assign(item_key=[_captured_key(store)])
    reviews = store.require_set("reviews").set_id
    with pytest.raises(JobScopeError) as refused:  # another set
        embed.write_embed_batch(reviews, captured)
    assert refused.value.number == 50072
    more = embed.add_set("more", store.require_set("reviews").encoder_id, "window").set_id
    with pytest.raises(JobScopeError) as refused:  # a row its request did not capture
        embed.write_embed_batch(more, reject.assign(item_key=["not captured"]))
    assert refused.value.number == 50072
    embed.write_embed_batch(more, captured)
    assert store.set_counts(more) == {"set_rows": 0, "set_rejects": 1}


def _captured_key(store: Store) -> str:
    with store.engine.connect() as c:
        return c.execute(
            s.job_inputs.select()
            .with_only_columns(s.job_inputs.c.item_key)
            .join(s.job_queue)
            .where(s.job_queue.c.kind == "embed")
            .limit(1)
        ).scalar_one()


# -- sets have owners ---------------------------------------------------------------------------


def _owner(store: Store, user: str | None) -> None:
    with store.engine.begin() as c:
        c.execute(update(s.embedding_sets).values(owner_user=user))


def test_another_users_set_is_refused_to_embed_and_to_requests(
    scoped_template: Path, copy_database
) -> None:
    store = copy_database(scoped_template)
    _owner(store, "mallory")
    attempts = {
        "embed": lambda: host.embed(store, set_name="reviews", source=SOURCE),
        "request_embed": lambda: request_embed(store, set_name="reviews", source=SOURCE),
    }
    for verb, attempt in attempts.items():
        with pytest.raises(SetOwnerError) as refused:
            attempt()
        assert refused.value.number == 50074, verb
        assert "mallory" not in str(refused.value), verb  # names no other user
    assert len(JobQueue(store).listing()) == 2  # no request queued


def test_a_set_without_a_known_owner_is_taken_by_its_next_writer(
    scoped_template: Path, copy_database
) -> None:
    store = copy_database(scoped_template)
    _owner(store, None)  # as migration 0008 leaves a set whose author was not recorded
    host.embed(store, set_name="reviews", source=SOURCE)
    with store.engine.connect() as c:
        owner = c.execute(
            s.embedding_sets.select().with_only_columns(s.embedding_sets.c.owner_user)
        )
        assert owner.scalar_one() == store.database_user()
