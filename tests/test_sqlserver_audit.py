"""The Python that talks to SQL Server, as the third SQL Server audit asks, checked without a
server (the live halves are in tests/test_sqlserver_live_audit.py): a caller's text goes out
only as one derived table that it cannot close early; ``sqlheads jobs`` reads ``heads.jobs``
and ``cancel-job`` calls ``heads.cancel_job``, whose numbered refusals come back as sqlheads'
errors; and the T-SQL revision 0007 changes that a parser cannot see."""

from __future__ import annotations

import re

import pytest
import sqlheads_sql
from sqlalchemy.dialects import mssql
from sqlserver_tsql import strip_comments_and_strings

from sqlheads.errors import JobOwnerError, JobStateError, QueryShapeError, from_server
from sqlheads.store.caller_queries import derived_table
from sqlheads.store.jobs import JobQueue
from sqlheads.store.repository import Store

BY_NAME = {sqlheads_sql.object_name(p)[1]: p for p in sqlheads_sql.object_files()}
MSSQL_URL = "mssql+mssqlpython://user:password@server/database"  # no connection is made


@pytest.mark.parametrize(
    "escape",
    [
        # closes the derived table, runs a statement of its own, opens another
        "SELECT 1 AS a) AS x; ALTER ROLE db_owner ADD MEMBER m; SELECT * FROM (SELECT 1 AS b",
        "SELECT 1 AS a /* ) */ ) AS x; DROP TABLE dbo.t; SELECT (1",
        "SELECT N'it''s' AS a)",
        "SELECT [a] FROM t WHERE (1 = 1",
        "SELECT 'unterminated",
    ],
)
def test_a_callers_text_cannot_close_its_derived_table(escape: str) -> None:
    with pytest.raises(QueryShapeError) as refused:
        derived_table(escape, "source")
    assert refused.value.number == 50003 and "one SELECT" in str(refused.value)


@pytest.mark.parametrize(
    "query",
    [
        "SELECT id AS item_key, body AS text FROM dbo.reviews;",
        "SELECT ')' AS item_key, [odd)]] name] AS text FROM t -- a comment (\n",
        "SELECT /* nested /* ( */ */ 1 AS item_key, N'(' AS text",
    ],
)
def test_an_ordinary_select_is_wrapped_whole(query: str) -> None:
    wrapped = derived_table(query, "source")
    assert wrapped.startswith("(") and wrapped.endswith("\n) AS caller_query")
    assert query.strip().rstrip(";") in wrapped


def test_jobs_are_listed_through_the_view_on_sql_server() -> None:
    """An analyst may not read heads.job_queue (error 229), and an admin would see every
    caller's job: the listing reads heads.jobs, which shows each caller their own."""
    store = Store.from_url(MSSQL_URL)
    query = JobQueue(store).listing_query(state="queued", kind="embed")
    sql = str(query.compile(dialect=mssql.dialect()))
    assert re.search(r"FROM heads\.jobs\b", sql) and "job_queue" not in sql


def test_the_servers_numbered_refusals_come_back_as_sqlheads_errors() -> None:
    said = (
        "('42000', '[42000] [Microsoft][ODBC Driver 18 for SQL Server][SQL Server]job 7 was "
        "not requested by you: only its requester or heads_admin may cancel it (50070) "
        "(SQLExecDirectW)')"
    )
    error = from_server(said)
    assert isinstance(error, JobOwnerError) and error.message.startswith("job 7 was not")
    assert isinstance(from_server("[SQL Server]job 7 is done (50050)"), JobStateError)
    assert from_server("[SQL Server]Invalid object name 'x'. (208)") is None


def test_request_teacher_compares_keys_in_bin2() -> None:
    """Under a case-insensitive collation 'A' and 'a' would merge: a false 50012, or rows
    joined to the wrong label. Every key column the request stages is BIN2."""
    code = strip_comments_and_strings(BY_NAME["heads.request_teacher"].read_text())
    staged = re.findall(r"CREATE TABLE (#\w+) \(\s*item_key nvarchar\(450\) COLLATE (\w+)", code)
    assert dict(staged) == {
        "#teacher_labels": "Latin1_General_100_BIN2",
        "#teacher_texts": "Latin1_General_100_BIN2",
    }


def test_stored_queries_are_read_only_through_set_source() -> None:
    """Every verb reads a set's stored query through heads.set_source, which gives it to its
    author alone; the only other statements naming the column write it (embed, job_set)."""
    readers = set()
    for name, path in BY_NAME.items():
        code = strip_comments_and_strings(path.read_text())
        for statement in re.split(r";", code):
            writes = re.search(r"\bSET\b[^;]*source_query =", statement)
            if "source_query" in statement and not writes:
                readers.add(name)
    assert readers == {"heads.set_source"}
    source = strip_comments_and_strings(BY_NAME["heads.set_source"].read_text())
    # by security identifier since revision 0008: a user made again under a dropped user's
    # name is another principal (the fourth audit, finding 9)
    assert "@stored_by IS NULL OR @stored_by <> USER_SID()" in source
    assert "@stored_by = es.source_sid" in source
    for verb in ("heads.predict", "heads.distill", "heads.request_teacher"):
        assert "EXEC heads.set_source" in BY_NAME[verb].read_text(), verb
