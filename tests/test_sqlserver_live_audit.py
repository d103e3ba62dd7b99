"""The third SQL Server audit against a real server (``SQLHEADS_MSSQL_URL``, as
tests/test_sqlserver_live.py; skipped, with that reason, when unset): what only a server can
show. A set's stored query runs for its author alone (50071 for anyone else, before it runs);
the sidecar's login cannot write a set's source query, a job's requester or parameters, soft
labels or versions outside the job it holds (229 or 50072); heads.cancel_job leaves a job with
no requester to heads_admin; a caller query with ORDER BY and no TOP, or an unnamed column, is
refused at the describe check (50003) with the fix; the Python CLI lists jobs through
heads.jobs and cancels through heads.cancel_job; READ_COMMITTED_SNAPSHOT is on where
docker/migrate.py made the database."""

from __future__ import annotations

import uuid

import pytest
import test_sqlserver_live as live
from test_sqlserver_live import URL, error_number, run

pytestmark = live.pytestmark  # skipped, with the reason, without SQLHEADS_MSSQL_URL
admin = live.admin  # a sysadmin's engine (the same fixture, for this module)


def _login(admin, name: str, role: str):
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    password = f"Live-{uuid.uuid4().hex}-1a!"
    run(
        admin,
        f"CREATE LOGIN {name} WITH PASSWORD = '{password}', CHECK_POLICY = OFF; "
        f"CREATE USER {name} FOR LOGIN {name}; ALTER ROLE {role} ADD MEMBER {name};",
    )
    url = make_url(URL).set(username=name, password=password)
    return create_engine(url, isolation_level="AUTOCOMMIT"), url


@pytest.fixture(scope="module")
def people(admin):
    """Two analysts (the first may read the table), a sidecar-only login, and a set the first
    analyst embedded (so its stored query is theirs)."""
    s = admin.suffix
    table = f"dbo.audit_reviews_{s}"
    run(admin, f"CREATE TABLE {table} (review_id int PRIMARY KEY, body nvarchar(200))")
    run(
        admin,
        f"INSERT INTO {table} SELECT TOP (20) ROW_NUMBER() OVER (ORDER BY object_id), "
        "N'a moving, funny and wise film' FROM sys.all_objects",
    )
    made = {"table": table, "set": f"audit_set_{s}"}
    for who, role in (("first", "heads_analyst"), ("second", "heads_analyst")):
        made[who], _ = _login(admin, f"audit_{who}_{s}", role)
    made["sidecar"], made["sidecar_url"] = _login(admin, f"audit_side_{s}", "heads_sidecar")
    run(admin, f"GRANT SELECT ON {table} TO audit_first_{s}, audit_second_{s}")
    run(
        made["first"],
        "EXEC heads.embed @set = ?, @source = ?, @progress = 0",
        made["set"],
        f"SELECT review_id AS item_key, body AS text FROM {table}",
    )
    yield made
    run(admin, "EXEC heads.drop_set @set = ?, @progress = 0", made["set"])
    for key, who in (("first", "first"), ("second", "second"), ("sidecar", "side")):
        made[key].dispose()
        run(admin, f"DROP USER audit_{who}_{s}; DROP LOGIN audit_{who}_{s};")
    run(admin, f"DROP TABLE IF EXISTS {table}")


def test_a_stored_query_runs_for_its_author_alone(admin, people) -> None:
    who = run(admin, "SELECT source_user FROM heads.embedding_sets WHERE name = ?", people["set"])
    assert who == [{"source_user": f"audit_first_{admin.suffix}"}]
    labels = f"SELECT review_id AS item_key, N'x' AS label FROM {people['table']}"
    with pytest.raises(Exception) as refused:
        run(
            people["second"],
            "EXEC heads.request_teacher @head = ?, @set = ?, @labels = ?",
            f"audit_h_{admin.suffix}",
            people["set"],
            labels,
        )
    assert error_number(refused.value) == 50071
    # the analysts read the sets without the query texts
    seen = run(people["second"], "SELECT * FROM heads.sets WHERE name = ?", people["set"])
    assert seen and "source_query" not in seen[0]
    with pytest.raises(Exception) as denied:
        run(people["second"], "SELECT source_query FROM heads.embedding_sets")
    assert error_number(denied.value) == 229


def test_the_sidecar_cannot_plant_a_query_or_rewrite_a_job(admin, people) -> None:
    side = people["sidecar"]
    for statement in (
        "UPDATE heads.embedding_sets SET source_query = N'SELECT 1 AS item_key, N''x'' AS text'",
        "INSERT INTO heads.embedding_sets (name, encoder_id, long_text) SELECT TOP (1) N'p', "
        "encoder_id, 'window' FROM heads.encoders",
        "UPDATE heads.job_queue SET requested_user = N'dbo'",
        "UPDATE heads.job_queue SET parameters_json = N'{}'",
        "DELETE FROM heads.soft_labels",
    ):
        with pytest.raises(Exception) as denied:
            run(side, statement)
        assert error_number(denied.value) == 229, statement
    with pytest.raises(Exception) as outside:
        run(
            side,
            "DECLARE @set_id int; EXEC heads.job_set @job_id = -1, @worker = N'w', "
            "@record_source = 1, @set_id = @set_id OUTPUT",
        )
    assert error_number(outside.value) == 50072


def test_a_job_without_a_requester_is_cancelled_by_an_admin_alone(admin, people) -> None:
    requested = run(
        people["first"],
        "EXEC heads.request_embed @set = ?, @source = ?",
        f"audit_jobless_{admin.suffix}",
        f"SELECT review_id AS item_key, body AS text FROM {people['table']}",
    )
    job_id = requested[0]["first_job_id"]
    run(  # as a job queued before requesters were recorded (0006) and given no SID (0008)
        admin,
        "UPDATE heads.job_queue SET requested_user = NULL, requested_sid = NULL WHERE job_id = ?",
        job_id,
    )
    with pytest.raises(Exception) as refused:
        run(people["second"], "EXEC heads.cancel_job @job_id = ?", job_id)
    assert error_number(refused.value) == 50070
    assert "audit_" not in str(refused.value)  # names no other user
    assert run(admin, "EXEC heads.cancel_job @job_id = ?", job_id)[0]["state"] == "cancelled"


@pytest.mark.parametrize(
    ("query", "fix"),
    [
        ("SELECT review_id AS item_key, body AS text FROM {table} ORDER BY review_id", "ORDER BY"),
        ("SELECT review_id AS item_key, body AS text, LEN(body) FROM {table}", "Name every"),
    ],
)
def test_a_query_that_cannot_be_a_derived_table_is_refused_with_the_fix(
    admin, people, query, fix
) -> None:
    with pytest.raises(Exception) as refused:
        run(
            people["first"],
            "EXEC heads.request_embed @set = ?, @source = ?",
            f"audit_shape_{admin.suffix}",
            query.format(table=people["table"]),
        )
    assert error_number(refused.value) == 50003 and fix in str(refused.value)


def test_the_cli_lists_and_cancels_through_the_view_and_the_procedure(admin, people) -> None:
    """As an analyst: heads.job_queue is not theirs to read (229 before revision 0007's
    CLI); the listing shows their own jobs, and cancelling runs heads.cancel_job."""
    from sqlheads.sidecar.requests import cancel_job, jobs
    from sqlheads.store.repository import Store

    requested = run(
        people["first"],
        "EXEC heads.request_embed @set = ?, @source = ?",
        f"audit_cli_{admin.suffix}",
        f"SELECT review_id AS item_key, body AS text FROM {people['table']}",
    )
    job_id = requested[0]["first_job_id"]
    store = Store.from_url(people["first"].url.render_as_string(hide_password=False))
    listed = {j["job_id"] for j in jobs(store)["jobs"]}
    assert job_id in listed
    assert cancel_job(store, job_id=job_id)["state"] == "cancelled"


def test_read_committed_snapshot_is_on_where_migrate_made_the_database(admin) -> None:
    found = run(
        admin,
        "SELECT is_read_committed_snapshot_on AS rcsi FROM sys.databases WHERE name = DB_NAME()",
    )
    if found[0]["rcsi"] != 1:
        pytest.skip("this database was not made by docker/migrate.py: see the DBA guide's step")
    assert found == [{"rcsi": 1}]
