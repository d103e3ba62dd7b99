"""The analyst's day, the error numbers, the roles and concurrent training, against a real SQL
Server with Machine Learning Services named by ``SQLHEADS_MSSQL_URL`` (a login that may create
users, e.g. the compose stack's sa; the database must have been migrated and the default
encoder registered: ``docker/migrate.py``). Skipped, with that reason, when it is unset."""

from __future__ import annotations

import os
import threading
import uuid

import pytest

URL = os.environ.get("SQLHEADS_MSSQL_URL")
pytestmark = [
    pytest.mark.mssql,
    pytest.mark.skipif(
        not URL,
        reason="no SQL Server: set SQLHEADS_MSSQL_URL=mssql+mssqlpython://... to run the live "
        "tests (README, 'Verification without a server')",
    ),
]

REVIEWS = [
    (i, text, "good" if good else "bad")
    for i, (text, good) in enumerate(
        [("a moving, funny and wise film", True), ("dull, slow and far too long", False)] * 40
        + [("the best thing I saw this year", True), ("a waste of two hours", False)] * 20
    )
]


@pytest.fixture(scope="module")
def engine():
    from sqlalchemy import create_engine

    engine = create_engine(URL, isolation_level="AUTOCOMMIT")
    suffix = uuid.uuid4().hex[:8]
    with engine.connect() as c:
        c.exec_driver_sql(
            f"CREATE TABLE dbo.live_reviews_{suffix} (review_id int PRIMARY KEY, "
            "body nvarchar(max), quality nvarchar(20))"
        )
        c.exec_driver_sql(f"INSERT INTO dbo.live_reviews_{suffix} VALUES (?, ?, ?)", REVIEWS)
    engine.suffix = suffix
    yield engine
    with engine.connect() as c:
        for head in (f"q_{suffix}", f"c_{suffix}"):
            c.exec_driver_sql(
                "IF EXISTS (SELECT 1 FROM heads.models WHERE head = ?) "
                "EXEC heads.drop_head @head = ?",
                (head, head),
            )
        c.exec_driver_sql(
            "IF EXISTS (SELECT 1 FROM heads.embedding_sets WHERE name = ?) "
            "EXEC heads.drop_set @set = ?",
            (f"r_{suffix}", f"r_{suffix}"),
        )
        c.exec_driver_sql(f"DROP TABLE dbo.live_reviews_{suffix}")


def call(engine, sql: str, *params) -> list[dict]:
    with engine.connect() as c:
        result = c.exec_driver_sql(sql, tuple(params))
        return [dict(r._mapping) for r in result] if result.returns_rows else []


def error_number(excinfo) -> int:
    import re

    found = re.search(r"\b(5\d{4})\b", str(excinfo.value))
    return int(found.group(1)) if found else -1


def test_analysts_day(engine) -> None:
    s = engine.suffix
    source = f"SELECT review_id AS item_key, body AS text FROM dbo.live_reviews_{s}"
    labels = f"SELECT review_id AS item_key, quality AS label FROM dbo.live_reviews_{s}"
    embedded = call(
        engine, "EXEC heads.embed @set = ?, @source = ?, @batch_rows = 50", f"r_{s}", source
    )
    assert embedded[0]["embedded"] == len(REVIEWS)
    again = call(engine, "EXEC heads.embed @set = ?, @source = ?", f"r_{s}", source)
    assert again[0]["unchanged"] == len(REVIEWS) and again[0]["embedded"] == 0
    first = call(
        engine, "EXEC heads.train @head = ?, @set = ?, @labels = ?", f"q_{s}", f"r_{s}", labels
    )
    assert first[0]["version"] == 1 and first[0]["deployed"]
    second = call(
        engine,
        "EXEC heads.train @head = ?, @set = ?, @labels = ?, @deploy = 'always', @epochs = 5",
        f"q_{s}",
        f"r_{s}",
        labels,
    )
    assert second[0]["version"] == 2
    scored = call(
        engine, "EXEC heads.predict @head = ?, @set = ?, @batch_rows = 30", f"q_{s}", f"r_{s}"
    )
    assert scored[0]["rows"] == len(REVIEWS)
    rows = call(engine, "SELECT * FROM heads.latest_predictions WHERE head = ?", f"q_{s}")
    assert len(rows) == len(REVIEWS) and {r["version"] for r in rows} == {2}
    back = call(engine, "EXEC heads.roll_back @head = ?", f"q_{s}")
    assert back[0]["version"] == 1
    call(engine, "EXEC heads.deploy @head = ?, @version = 2", f"q_{s}")
    summary = call(
        engine, "SELECT * FROM heads.model_summary WHERE head = ? ORDER BY version", f"q_{s}"
    )
    assert [r["is_deployed"] for r in summary] == [0, 1]


@pytest.mark.parametrize(
    ("sql", "params", "number"),
    [
        ("EXEC heads.embed @set = ?, @source = N'SELECT 1 AS item_key'", ("bad name!",), 50002),
        ("EXEC heads.embed @set = ?, @source = N'SELECT 1 AS item_key'", ("ok_set",), 50003),
        (
            "EXEC heads.train @head = N'h', @set = ?, "
            "@labels = N'SELECT 1 AS item_key, 1 AS label'",
            ("no_such_set",),
            50001,
        ),
        ("EXEC heads.predict @head = ?, @set = N'x'", ("no_such_head",), 50001),
        ("EXEC heads.roll_back @head = ?", ("no_such_head",), 50001),
        (
            "EXEC heads.train @head = N'h', @set = N'x', @labels = N'SELECT 1', @deploy = ?",
            ("sometimes",),
            50012,
        ),
    ],
)
def test_error_numbers(engine, sql, params, number) -> None:
    from sqlalchemy.exc import DBAPIError

    with pytest.raises(DBAPIError) as excinfo:
        call(engine, sql, *params)
    assert error_number(excinfo) == number


def test_single_class_labels_keep_their_number(engine) -> None:
    from sqlalchemy.exc import DBAPIError

    s = engine.suffix
    call(
        engine,
        "EXEC heads.embed @set = ?, @source = ?",
        f"r_{s}",
        f"SELECT review_id AS item_key, body AS text FROM dbo.live_reviews_{s}",
    )
    with pytest.raises(DBAPIError) as excinfo:
        call(
            engine,
            "EXEC heads.train @head = ?, @set = ?, @labels = ?",
            f"c_{s}",
            f"r_{s}",
            f"SELECT review_id AS item_key, N'one' AS label FROM dbo.live_reviews_{s}",
        )
    assert error_number(excinfo) == 50004


def test_reader_cannot_exec_or_read_blobs(engine) -> None:
    from sqlalchemy.exc import DBAPIError

    user = f"live_reader_{engine.suffix}"
    call(engine, f"CREATE USER {user} WITHOUT LOGIN; ALTER ROLE heads_reader ADD MEMBER {user};")
    try:
        call(
            engine,
            f"EXECUTE AS USER = '{user}'; SELECT TOP (1) * FROM heads.model_summary; REVERT;",
        )
        for forbidden in (
            "EXEC heads.predict @head = N'x', @set = N'y'",
            "SELECT TOP (1) blob FROM heads.models",
            "EXEC sp_execute_external_script @language = N'Python', @script = N'pass'",
        ):
            with pytest.raises(DBAPIError):
                call(engine, f"EXECUTE AS USER = '{user}'; {forbidden}; REVERT;")
    finally:
        call(engine, f"ALTER ROLE heads_reader DROP MEMBER {user}; DROP USER {user};")


def test_concurrent_trainings_of_one_head_do_not_interleave(engine) -> None:
    s = engine.suffix
    labels = f"SELECT review_id AS item_key, quality AS label FROM dbo.live_reviews_{s}"
    call(
        engine,
        "EXEC heads.embed @set = ?, @source = ?",
        f"r_{s}",
        f"SELECT review_id AS item_key, body AS text FROM dbo.live_reviews_{s}",
    )
    before = call(engine, "SELECT COUNT(*) AS n FROM heads.models WHERE head = ?", f"q_{s}")[0]["n"]
    errors: list[BaseException] = []

    def train() -> None:
        try:
            call(
                engine,
                "EXEC heads.train @head = ?, @set = ?, @labels = ?, @epochs = 20",
                f"q_{s}",
                f"r_{s}",
                labels,
            )
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=train) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors
    versions = [
        r["version"]
        for r in call(
            engine, "SELECT version FROM heads.models WHERE head = ? ORDER BY version", f"q_{s}"
        )
    ]
    assert versions == list(range(1, before + 4))
