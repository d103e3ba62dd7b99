"""Issue 19 against a real SQL Server (``SQLHEADS_MSSQL_URL``, as tests/test_sqlserver_live.py;
skipped, with that reason, when unset): a DBA's grant outside the heads schema survives a role
revision; a request captures its rows, so a job runs after the caller's table is gone; heads.jobs
shows each caller their own jobs and only the requester may cancel; Python writers take the
T-SQL verbs' application locks."""

from __future__ import annotations

import uuid

import pytest
import sqlheads_sql
from test_sqlserver_live import URL, error_number, run

pytestmark = [
    pytest.mark.mssql,
    pytest.mark.skipif(
        not URL,
        reason="no SQL Server: set SQLHEADS_MSSQL_URL=mssql+mssqlpython://... to run the live "
        "tests (README, 'Verify on a real server')",
    ),
]


@pytest.fixture(scope="module")
def admin():
    from sqlalchemy import create_engine

    engine = create_engine(URL, isolation_level="AUTOCOMMIT")
    engine.suffix = uuid.uuid4().hex[:8]
    yield engine
    engine.dispose()


@pytest.fixture(scope="module")
def two_analysts(admin):
    """Two logins only in heads_analyst, and a table only the first may read."""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    s, password = admin.suffix, f"Live-{uuid.uuid4().hex}-1a!"
    table = f"dbo.sec_reviews_{s}"
    run(admin, f"CREATE TABLE {table} (review_id int PRIMARY KEY, body nvarchar(200))")
    run(
        admin,
        f"INSERT INTO {table} SELECT TOP (20) ROW_NUMBER() OVER (ORDER BY object_id), "
        "N'a moving, funny and wise film' FROM sys.all_objects",
    )
    made = {"table": table}
    for who in ("first", "second"):
        name = f"sec_{who}_{s}"
        run(
            admin,
            f"CREATE LOGIN {name} WITH PASSWORD = '{password}', CHECK_POLICY = OFF; "
            f"CREATE USER {name} FOR LOGIN {name}; ALTER ROLE heads_analyst ADD MEMBER {name};",
        )
        made[who] = create_engine(
            make_url(URL).set(username=name, password=password), isolation_level="AUTOCOMMIT"
        )
    run(admin, f"GRANT SELECT ON {table} TO sec_first_{s}")
    yield made
    for who in ("first", "second"):
        made[who].dispose()
        run(admin, f"DROP USER sec_{who}_{s}; DROP LOGIN sec_{who}_{s};")
    run(admin, f"DROP TABLE IF EXISTS {table}")


def test_a_grant_outside_the_heads_schema_survives_a_role_revision(admin) -> None:
    table = f"dbo.sec_grant_{admin.suffix}"
    run(admin, f"CREATE TABLE {table} (x int)")
    try:
        run(admin, f"GRANT SELECT ON {table} TO heads_sidecar")
        revoke = sqlheads_sql.REVOKE_ROLE.replace("ROLE_NAME", "heads_sidecar")
        run(admin, revoke)
        kept = run(
            admin,
            "SELECT COUNT(*) AS n FROM sys.database_permissions AS p "
            "WHERE p.grantee_principal_id = DATABASE_PRINCIPAL_ID(N'heads_sidecar') "
            "AND p.major_id = OBJECT_ID(?)",
            table,
        )
        assert kept == [{"n": 1}]
    finally:
        for path in sqlheads_sql.object_files():  # the role's own grants back
            if path.stem == "heads_sidecar":
                for batch in sqlheads_sql.batches(path):
                    run(admin, batch)
        run(admin, f"DROP TABLE {table}")


def test_a_request_captures_its_rows_and_only_its_requester_sees_and_cancels_it(
    admin, two_analysts
) -> None:
    s, table = admin.suffix, two_analysts["table"]
    requested = run(
        two_analysts["first"],
        "EXEC heads.request_embed @set = ?, @source = ?",
        f"sec_set_{s}",
        f"SELECT review_id AS item_key, body AS text FROM {table}",
    )
    job_id = requested[0]["first_job_id"]
    captured = run(admin, "SELECT COUNT(*) AS n FROM heads.job_inputs WHERE job_id = ?", job_id)
    assert captured == [{"n": 20}]
    who = run(
        admin, "SELECT requested_by, requested_user FROM heads.job_queue WHERE job_id = ?", job_id
    )
    assert who == [{"requested_by": f"sec_first_{s}", "requested_user": f"sec_first_{s}"}]
    seen = run(two_analysts["second"], "SELECT job_id FROM heads.jobs WHERE job_id = ?", job_id)
    assert seen == []
    with pytest.raises(Exception) as refused:
        run(two_analysts["second"], "EXEC heads.cancel_job @job_id = ?", job_id)
    assert error_number(refused.value) == 50070
    cancelled = run(two_analysts["first"], "EXEC heads.cancel_job @job_id = ?", job_id)
    assert cancelled[0]["state"] == "cancelled"
    assert run(admin, "SELECT COUNT(*) AS n FROM heads.job_inputs WHERE job_id = ?", job_id) == [
        {"n": 0}
    ]


def test_a_python_writer_waits_for_the_heads_lock_a_verb_holds(admin) -> None:
    """store.applocks takes heads.lock_resource's name: a head locked by a T-SQL session
    (as heads.write_version holds it) makes a Python writer wait, then refuse (50016)."""
    from sqlheads.errors import BusyError
    from sqlheads.store.repository import Store

    head = f"Sec_Head_{admin.suffix}"
    with admin.connect() as holder:
        holder.exec_driver_sql(
            "EXEC heads.take_lock @kind = N'head', @name = ?, @mode = N'Exclusive', "
            "@owner = N'Session', @timeout_ms = 0",
            (head,),
        )
        try:
            store = Store.from_url(URL)
            with (
                pytest.raises(BusyError) as busy,
                store.lock("head", head.lower(), 200, "a verb holds it"),
            ):
                pass
            assert busy.value.number == 50016
        finally:
            holder.exec_driver_sql("EXEC heads.release_lock @kind = N'head', @name = ?", (head,))


def test_a_teacher_job_writes_everything_under_a_sidecar_only_login(admin) -> None:
    """Issue 19, point 2: the whole teacher job (soft labels, the teacher and student
    versions, their deployments replacing the deployed ones) runs under a login that is only in
    heads_sidecar, which holds no INSERT on models or deployments, nor DELETE on predictions."""
    from sqlalchemy.engine import make_url

    from sqlheads.sidecar.worker import Sidecar, SidecarOptions
    from sqlheads.store.repository import Store

    s, password = admin.suffix, f"Live-{uuid.uuid4().hex}-1a!"
    table, login = f"dbo.side_reviews_{s}", f"side_only_{s}"
    run(
        admin,
        f"CREATE TABLE {table} (review_id int PRIMARY KEY, body nvarchar(200), y nvarchar(8))",
    )
    run(
        admin,
        f"INSERT INTO {table} SELECT TOP (24) ROW_NUMBER() OVER (ORDER BY object_id), "
        "CASE WHEN object_id % 2 = 0 THEN N'a moving, funny and wise film' "
        "ELSE N'a dull, tired and empty film' END, "
        "CASE WHEN object_id % 2 = 0 THEN N'pos' ELSE N'neg' END FROM sys.all_objects",
    )
    run(
        admin,
        f"CREATE LOGIN {login} WITH PASSWORD = '{password}', CHECK_POLICY = OFF; "
        f"CREATE USER {login} FOR LOGIN {login}; ALTER ROLE heads_sidecar ADD MEMBER {login};",
    )
    head, set_name = f"side_{s}", f"side_set_{s}"
    source = f"SELECT review_id AS item_key, body AS text FROM {table}"
    labels = f"SELECT review_id AS item_key, y AS label FROM {table}"
    try:
        run(admin, "EXEC heads.embed @set = ?, @source = ?, @progress = 0", set_name, source)
        for _ in range(2):  # the second job's versions replace the first's deployed ones
            run(
                admin,
                "EXEC heads.request_teacher @head = ?, @set = ?, @labels = ?, "
                "@model = N'all-MiniLM-L6-v2', @students = N'word', @deploy = 'always', "
                "@max_steps = 2, @max_length = 16, @batch_size = 8, @epochs = 1",
                head, set_name, labels,
            )  # fmt: skip
            sidecar_url = make_url(URL).set(username=login, password=password)
            store = Store.from_url(sidecar_url.render_as_string(hide_password=False))
            ran = Sidecar(store, SidecarOptions(device="cpu", once=True)).run()
            assert [j["state"] for j in ran["jobs"]] == ["done"], ran
        versions = run(
            admin,
            "SELECT m.head, COUNT(*) AS n, MAX(d.model_id) AS deployed FROM heads.models AS m "
            "LEFT JOIN heads.deployments AS d ON d.model_id = m.model_id "
            "WHERE m.head IN (?, ?) GROUP BY m.head ORDER BY m.head",
            head, f"{head}_teacher",
        )  # fmt: skip
        assert [(v["head"], v["n"]) for v in versions] == [(head, 2), (f"{head}_teacher", 2)]
        assert all(v["deployed"] is not None for v in versions)
    finally:
        run(admin, f"DROP USER {login}; DROP LOGIN {login};")
        run(admin, "EXEC heads.drop_head @head = ?", head)
        run(admin, "EXEC heads.drop_head @head = ?", f"{head}_teacher")
        run(admin, "EXEC heads.drop_set @set = ?", set_name)
        run(admin, f"DROP TABLE IF EXISTS {table}")
