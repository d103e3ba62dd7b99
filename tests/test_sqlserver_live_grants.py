"""The fourth SQL Server audit against a real server (``SQLHEADS_MSSQL_URL``, as
tests/test_sqlserver_live.py; skipped, with that reason, when unset): what only a server shows.

- The sidecar starts: `sqlheads sidecar` and its healthcheck, through ``open_store`` (the
  schema revision in ``heads.alembic_version``), as a login only in heads_sidecar; an analyst's
  `sqlheads jobs` and `cancel-job` through ``open_store`` too (finding 1).
- Job transitions are procedures: the sidecar's login cannot UPDATE the queue (229), cannot
  revive a finished job or touch another worker's (50054), nor cancel what nobody cancelled
  (50072); its writes reach its job's set and teacher alone (50072) (finding 3).
- Sets have owners: another analyst's embed or request into a set is refused (50074), an admin
  may; heads_admin cannot write who a query runs as (229) (findings 4 and 5).
- Authors and requesters by SID: a user dropped and made again under the same name runs no
  stored query of the old one (50071), sees and cancels none of its jobs (finding 9).
- READPAST beside READCOMMITTEDLOCK under READ_COMMITTED_SNAPSHOT: a claim skips a job another
  session holds, at once (finding 6); a database below level 160 is refused before anything is
  made in it (finding 7); the smoke script's answers hold no problem, above all the signed
  heads.embed run by a user who is only in heads_analyst (finding 8: whether the certificate's
  permission reaches sys.sp_execute_external_script is decided here, and only here)."""

from __future__ import annotations

import contextlib
import io
import json
import threading
import time
import uuid

import pytest
import sqlheads_sql
import test_sqlserver_live as live
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url
from test_sqlserver_live import ROOT, URL, error_number, run

pytestmark = live.pytestmark  # skipped, with the reason, without SQLHEADS_MSSQL_URL
admin = live.admin  # a sysadmin's engine (the same fixture, for this module)


def _login(admin, name: str, role: str | None):
    password = f"Live-{uuid.uuid4().hex}-1a!"
    run(
        admin,
        f"CREATE LOGIN {name} WITH PASSWORD = '{password}', CHECK_POLICY = OFF; "
        f"CREATE USER {name} FOR LOGIN {name};"
        + (f" ALTER ROLE {role} ADD MEMBER {name};" if role else ""),
    )
    url = make_url(URL).set(username=name, password=password)
    return create_engine(url, isolation_level="AUTOCOMMIT"), url.render_as_string(False), password


def _drop(admin, name: str) -> None:
    run(admin, f"DROP USER IF EXISTS {name}; IF SUSER_ID(N'{name}') IS NOT NULL DROP LOGIN {name};")


@pytest.fixture(scope="module")
def people(admin):
    """Two analysts, a heads_admin, a sidecar-only login; a table both analysts may read, and
    a set the first one embedded (so it is theirs)."""
    s = admin.suffix
    table = f"dbo.grants_reviews_{s}"
    run(admin, f"CREATE TABLE {table} (review_id int PRIMARY KEY, body nvarchar(200))")
    run(
        admin,
        f"INSERT INTO {table} SELECT TOP (20) ROW_NUMBER() OVER (ORDER BY object_id), "
        "N'a moving, funny and wise film' FROM sys.all_objects",
    )
    made = {
        "suffix": s,
        "table": table,
        "set": f"grants_set_{s}",
        "source": f"SELECT review_id AS item_key, body AS text FROM {table}",
    }
    for who, role in (
        ("first", "heads_analyst"),
        ("second", "heads_analyst"),
        ("admin", "heads_admin"),
        ("side", "heads_sidecar"),
    ):
        made[who], made[f"{who}_url"], _ = _login(admin, f"grants_{who}_{s}", role)
    run(admin, f"GRANT SELECT ON {table} TO grants_first_{s}, grants_second_{s}, grants_admin_{s}")
    run(
        made["first"],
        "EXEC heads.embed @set = ?, @source = ?, @progress = 0",
        made["set"],
        made["source"],
    )
    yield made
    run(admin, "DELETE FROM heads.job_queue WHERE set_name LIKE ?", f"grants_%{s}")
    run(admin, "IF EXISTS (SELECT 1 FROM heads.embedding_sets WHERE name = ?) "
        "EXEC heads.drop_set @set = ?, @progress = 0", made["set"], made["set"])  # fmt: skip
    for who in ("first", "second", "admin", "side"):
        made[who].dispose()
        _drop(admin, f"grants_{who}_{s}")
    run(admin, f"DROP TABLE IF EXISTS {table}")


def _cli(url: str, *args: str) -> tuple[int, dict]:
    from typer.testing import CliRunner

    from sqlheads.cli import app

    result = CliRunner().invoke(app, ["--url", url, "--json", *args])
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else {}


def _request(people, who: str = "first") -> int:
    """A new embed request of ``who``'s into a set of its own; its job."""
    set_name = f"grants_q{uuid.uuid4().hex[:6]}_{people['suffix']}"
    rows = run(
        people[who],
        "EXEC heads.request_embed @set = ?, @source = ?, @engine = 'onnx'",
        set_name,
        people["source"],
    )
    return int(rows[0]["first_job_id"])


# -- finding 1: the sidecar starts; the CLI's listing and cancel -----------------------------


def test_the_sidecar_and_its_healthcheck_start_as_the_sidecar_login(people) -> None:
    from sqlheads import healthcheck

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = healthcheck.main(["--url", people["side_url"], "--device", "cpu"])
    assert status == 0, printed.getvalue()
    job_id = _request(people)
    code, ran = _cli(people["side_url"], "sidecar", "--once", "--device", "cpu", "--kind", "embed")
    assert code == 0, ran
    assert {j["job_id"]: j["state"] for j in ran["jobs"]}.get(job_id) == "done"


def test_an_analyst_lists_and_cancels_through_the_command_line(people) -> None:
    job_id = _request(people)
    code, listed = _cli(people["first_url"], "jobs")
    assert code == 0 and job_id in {j["job_id"] for j in listed["jobs"]}, listed
    code, cancelled = _cli(people["first_url"], "cancel-job", "--job-id", str(job_id))
    assert code == 0 and cancelled["state"] == "cancelled", cancelled
    code, other = _cli(people["second_url"], "jobs")
    assert code == 0 and job_id not in {j["job_id"] for j in other["jobs"]}


# -- finding 3: transitions and scoped writes ------------------------------------------------


def test_the_sidecar_changes_jobs_through_the_transitions_alone(people) -> None:
    from sqlheads.errors import JobClaimLostError, JobScopeError
    from sqlheads.store.jobs import JobQueue
    from sqlheads.store.repository import Store

    side = people["side"]
    with pytest.raises(Exception) as denied:
        run(side, "UPDATE heads.job_queue SET state = 'running', claimed_by = N'me'")
    assert error_number(denied.value) == 229
    queue = JobQueue(Store.from_url(people["side_url"]))
    first, second = _request(people), _request(people)
    held = []
    while (job := queue.claim("w1", ["embed"])) is not None:  # ours, and any left queued
        held.append(job.job_id)
    assert {first, second} <= set(held)
    for other in set(held) - {first, second}:
        queue.release(other, "w1")
    with pytest.raises(JobScopeError) as refused:
        queue.mark_cancelled(first, "w1")
    assert refused.value.number == 50072
    queue.finish(first, "w1", {"done": True})
    for attempt in (
        lambda: queue.heartbeat(first, "w1"),  # a finished job
        lambda: queue.fail(first, "w1", ConnectionError("again")),
        lambda: queue.finish(second, "w2", {}),  # another worker's
        lambda: queue.release(second, "w2"),
    ):
        with pytest.raises(JobClaimLostError) as lost:
            attempt()
        assert lost.value.number == 50054
    state = run(people["first"], "SELECT job_id, state FROM heads.jobs WHERE job_id IN (?, ?)",
                first, second)  # fmt: skip
    assert {r["job_id"]: r["state"] for r in state} == {first: "done", second: "running"}
    queue.release(second, "w1")


def test_the_sidecars_writes_reach_its_jobs_set_alone(people) -> None:
    side = people["side"]
    _request(people)
    claimed = run(side, "DECLARE @j int; EXEC heads.claim_job @worker = N'w9', @kinds = N'embed', "
                  "@job_id = @j OUTPUT; SELECT @j AS job_id")[0]["job_id"]  # fmt: skip
    assert claimed is not None
    other = run(people["admin"], "SELECT set_id FROM heads.embedding_sets WHERE name = ?",
                people["set"])[0]["set_id"]  # fmt: skip
    with pytest.raises(Exception) as outside:
        run(
            side,
            "CREATE TABLE #embed_rows (item_key nvarchar(450) COLLATE DATABASE_DEFAULT NOT NULL, "
            "text_sha256 char(64) NULL, vector varbinary(max) NULL, windows int NULL, "
            "reject_reason nvarchar(400) NULL); "
            "INSERT INTO #embed_rows (item_key, reject_reason) VALUES (N'1', N'planted'); "
            "EXEC heads.write_embeddings @job_id = ?, @worker = N'w9', @set_id = ?",
            claimed,
            other,
        )
    assert error_number(outside.value) == 50072
    for statement in ("DELETE FROM heads.embeddings", "INSERT INTO heads.rejects (set_id, "
                      "item_key, reason) VALUES (1, N'x', N'planted')"):  # fmt: skip
        with pytest.raises(Exception) as denied:
            run(side, statement)
        assert error_number(denied.value) == 229, statement
    run(side, "EXEC heads.release_job @job_id = ?, @worker = N'w9', @cancelled = 0", claimed)


# -- findings 4 and 5: owners, and who writes who a query runs as ----------------------------


def test_another_users_set_is_refused_and_heads_admin_may_write_it(people) -> None:
    for statement in ("EXEC heads.embed @set = ?, @source = ?, @progress = 0",
                      "EXEC heads.request_embed @set = ?, @source = ?"):  # fmt: skip
        with pytest.raises(Exception) as refused:
            run(people["second"], statement, people["set"], people["source"])
        assert error_number(refused.value) == 50074, statement
        assert "grants_first" not in str(refused.value)  # names no other user
    run(people["admin"], "EXEC heads.embed @set = ?, @source = ?, @progress = 0",
        people["set"], people["source"])  # fmt: skip
    owner = run(people["admin"], "SELECT owner_user FROM heads.embedding_sets WHERE name = ?",
                people["set"])  # fmt: skip
    assert owner == [{"owner_user": f"grants_first_{people['suffix']}"}]


def test_heads_admin_cannot_write_who_a_query_runs_as(people) -> None:
    admin_login = people["admin"]
    for statement in (
        "UPDATE heads.embedding_sets SET source_sid = USER_SID(), source_query = N'SELECT 1'",
        "UPDATE heads.embedding_sets SET source_user = N'dbo'",
        "INSERT INTO heads.embedding_sets (name, encoder_id, long_text) "
        "SELECT TOP (1) N'planted', encoder_id, 'window' FROM heads.encoders",
        "UPDATE heads.job_queue SET requested_sid = USER_SID()",
        "UPDATE heads.job_queue SET parameters_json = N'{}'",
        "INSERT INTO heads.job_queue (kind, state, set_name, parameters_json) "
        "VALUES ('embed', 'queued', N'planted', N'{}')",
    ):
        with pytest.raises(Exception) as denied:
            run(admin_login, statement)
        assert error_number(denied.value) == 229, statement
    run(admin_login, "UPDATE heads.embedding_sets SET owner_user = owner_user WHERE name = ?",
        people["set"])  # fmt: skip


# -- finding 9: by SID, not by name -----------------------------------------------------------


def test_a_user_made_again_under_the_same_name_inherits_nothing(admin, people) -> None:
    s = admin.suffix
    name, set_name = f"grants_again_{s}", f"grants_again_set_{s}"
    engine, _, _ = _login(admin, name, "heads_analyst")
    run(admin, f"GRANT SELECT ON {people['table']} TO {name}")
    run(engine, "EXEC heads.embed @set = ?, @source = ?, @progress = 0", set_name, people["source"])
    job_id = _request({**people, "again": engine}, "again")
    engine.dispose()
    _drop(admin, name)
    engine, _, _ = _login(admin, name, "heads_analyst")  # the same name, a new SID
    run(admin, f"GRANT SELECT ON {people['table']} TO {name}")
    try:
        labels = f"SELECT review_id AS item_key, N'x' AS label FROM {people['table']}"
        with pytest.raises(Exception) as refused:
            run(engine, "EXEC heads.request_teacher @head = ?, @set = ?, @labels = ?",
                f"grants_h_{s}", set_name, labels)  # fmt: skip
        assert error_number(refused.value) == 50071
        assert run(engine, "SELECT job_id FROM heads.jobs WHERE job_id = ?", job_id) == []
        with pytest.raises(Exception) as refused:
            run(engine, "EXEC heads.cancel_job @job_id = ?", job_id)
        assert error_number(refused.value) == 50070
        with pytest.raises(Exception) as refused:
            run(engine, "EXEC heads.embed @set = ?, @source = ?, @progress = 0",
                set_name, people["source"])  # fmt: skip
        assert error_number(refused.value) == 50074
    finally:
        engine.dispose()
        run(admin, "EXEC heads.cancel_job @job_id = ?", job_id)
        run(admin, "EXEC heads.drop_set @set = ?, @progress = 0", set_name)
        _drop(admin, name)


# -- findings 6, 7, 8: the first deployment --------------------------------------------------


def test_a_claim_skips_a_job_another_session_holds_under_row_versioning(admin, people) -> None:
    """READPAST beside READCOMMITTEDLOCK, in a database with READ_COMMITTED_SNAPSHOT on (as
    docker/migrate.py makes it): the claim does not wait for the locked row, it takes the
    next one."""
    rcsi = run(admin, "SELECT is_read_committed_snapshot_on AS on_ FROM sys.databases "
               "WHERE name = DB_NAME()")[0]["on_"]  # fmt: skip
    if not rcsi:
        pytest.skip("READ_COMMITTED_SNAPSHOT is off here: docker/migrate.py turns it on")
    locked, free = _request(people), _request(people)
    holder = admin.connect().execution_options(isolation_level="READ COMMITTED")
    holding = holder.begin()
    holder.exec_driver_sql(
        "SELECT job_id FROM heads.job_queue WITH (UPDLOCK, ROWLOCK) WHERE job_id = ?", (locked,)
    ).all()
    try:
        started = time.monotonic()
        claimed: list = []
        claim = (
            "DECLARE @j int; EXEC heads.claim_job @worker = N'rp', @kinds = N'embed', "
            "@job_id = @j OUTPUT; SELECT @j AS job_id"
        )
        worker = threading.Thread(
            target=lambda: claimed.append(run(people["side"], claim)[0]["job_id"])
        )
        worker.start()
        worker.join(30)
        assert claimed and claimed[0] not in (None, locked) and time.monotonic() - started < 30
        assert claimed[0] <= free  # the first claimable one past the held row
    finally:
        holding.rollback()
        holder.close()
    run(people["side"], "EXEC heads.release_job @job_id = ?, @worker = N'rp', @cancelled = 0",
        claimed[0])  # fmt: skip


def test_a_database_below_level_160_is_refused_before_anything_is_made(admin) -> None:
    from sqlheads.errors import ServerSetupError
    from sqlheads.store import migrations
    from sqlheads.store.repository import Store

    name = f"sqlheads_level_{admin.suffix}"
    run(admin, f"CREATE DATABASE {name}; ALTER DATABASE {name} SET COMPATIBILITY_LEVEL = 150")
    try:
        store = Store.from_url(make_url(URL).set(database=name).render_as_string(False))
        with pytest.raises(ServerSetupError) as refused:
            migrations.migrate(store)
        assert refused.value.number == 50075 and "COMPATIBILITY_LEVEL = 160" in str(refused.value)
        with store.engine.connect() as c:
            assert c.exec_driver_sql("SELECT SCHEMA_ID(N'heads')").scalar() is None
        store.engine.dispose()
    finally:
        run(admin, f"ALTER DATABASE {name} SET SINGLE_USER WITH ROLLBACK IMMEDIATE; "
            f"DROP DATABASE {name}")  # fmt: skip


def test_the_signature_reaches_the_external_script_and_the_smoke_checks_pass(admin) -> None:
    """docker/smoke.sql as docker/migrate.py runs it after deploying: an analyst-only user's
    heads.embed runs its signed Python, or sqlheads.store.server_checks names the fix."""
    from sqlheads.store.server_checks import smoke_problems

    answers = []
    with admin.connect() as connection:
        cursor = connection.connection.cursor()
        for batch in sqlheads_sql.batches(ROOT / "docker" / "smoke.sql"):
            cursor.execute(batch)
            while True:
                if cursor.description:
                    answers = cursor.fetchall()
                if not cursor.nextset():
                    break
    assert smoke_problems(answers) == []
