"""The grants are the contract (the fourth SQL Server audit): each role's code runs on SQLite
under the rights its role files grant (tests/sqlserver_grants.py), so that a read or write the
role was not granted fails here as it would fail on the server (Msg 229), naming the table,
the column and the role.

- ``heads_sidecar``: the sidecar process as its container starts it, ``sqlheads sidecar --once
  --device cpu`` (open_store, the schema revision, claims, heartbeats), through an embed job in
  two parts and a default teacher job (both default students, encoder and word, with transfer
  rows) to their end, a job refused another user's set (failed) and a cancelled one, and its
  healthcheck; every GRANT line of its role file is needed by that run, and deleting one (its
  ``alembic_version`` SELECT, its ``transfer_rows`` SELECT) fails it.
- ``heads_analyst``: the command line's server-side listing (the ``jobs`` view) and cancel
  (``heads.cancel_job``); the queue's table itself is not theirs. ``heads_reader``: the
  listing, and no cancel.
- ``heads_admin``: the command line's request and embed (through ``heads.enqueue_job`` and
  ``heads.store_set``), and never a write of the columns that decide as whom a query runs.

Real SQLite, the real MiniLM encoder and teacher weights, real reviews; the teacher job is kept
tiny (3 fine-tuning steps, 32 tokens, 30 transfer rows)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
from sqlalchemy import insert, select, update
from sqlalchemy.exc import DatabaseError
from sqlserver_grants import (
    Access,
    acting_as,
    grant_lines,
    newest_role_file,
    replayed,
    role_rights,
    without_line,
)
from typer.testing import CliRunner

from sqlheads import healthcheck
from sqlheads.cli import app
from sqlheads.errors import SetOwnerError
from sqlheads.store import schema as s
from sqlheads.store.jobs import JobQueue
from sqlheads.store.repository import Store

SOURCE = "SELECT item_key, text FROM reviews"
LABELS = "SELECT item_key, label FROM reviews"
MINILM = "all-MiniLM-L6-v2"
runner = CliRunner()


def cli(url: str, *args: str) -> dict:
    result = runner.invoke(app, ["--url", url, "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def reviews_db(tiny_embedded_template: Path) -> Path:
    """40 reviews (20 a class) in table 'reviews', embedded into set 'reviews' by the owner."""
    return tiny_embedded_template


@pytest.fixture(scope="module")
def sidecar_run(tmp_path_factory, reviews_db: Path, copy_sqlite) -> dict:
    """Queued by the owner: a teacher job (defaults but for a tiny MiniLM fine-tuning and 30
    transfer rows), an embed request in two parts, an embed request into a set that then
    passes to another user (its job fails: 50074), and one whose requester cancels it as the
    sidecar claims it (the flag a running job's cancel sets). Then `sqlheads sidecar --once
    --device cpu` and the healthcheck, under heads_sidecar's grants."""
    folder = tmp_path_factory.mktemp("sidecar_grants")
    database = folder / "heads.db"
    copy_sqlite(reviews_db, database).engine.dispose()
    url = f"sqlite:///{database}"
    teacher = cli(
        url, "request-teacher", "--head", "sent", "--set", "reviews", "--labels", LABELS,
        "--model", MINILM, "--max-steps", "3", "--max-length", "32", "--batch-size", "8",
        "--epochs", "1", "--transfer-rows", "30",
    )  # fmt: skip
    embed = cli(url, "request-embed", "--set", "more", "--source", SOURCE, "--parts", "2")
    (taken,) = cli(url, "request-embed", "--set", "reviews", "--source", SOURCE)["job_ids"]
    (cancelled,) = cli(url, "request-embed", "--set", "late", "--source", SOURCE)["job_ids"]
    owner = Store.from_url(url)
    with owner.engine.begin() as c:
        c.execute(update(s.embedding_sets).values(owner_user="mallory"))
        c.execute(update(s.job_queue).where(s.job_queue.c.job_id == cancelled).values(
            cancel_requested=1
        ))  # fmt: skip
    owner.engine.dispose()
    with acting_as("heads_sidecar") as recorder:
        ran = runner.invoke(app, ["--url", url, "--json", "sidecar", "--once", "--device", "cpu"])
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            status = healthcheck.main(["--url", url, "--device", "cpu"])
    return {
        "url": url,
        "recorder": recorder,
        "ran": ran,
        "health": (status, json.loads(printed.getvalue())),
        "teacher_job": teacher["job_id"],
        "embed_jobs": embed["job_ids"],
        "refused_job": taken,
        "cancelled_job": cancelled,
    }


def test_the_sidecar_runs_a_default_teacher_job_and_an_embed_job_under_its_grants(
    sidecar_run: dict,
) -> None:
    recorder = sidecar_run["recorder"]
    assert recorder.denied == [], recorder.report()
    ran = sidecar_run["ran"]
    assert ran.exit_code == 1, ran.output  # one job failed: the one refused its set
    states = {j["job_id"]: j["state"] for j in json.loads(ran.stdout)["jobs"]}
    assert states == {
        sidecar_run["teacher_job"]: "done",
        **dict.fromkeys(sidecar_run["embed_jobs"], "done"),
        sidecar_run["refused_job"]: "failed",
        sidecar_run["cancelled_job"]: "cancelled",
    }
    store = Store.from_url(sidecar_run["url"])
    queue = JobQueue(store)
    jobs = queue.listing().set_index("job_id")
    result = json.loads(jobs.loc[sidecar_run["teacher_job"]].result_json)
    assert sorted(result["students"]) == ["encoder", "word"]  # the defaults
    assert result["teacher"]["transfer_rows"] == 30
    assert store.require_set("more").source_user == store.database_user()  # its requester
    assert jobs.loc[sidecar_run["refused_job"]].error_number == SetOwnerError.number
    status, health = sidecar_run["health"]
    assert status == 0 and health["healthy"], health
    # The procedures it ran are the sidecar's doors on SQL Server: every one granted to it.
    granted = role_rights().of("heads_sidecar")
    assert recorder.procedures == {g.target for g in granted if g.permission == "EXECUTE"}


def test_every_grant_of_the_sidecar_is_needed_by_its_run(sidecar_run: dict) -> None:
    """Deleting any one GRANT line of heads_sidecar's newest role file refuses something the
    run did: the accesses it made, checked again under the shortened file."""
    recorder = sidecar_run["recorder"]
    path = newest_role_file("heads_sidecar")
    unused = [
        line
        for number, line in grant_lines(path)
        if not replayed(recorder, role_rights(without_line(path, number)))
    ]
    assert unused == [], f"grants the sidecar's run does not need: {unused}"


@pytest.mark.parametrize(
    ("line", "refused"),
    [
        (
            "GRANT SELECT ON OBJECT::heads.alembic_version TO heads_sidecar;",
            Access("SELECT", "heads.alembic_version", "version_num"),
        ),
        (
            "GRANT SELECT ON OBJECT::heads.transfer_rows TO heads_sidecar;",
            Access("SELECT", "heads.transfer_rows", "logits"),
        ),
    ],
    ids=["alembic_version", "transfer_rows"],
)
def test_a_deleted_grant_fails_the_sidecars_run(sidecar_run: dict, line: str, refused) -> None:
    path = newest_role_file("heads_sidecar")
    (number,) = [n for n, text in grant_lines(path) if text == line]
    found = replayed(sidecar_run["recorder"], role_rights(without_line(path, number)))
    assert refused in found, found


def test_without_its_alembic_version_grant_the_sidecar_does_not_start(
    reviews_db: Path, copy_database
) -> None:
    """A real start-up under the file without that GRANT: SQLAlchemy cannot see the table
    (as INFORMATION_SCHEMA hides it on the server), so the revision reads as none and the
    healthcheck fails, with the refusal naming the table and the role."""
    store = copy_database(reviews_db)
    url = store.engine.url.render_as_string(hide_password=False)
    store.engine.dispose()
    path = newest_role_file("heads_sidecar")
    line = "GRANT SELECT ON OBJECT::heads.alembic_version TO heads_sidecar;"
    (number,) = [n for n, text in grant_lines(path) if text == line]
    with acting_as("heads_sidecar", role_rights(without_line(path, number))) as recorder:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            status = healthcheck.main(["--url", url, "--device", "cpu"])
    assert status == 1 and not json.loads(printed.getvalue())["healthy"]
    assert recorder.denied[0] == Access("VISIBLE", "heads.alembic_version"), recorder.report()
    assert "heads_sidecar may not VISIBLE on heads.alembic_version" in recorder.report()
    # with the file as it is
    with acting_as("heads_sidecar") as recorder, contextlib.redirect_stdout(io.StringIO()):
        assert healthcheck.main(["--url", url, "--device", "cpu"]) == 0
    assert recorder.denied == [], recorder.report()


# -- analysts ---------------------------------------------------------------------------------


def test_an_analyst_lists_and_cancels_their_jobs_through_the_view_and_the_procedure(
    reviews_db: Path, copy_database
) -> None:
    store = copy_database(reviews_db)
    url = store.engine.url.render_as_string(hide_password=False)
    cli(url, "request-embed", "--set", "more", "--source", SOURCE, "--parts", "2")
    store.engine.dispose()
    with acting_as("heads_analyst") as recorder:
        listed = cli(url, "jobs")["jobs"]
        assert len(listed) == 2 and {j["state"] for j in listed} == {"queued"}
        cancelled = cli(url, "cancel-job", "--job-id", str(listed[0]["job_id"]))
        assert cancelled["state"] == "cancelled"
        assert recorder.denied == [], recorder.report()
        # The queue's table is not the analyst's: the view is.
        with pytest.raises(DatabaseError, match="not authorized"):
            JobQueue(Store.from_url(url)).count()
    assert recorder.denied == [Access("SELECT", "heads.job_queue")]
    assert recorder.procedures == {"heads.cancel_job"}
    assert Access("SELECT", "heads.jobs") in recorder.used
    # A reader (a BI tool's login) lists the jobs it requested too, and cancels none.
    with acting_as("heads_reader") as recorder:
        assert len(cli(url, "jobs")["jobs"]) == 2
        refused = runner.invoke(
            app, ["--url", url, "--json", "cancel-job", "--job-id", str(listed[1]["job_id"])]
        )
    assert refused.exit_code == 2 and "refused the operation" in refused.stdout
    assert recorder.denied == [Access("EXECUTE", "heads.cancel_job")], recorder.report()


# -- heads_admin -------------------------------------------------------------------------------


def test_heads_admin_requests_and_embeds_through_procedures_and_writes_no_author(
    reviews_db: Path, copy_database
) -> None:
    """The command line as heads_admin: a request and an embed (the caller's table is a DBA's
    grant, outside heads); an INSERT into heads.embedding_sets or an UPDATE of a job's requester
    or a set's author is refused: only procedures write who a query runs as."""
    store = copy_database(reviews_db)
    url = store.engine.url.render_as_string(hide_password=False)
    store.engine.dispose()
    with acting_as("heads_admin", outside=frozenset({"reviews"})) as recorder:
        cli(url, "request-embed", "--set", "queued", "--source", SOURCE)
        cli(url, "embed", "--set", "admins", "--source", SOURCE)
        assert recorder.denied == [], recorder.report()
        assert recorder.procedures >= {"heads.enqueue_job", "heads.store_set"}
        admin = Store.from_url(url)
        found = admin.require_set("reviews")
        for statement in (
            insert(s.embedding_sets).values(name="planted", encoder_id=1, long_text="window"),
            update(s.embedding_sets).values(source_user="mallory", source_query="SELECT 1"),
            update(s.job_queue).values(requested_user="mallory"),
            update(s.job_queue).values(parameters_json="{}"),
        ):
            with pytest.raises(DatabaseError, match="not authorized"), admin.engine.begin() as c:
                c.execute(statement)
        with admin.engine.begin() as c:  # giving a set an owner is the admin's to do
            c.execute(
                update(s.embedding_sets)
                .where(s.embedding_sets.c.set_id == found.set_id)
                .values(owner_user="someone")
            )
    refused = {(a.permission, a.target) for a in recorder.denied}
    assert refused == {
        ("INSERT", "heads.embedding_sets"),
        ("UPDATE", "heads.embedding_sets"),
        ("UPDATE", "heads.job_queue"),
    }
    with Store.from_url(url).engine.connect() as c:
        owners = dict(
            c.execute(select(s.embedding_sets.c.name, s.embedding_sets.c.owner_user)).all()
        )
    assert owners["reviews"] == "someone"
    assert owners["admins"] == Store.from_url(url).database_user()  # the caller owns its set
