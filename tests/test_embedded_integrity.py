"""The embedded host as a new user meets it: duplicated keys, refused calls, caller queries that
reach for files, two processes on one file, and deployment only on a real improvement."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys

import pandas as pd
import pytest
from sqlalchemy import func, select, text

from sqlheads import host, procedures, settings
from sqlheads.compute import columns
from sqlheads.errors import QueryNotAllowedError, QueryShapeError, SqlheadsError
from sqlheads.store import schema
from sqlheads.store.repository import Store

LABELS = "SELECT item_key, label FROM reviews"
NOTES = "SELECT id AS item_key, body AS text FROM notes"


def _count(store: Store, table, **where) -> int:
    query = select(func.count()).select_from(table)
    for column, value in where.items():
        query = query.where(table.c[column] == value)
    with store.engine.connect() as c:
        return int(c.execute(query).scalar_one())


def _keys(store: Store, table) -> set[str]:
    with store.engine.connect() as c:
        return {r.item_key for r in c.execute(select(table.c.item_key))}


def _cli(url: str, *args: str) -> subprocess.CompletedProcess:
    """The real command line, in a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "sqlheads.cli", "--url", url, "--json", *args],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=900,
    )


# -- 1. a duplicated item_key -------------------------------------------------------------------


@pytest.mark.parametrize("batch_rows", [1000, 2])  # copies in one batch, and in two
def test_a_duplicated_key_is_rejected_whole_the_same_on_every_run(store: Store, batch_rows):
    pd.DataFrame(
        {"id": ["a", "b", "b", "c", "d"], "body": ["Fine.", "Good.", "Bad.", "Okay.", "Meh."]}
    ).to_sql("notes", store.engine, index=False)
    runs = []
    for _ in range(3):
        result = host.embed(store, set_name="notes", source=NOTES, batch_rows=batch_rows)
        runs.append(
            (
                result["embedded"] + result["unchanged"],
                result["rejected"],
                _keys(store, schema.embeddings),
                _keys(store, schema.rejects),
            )
        )
    # Both copies of b are refused, as one reject (rejects count keys, as the set's rejects
    # table holds them: issue 38); the three other keys keep their vectors.
    assert runs == [(3, 1, {"a", "c", "d"}, {"b"})] * 3
    assert result["unchanged"] == 3 and result["rows_read"] == 5
    with store.engine.connect() as c:
        reason = c.execute(select(schema.rejects.c.reason)).scalar_one()
    assert reason == columns.DUPLICATE_KEY


def test_a_key_that_becomes_duplicated_loses_its_stale_vector(store: Store):
    pd.DataFrame({"id": ["a", "b"], "body": ["Fine.", "Good."]}).to_sql(
        "notes", store.engine, index=False
    )
    host.embed(store, set_name="notes", source=NOTES)
    with store.engine.begin() as c:
        c.execute(text("INSERT INTO notes (id, body) VALUES ('b', 'Bad.')"))
    host.embed(store, set_name="notes", source=NOTES)
    assert _keys(store, schema.embeddings) == {"a"} and _keys(store, schema.rejects) == {"b"}


def test_the_procedure_rejects_every_copy_of_a_key_with_one_row():
    frame = pd.DataFrame({"item_key": ["k", "k", "k"], "text": ["x", "y", "z"]})
    output = procedures.embed(frame, encoder_sha256="not-needed-nothing-to-embed")
    assert output[["item_key", "reject_reason"]].values.tolist() == [["k", columns.DUPLICATE_KEY]]


# -- 2. a refused embed changes nothing ----------------------------------------------------------


@pytest.mark.parametrize(
    "source",
    [
        "SELECT id AS item_key FROM notes",  # no text column
        "SELECT id AS item_key, body AS text FROM no_such_table",  # fails to compile
        # fails while it runs, on its first row: integer overflow
        "SELECT id AS item_key, body AS text FROM notes WHERE abs(-9223372036854775808) > 0",
    ],
)
def test_a_refused_embed_leaves_no_set_and_registers_no_encoder(store: Store, source):
    pd.DataFrame({"id": ["a"], "body": ["Fine."]}).to_sql("notes", store.engine, index=False)
    with pytest.raises(QueryShapeError):
        host.embed(store, set_name="notes", source=source)
    assert store.find_set("notes") is None
    assert _count(store, schema.embedding_sets) == 0 and _count(store, schema.encoders) == 0


# -- 3. caller queries read tables and nothing else ----------------------------------------------


@pytest.mark.parametrize("statement", ["ATTACH DATABASE '{path}' AS other", "VACUUM INTO '{path}'"])
def test_a_caller_query_cannot_create_a_file(store: Store, tmp_path, statement):
    target = tmp_path / "made-by-a-query.db"
    with pytest.raises(QueryNotAllowedError, match="ATTACH") as refused:
        host.embed(store, set_name="s", source=statement.format(path=target))
    assert refused.value.number == 50031
    assert not target.exists()  # not even the 0-byte file


def test_a_caller_query_cannot_write_a_pragma_or_call_file_functions(store: Store):
    for source, named in [
        ("PRAGMA user_version = 7", "PRAGMA user_version"),
        ("SELECT load_extension('x') AS item_key, 'a' AS text", "load_extension"),
    ]:
        with pytest.raises(QueryNotAllowedError, match=named):
            host.embed(store, set_name="s", source=source)
    with store.engine.connect() as c:
        assert c.exec_driver_sql("PRAGMA user_version").scalar_one() == 0
        # The pooled connection is writable again afterwards.
        assert c.exec_driver_sql("PRAGMA query_only").scalar_one() == 0


# -- 4. two processes on one SQLite file ---------------------------------------------------------


def _pausing(verb: str, url: str, arguments: dict, paused, release, results) -> None:
    """A real ``host.<verb>`` in a process of its own that waits at its first progress call
    (after its first epoch, or its first committed batch) until the test releases it."""

    def progress(done: int, total: int | None, stage: str | None) -> None:
        if done and not paused.is_set():
            paused.set()
            release.wait(600)

    try:
        result = getattr(host, verb)(Store.from_url(url), progress=progress, **arguments)
        results.put(("ok", result))
    except Exception as error:  # reported to the test, which fails on it
        results.put(("error", repr(error)))


def _start(verb: str, url: str, **arguments):
    context = multiprocessing.get_context("spawn")
    paused, release, results = context.Event(), context.Event(), context.Queue()
    process = context.Process(
        target=_pausing, args=(verb, url, arguments, paused, release, results)
    )
    process.start()
    assert paused.wait(600), "the child process never reached its pause"
    return process, release, results


def test_two_trainings_of_one_head_run_side_by_side_and_never_share_a_version(embedded: Store):
    """The head's lock is held only while a version is written (as heads.write_version and
    heads.add_version hold it), never for a training: a second training of the head runs
    while the first trains, and each writes its own version number."""
    url = embedded.engine.url.render_as_string(hide_password=False)
    first, release, results = _start(
        "train", url, head="sentiment", set_name="reviews", labels=LABELS
    )
    try:
        train = ["train", "--head", "sentiment", "--set", "reviews", "--labels", LABELS]
        second = _cli(url, *train, "--lock-timeout-ms", "0")
        assert second.returncode == 0, second.stdout + second.stderr
        assert json.loads(second.stdout)["version"] == 1  # written while the first trains
    finally:
        release.set()
    first.join(900)
    outcome, trained = results.get(timeout=60)
    assert outcome == "ok", trained
    assert trained["version"] == 2
    assert sorted(embedded.read_view("model_summary", head="sentiment")["version"]) == [1, 2]


def test_a_set_is_not_dropped_under_a_training(embedded: Store):
    """train holds its set Shared for its whole run, as heads.train does: drop_set (Exclusive)
    is refused instead of deleting the vectors under it."""
    url = embedded.engine.url.render_as_string(hide_password=False)
    child, release, results = _start(
        "train", url, head="sentiment", set_name="reviews", labels=LABELS
    )
    try:
        dropped = _cli(url, "drop-set", "--set", "reviews")
    finally:
        release.set()
    child.join(900)
    assert dropped.returncode == 2, dropped.stdout + dropped.stderr
    assert json.loads(dropped.stdout)["number"] == 50016
    assert results.get(timeout=60)[0] == "ok"


def test_a_head_is_not_dropped_under_a_predict(embedded: Store):
    """predict holds head.use Shared for its whole run, as heads.predict does, and drop_head
    takes it Exclusive: the versions a predict scores with are not deleted under it."""
    host.train(embedded, head="sentiment", set_name="reviews", labels=LABELS, deploy="always")
    url = embedded.engine.url.render_as_string(hide_password=False)
    child, release, results = _start("predict", url, head="sentiment", set_name="reviews")
    try:
        dropped = _cli(url, "drop-head", "--head", "sentiment", "--lock-timeout-ms", "0")
    finally:
        release.set()
    child.join(900)
    assert dropped.returncode == 2, dropped.stdout + dropped.stderr
    assert json.loads(dropped.stdout)["number"] == 50016
    outcome, predicted = results.get(timeout=60)
    assert outcome == "ok" and predicted["rows"] == 600, predicted


def test_dropping_a_set_while_another_process_embeds_it_is_refused(embedded: Store):
    url = embedded.engine.url.render_as_string(hide_password=False)
    child, release, results = _start(
        "embed", url, set_name="more", source="SELECT item_key, text FROM reviews", batch_rows=100
    )
    try:
        dropped = _cli(url, "drop-set", "--set", "more")
    finally:
        release.set()
    child.join(900)
    assert dropped.returncode == 2, dropped.stdout + dropped.stderr
    error = json.loads(dropped.stdout)
    assert error["number"] == 50016 and "embedding or dropping" in error["error"]
    outcome, embedded = results.get(timeout=60)
    assert outcome == "ok", embedded
    assert embedded["set_rows"] == 600  # the embedding finished, whole
    assert _cli(url, "drop-set", "--set", "more").returncode == 0


# -- 5. deploy only on a real improvement; prune what no one can see -----------------------------


def test_if_better_needs_a_real_gain():
    assert settings.decide_deploy("if-better", 0.78, None)
    assert not settings.decide_deploy("if-better", 0.7825, 0.7825)  # equal is not better
    assert not settings.decide_deploy("if-better", 0.7830, 0.7825)  # noise is not better
    assert settings.decide_deploy("if-better", 0.7835, 0.7825)  # a tenth of a point is
    assert settings.decide_deploy("always", 0.5, 0.9)
    assert not settings.decide_deploy("never", 0.9, 0.5)


def _predictions_by_version(store: Store) -> dict[int, int]:
    with store.engine.connect() as c:
        rows = c.execute(
            select(schema.models.c.version, func.count())
            .select_from(schema.predictions)
            .join(schema.models, schema.models.c.model_id == schema.predictions.c.model_id)
            .group_by(schema.models.c.version)
        ).all()
    return dict(rows)


def test_a_retrain_with_the_same_score_is_not_deployed_and_pruning_keeps_what_is_visible(
    embedded: Store,
):
    def train(**kwargs):
        return host.train(embedded, head="sentiment", set_name="reviews", labels=LABELS, **kwargs)

    assert train()["deployed"]
    host.predict(embedded, head="sentiment", set_name="reviews")
    again = train()  # same rows, same seed: the same macro-F1
    assert not again["deployed"] and embedded.deployed_model("sentiment").version == 1

    # Version 2 scored explicitly keeps its rows; deploying it removes version 1's.
    host.predict(embedded, head="sentiment", set_name="reviews", version=2)
    assert _predictions_by_version(embedded) == {1: 600, 2: 600}
    host.deploy(embedded, head="sentiment", version=2)
    assert _predictions_by_version(embedded) == {2: 600}

    # A version scored while another is deployed survives the next deployment change.
    train(deploy="never")
    host.predict(embedded, head="sentiment", set_name="reviews", version=3)
    host.roll_back(embedded, head="sentiment")  # back to 1, re-scored: version 2's rows go
    assert _predictions_by_version(embedded) == {1: 600, 3: 600}
    assert len(embedded.read_view("latest_predictions", head="sentiment")) == 600


# -- 10. roll-back of a dropped head -------------------------------------------------------------


def test_roll_back_after_drop_head_says_the_head_may_have_been_dropped(embedded: Store):
    host.train(embedded, head="sentiment", set_name="reviews", labels=LABELS, epochs=2)
    embedded.drop_head("sentiment", 0)
    with pytest.raises(SqlheadsError, match="dropped") as error:
        host.roll_back(embedded, head="sentiment")
    assert error.value.number == 50001
