"""Against a real SQL Server with Machine Learning Services, named by ``SQLHEADS_MSSQL_URL`` (a
login that may create logins and users, e.g. the compose stack's sa; the database migrated and
the default encoder registered: ``docker/migrate.py``). Skipped, with that reason, when unset.

First the smoke script (docker/smoke.sql) answers the open questions in one go; then the
analyst's day runs as a login that is only in heads_analyst (so module signing, not a
permission of the caller, lets it run Python), and the BI query as one only in heads_reader.
Every call drains all of its result sets, as an ODBC client must when a procedure sends
messages before its row (mkleehammer/pyodbc#673, microsoft/mssql-python#612)."""

from __future__ import annotations

import os
import re
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlheads_sql

URL = os.environ.get("SQLHEADS_MSSQL_URL")
ROOT = Path(__file__).resolve().parents[1]
pytestmark = [
    pytest.mark.mssql,
    pytest.mark.skipif(
        not URL,
        reason="no SQL Server: set SQLHEADS_MSSQL_URL=mssql+mssqlpython://... to run the live "
        "tests (README, 'Verify on a real server')",
    ),
]

REVIEWS = [
    (i, text, "good" if good else "bad")
    for i, (text, good) in enumerate(
        [("a moving, funny and wise film", True), ("dull, slow and far too long", False)] * 40
        + [("the best thing I saw this year", True), ("a waste of two hours", False)] * 20
    )
]


def run(engine, sql: str, *params) -> list[dict]:
    """Execute on a fresh connection and drain every result set; the last one's rows."""
    with engine.connect() as connection:
        cursor = connection.connection.cursor()
        cursor.execute(sql, params) if params else cursor.execute(sql)
        rows: list[dict] = []
        while True:
            if cursor.description:
                names = [d[0] for d in cursor.description]
                rows = [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]
            if not cursor.nextset():
                break
        cursor.close()
        connection.commit()
        return rows


def error_number(error: BaseException) -> int:
    found = re.search(r"\b(5\d{4}|229|297|8164)\b", str(error))
    return int(found.group(1)) if found else -1


@pytest.fixture(scope="module")
def admin():
    from sqlalchemy import create_engine

    engine = create_engine(URL, isolation_level="AUTOCOMMIT")
    engine.suffix = uuid.uuid4().hex[:8]
    yield engine
    engine.dispose()


@pytest.fixture(scope="module")
def people(admin) -> Iterator[dict]:
    """Two logins: one only in heads_analyst, one only in heads_reader; and a source table."""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    s = admin.suffix
    table = f"dbo.live_reviews_{s}"
    password = f"Live-{uuid.uuid4().hex}-1a!"
    run(
        admin,
        f"CREATE TABLE {table} "
        "(review_id int PRIMARY KEY, body nvarchar(max), quality nvarchar(20))",
    )
    with admin.connect() as c:
        c.exec_driver_sql(f"INSERT INTO {table} VALUES (?, ?, ?)", REVIEWS)
    made = {}
    for who, role in (("analyst", "heads_analyst"), ("reader", "heads_reader")):
        name = f"live_{who}_{s}"
        run(
            admin,
            f"CREATE LOGIN {name} WITH PASSWORD = '{password}', CHECK_POLICY = OFF; "
            f"CREATE USER {name} FOR LOGIN {name}; ALTER ROLE {role} ADD MEMBER {name};",
        )
        url = make_url(URL).set(username=name, password=password)
        made[who] = create_engine(url, isolation_level="AUTOCOMMIT")
    run(admin, f"GRANT SELECT ON {table} TO live_analyst_{s}")
    made["table"] = table
    yield made
    for head in (f"q_{s}", f"c_{s}"):
        run(
            admin,
            "IF EXISTS (SELECT 1 FROM heads.models WHERE head = ?) EXEC heads.drop_head @head = ?",
            head,
            head,
        )
    run(
        admin,
        "IF EXISTS (SELECT 1 FROM heads.embedding_sets WHERE name = ?) "
        "EXEC heads.drop_set @set = ?, @progress = 0",
        f"r_{s}",
        f"r_{s}",
    )
    for who in ("analyst", "reader"):
        made[who].dispose()
        run(admin, f"DROP USER live_{who}_{s}; DROP LOGIN live_{who}_{s};")
    run(admin, f"DROP TABLE {table}")


def test_smoke_script_answers_every_open_question(admin) -> None:
    """docker/smoke.sql, batch by batch on one connection (its temp objects span batches)."""
    found: list[dict] = []
    with admin.connect() as connection:
        cursor = connection.connection.cursor()
        for batch in sqlheads_sql.batches(ROOT / "docker" / "smoke.sql"):
            cursor.execute(batch)
            while True:
                if cursor.description and [d[0] for d in cursor.description] == [
                    "question",
                    "found",
                ]:
                    found = [{"question": q, "found": f} for q, f in cursor.fetchall()]
                if not cursor.nextset():
                    break
    print("\n".join(f"{r['question']}: {r['found']}" for r in found))  # the report (pytest -s)
    answers = {r["question"]: r["found"] or "" for r in found}
    problems = {
        q: a for q, a in answers.items() if re.match(r"(FAILED|REFUSED|ALLOWED|MISSING|NOT)", a)
    }
    assert not problems, problems
    assert answers["certificate private key"] == "none"


def test_analysts_day_as_an_analyst_and_bi_as_a_reader(admin, people) -> None:
    s, analyst, reader = admin.suffix, people["analyst"], people["reader"]
    source = f"SELECT review_id AS item_key, body AS text FROM {people['table']}"
    labels = f"SELECT review_id AS item_key, quality AS label FROM {people['table']}"
    # @progress left on (SSMS's default): the row still arrives once the messages are drained.
    embedded = run(
        analyst,
        "EXEC heads.embed @set = ?, @source = ?, @batch_rows = 50, @long_text = 'WINDOW'",
        f"r_{s}",
        source,
    )
    assert embedded[0]["embedded"] == len(REVIEWS) and embedded[0]["long_text"] == "window"
    again = run(analyst, "EXEC heads.embed @set = ?, @source = ?, @progress = 0", f"r_{s}", source)
    assert again[0]["unchanged"] == len(REVIEWS) and again[0]["embedded"] == 0
    # Every hyper-parameter NULL (point 4): Python's defaults, and if-better deploys version 1.
    first = run(
        analyst, "EXEC heads.train @head = ?, @set = ?, @labels = ?", f"q_{s}", f"r_{s}", labels
    )
    assert first[0]["version"] == 1 and first[0]["deployed"]
    second = run(
        analyst,
        "EXEC heads.train @head = ?, @set = ?, @labels = ?, @deploy = 'ALWAYS', @epochs = 5",
        f"q_{s}",
        f"r_{s}",
        labels,
    )
    assert second[0]["version"] == 2 and second[0]["deployed"]
    scored = run(
        analyst,
        "EXEC heads.predict @head = ?, @set = ?, @batch_rows = 30, @progress = 0",
        f"q_{s}",
        f"r_{s}",
    )
    assert scored[0]["rows"] == len(REVIEWS)
    bi = run(reader, "SELECT * FROM heads.latest_predictions WHERE head = ?", f"q_{s}")
    assert len(bi) == len(REVIEWS) and {r["version"] for r in bi} == {2}
    back = run(analyst, "EXEC heads.roll_back @head = ?", f"q_{s}")
    assert back[0]["version"] == 1
    run(analyst, "EXEC heads.deploy @head = ?, @version = 2", f"q_{s}")
    reasons = run(
        admin,
        "SELECT reason FROM heads.deployments WHERE head = ? ORDER BY deployment_id",
        f"q_{s}",
    )
    from sqlheads import settings

    assert [r["reason"] for r in reasons] == [
        settings.deploy_reason("if-better"),
        settings.deploy_reason("always"),
        settings.REASON_ROLL_BACK,
        settings.REASON_BY_HAND,
    ]
    summary = run(
        reader, "SELECT * FROM heads.model_summary WHERE head = ? ORDER BY version", f"q_{s}"
    )
    assert [r["is_deployed"] for r in summary] == [0, 1]


@pytest.mark.parametrize(
    "forbidden",
    [
        "EXEC sys.sp_execute_external_script @language = N'Python', @script = N'x = 1'",
        "EXEC heads.embed_batch @encoder_sha256 = NULL, @long_text = NULL, @batch_size = 1, "
        "@threads = 1, @encoder_onnx = NULL, @tokenizer_json = NULL, @dim = 1, @max_length = 1, "
        "@error_number = NULL, @error_message = NULL",
        "SELECT TOP (1) blob FROM heads.models",
        "EXEC heads.drop_set @set = N'x'",
    ],
)
def test_an_analyst_runs_the_verbs_and_nothing_else(people, forbidden: str) -> None:
    from sqlalchemy.exc import DBAPIError

    with pytest.raises(DBAPIError) as refused:
        run(people["analyst"], forbidden)
    assert error_number(refused.value) in (229, 297)


@pytest.mark.parametrize(
    "forbidden",
    [
        "SELECT TOP (1) blob FROM heads.models",
        "EXEC heads.predict @head = N'x', @set = N'y'",
        "SELECT TOP (1) vector FROM heads.embeddings",
    ],
)
def test_a_reader_reads_views_only(people, forbidden: str) -> None:
    from sqlalchemy.exc import DBAPIError

    with pytest.raises(DBAPIError) as refused:
        run(people["reader"], forbidden)
    assert error_number(refused.value) == 229


@pytest.mark.parametrize(
    ("sql", "params", "number"),
    [
        ("EXEC heads.embed @set = ?, @source = N'SELECT 1 AS item_key'", ("bad name!",), 50002),
        ("EXEC heads.embed @set = ?, @source = N'SELECT 1 AS item_key'", ("ok_set",), 50003),
        (
            "EXEC heads.embed @set = ?, @source = N'SELECT 1 AS item_key, N''x'' AS text', "
            "@long_text = 'sideways'",
            ("ok_set",),
            50012,
        ),
        (
            "EXEC heads.train @head = N'h', @set = ?, "
            "@labels = N'SELECT 1 AS item_key, 1 AS label'",
            ("no_such_set",),
            50001,
        ),
        ("EXEC heads.predict @head = ?, @set = N'x'", ("no_such_head",), 50001),
        ("EXEC heads.roll_back @head = ?", ("no_such_head",), 50001),
        (
            "EXEC heads.embed @set = N'ok_set', @source = N'SELECT 1 AS item_key', @batch_rows = ?",
            (0,),
            50012,
        ),
    ],
)
def test_error_numbers(people, sql, params, number) -> None:
    from sqlalchemy.exc import DBAPIError

    with pytest.raises(DBAPIError) as excinfo:
        run(people["analyst"], sql, *params)
    assert error_number(excinfo.value) == number


def test_without_autocommit_a_verb_refuses_an_open_transaction(admin, people) -> None:
    """pyodbc's and SQLAlchemy's default: implicit transactions (point 15)."""
    from sqlalchemy import create_engine
    from sqlalchemy.exc import DBAPIError

    engine = create_engine(people["analyst"].url)  # no AUTOCOMMIT
    with engine.connect() as connection:
        connection.exec_driver_sql("SELECT COUNT(*) FROM heads.latest_predictions").all()
        with pytest.raises(DBAPIError) as refused:
            connection.exec_driver_sql("EXEC heads.roll_back @head = N'q_x'")
        assert error_number(refused.value) == 50017
    engine.dispose()


def test_a_leaked_session_lock_is_released_on_reentry(admin, people) -> None:
    """A cancelled heads.embed leaves its Session lock on a pooled connection (point 11)."""
    s = admin.suffix
    source = f"SELECT review_id AS item_key, body AS text FROM {people['table']}"
    with admin.connect() as connection:
        cursor = connection.connection.cursor()
        for _ in range(2):  # two leaked counts
            cursor.execute(
                "DECLARE @r nvarchar(255) = heads.lock_resource(N'embed', ?); "
                "EXEC sys.sp_getapplock @Resource = @r, @LockMode = N'Exclusive', "
                "@LockOwner = N'Session', @LockTimeout = 0;",
                (f"R_{s}",),
            )
        cursor.execute("EXEC heads.embed @set = ?, @source = ?, @progress = 0", (f"r_{s}", source))
        while cursor.nextset():
            pass
        cursor.execute(
            "SELECT APPLOCK_MODE(N'public', heads.lock_resource(N'embed', ?), N'Session')",
            (f"r_{s}",),
        )
        assert cursor.fetchone()[0] == "NoLock"


def test_concurrent_trainings_of_one_head_in_any_case_do_not_interleave(admin, people) -> None:
    """'Q_x' and 'q_x' are one head under a case-insensitive collation: one lock (point 10)."""
    s = admin.suffix
    labels = f"SELECT review_id AS item_key, quality AS label FROM {people['table']}"
    run(
        people["analyst"],
        "EXEC heads.embed @set = ?, @source = ?, @progress = 0",
        f"r_{s}",
        f"SELECT review_id AS item_key, body AS text FROM {people['table']}",
    )
    before = run(admin, "SELECT COUNT(*) AS n FROM heads.models WHERE head = ?", f"q_{s}")[0]["n"]
    errors: list[BaseException] = []

    def train(head: str) -> None:
        try:
            run(
                people["analyst"],
                "EXEC heads.train @head = ?, @set = ?, @labels = ?, @epochs = 20",
                head,
                f"r_{s}",
                labels,
            )
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=train, args=(h,)) for h in (f"q_{s}", f"Q_{s}", f"q_{s}")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors
    versions = run(
        admin, "SELECT version FROM heads.models WHERE LOWER(head) = ? ORDER BY version", f"q_{s}"
    )
    assert [r["version"] for r in versions][-3:] == list(range(before + 1, before + 4)) or len(
        {r["version"] for r in versions}
    ) == len(versions)


def test_drop_head_waits_for_predict_instead_of_failing_it(admin, people) -> None:
    """predict holds head.use Shared; drop_head takes it Exclusive (point 13): no error 547."""
    s = admin.suffix
    labels = f"SELECT review_id AS item_key, quality AS label FROM {people['table']}"
    run(
        people["analyst"],
        "EXEC heads.train @head = ?, @set = ?, @labels = ?, @epochs = 3",
        f"c_{s}",
        f"r_{s}",
        labels,
    )
    errors: list[BaseException] = []

    def predict() -> None:
        try:
            run(
                people["analyst"],
                "EXEC heads.predict @head = ?, @set = ?, @batch_rows = 5, @progress = 0",
                f"c_{s}",
                f"r_{s}",
            )
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=predict)
    thread.start()
    run(admin, "EXEC heads.drop_head @head = ?", f"c_{s}")
    thread.join(timeout=600)
    # predict either finished before the drop or found the head gone (50001): never 547.
    assert all(error_number(e) == 50001 for e in errors), errors


def test_sidecar_jobs_requested_in_tsql_run_as_the_sidecar_login(admin, people) -> None:
    """heads.request_embed as an analyst (two parts), `sqlheads sidecar --once` as a login that
    is only in heads_sidecar, heads.jobs as the analyst reads it, heads.cancel_job's refusal."""
    from sqlalchemy.engine import make_url

    from sqlheads.sidecar.worker import Sidecar, SidecarOptions
    from sqlheads.store.repository import Store

    s = admin.suffix
    set_name, login = f"rj_{s}", f"live_sidecar_{s}"
    password = f"Live-{uuid.uuid4().hex}-1a!"
    run(
        admin,
        f"CREATE LOGIN {login} WITH PASSWORD = '{password}', CHECK_POLICY = OFF; "
        f"CREATE USER {login} FOR LOGIN {login}; ALTER ROLE heads_sidecar ADD MEMBER {login}; "
        f"GRANT SELECT ON {people['table']} TO {login};",
    )
    sidecar = Store.from_url(
        make_url(URL).set(username=login, password=password).render_as_string(False)
    )
    try:
        requested = run(
            people["analyst"],
            "EXEC heads.request_embed @set = ?, @source = ?, @parts = 2, @engine = 'onnx'",
            set_name,
            f"SELECT review_id AS item_key, body AS text FROM {people['table']}",
        )[0]
        assert requested["parts"] == 2 and requested["rows"] == len(REVIEWS)
        ran = Sidecar(sidecar, SidecarOptions(device="cpu", once=True)).run()
        assert {j["state"] for j in ran["jobs"]} == {"done"} and len(ran["jobs"]) == 2
        jobs = run(
            people["analyst"],
            "SELECT job_id, state, part, parts, group_id FROM heads.jobs WHERE set_name = ?",
            set_name,
        )
        assert {(j["state"], j["parts"], j["group_id"]) for j in jobs} == {
            ("done", 2, requested["group_id"])
        }
        counts = run(
            admin,
            "SELECT COUNT(*) AS n FROM heads.embeddings AS e JOIN heads.embedding_sets AS es "
            "ON e.set_id = es.set_id WHERE es.name = ?",
            set_name,
        )
        assert counts[0]["n"] == len(REVIEWS)
        with pytest.raises(Exception) as refused:
            run(people["analyst"], "EXEC heads.cancel_job @job_id = ?", jobs[0]["job_id"])
        assert error_number(refused.value) == 50050
    finally:
        sidecar.engine.dispose()
        run(admin, "EXEC heads.drop_set @set = ?, @progress = 0", set_name)
        run(admin, f"DROP USER {login}; DROP LOGIN {login};")


def test_the_label_queue_and_drift_as_a_reader(admin, people) -> None:
    """Revision 0007: heads.train records the keys a version was labelled on (heads.write_version)
    and a reader sees the rest in heads.label_queue, and each scored set in heads.drift."""
    s = admin.suffix
    analyst, reader, head, table = people["analyst"], people["reader"], f"l_{s}", people["table"]
    source = f"SELECT review_id AS item_key, body AS text FROM {table}"
    even = f"SELECT review_id AS item_key, quality AS label FROM {table} WHERE review_id % 2 = 0"
    run(analyst, "EXEC heads.embed @set = ?, @source = ?, @progress = 0", f"r_{s}", source)
    run(
        analyst,
        "EXEC heads.train @head = ?, @set = ?, @labels = ?, @deploy = 'always'",
        head,
        f"r_{s}",
        even,
    )
    run(analyst, "EXEC heads.predict @head = ?, @set = ?, @progress = 0", head, f"r_{s}")
    queue = run(
        reader,
        "SELECT item_key, margin FROM heads.label_queue WHERE head = ? ORDER BY margin",
        head,
    )
    assert sorted(int(r["item_key"]) for r in queue) == [i for i, _, _ in REVIEWS if i % 2]
    assert all(0 <= r["margin"] <= 1 for r in queue)
    drift = run(
        reader,
        "SELECT set_name, rows_scored, judged, drifted FROM heads.drift WHERE head = ?",
        head,
    )
    assert [(r["set_name"], r["rows_scored"], r["judged"]) for r in drift] == [
        (f"r_{s}", len(queue), 0)  # fewer rows than the recorded minimum: not judged
    ]
    run(admin, "EXEC heads.drop_head @head = ?", head)


def test_train_keeps_a_heads_versions_on_one_encoder_unless_asked(admin, people) -> None:
    """Revision 0008: heads.train refuses a set of another encoder than the head's earlier
    versions (50007, naming both and both ways out) unless @allow_encoder_change = 1."""
    from sqlalchemy.exc import DBAPIError

    from sqlheads import host
    from sqlheads.store.repository import Store

    s = admin.suffix
    analyst, head, table = people["analyst"], f"e_{s}", people["table"]
    other = f"minilm-fp32-{s}"
    host.register_encoder(Store.from_url(URL), name=other, quantization="none")
    source = f"SELECT review_id AS item_key, body AS text FROM {table}"
    labels = f"SELECT review_id AS item_key, quality AS label FROM {table}"
    run(analyst, "EXEC heads.embed @set = ?, @source = ?, @progress = 0", f"r_{s}", source)
    run(
        analyst,
        "EXEC heads.embed @set = ?, @source = ?, @encoder = ?, @progress = 0",
        f"f_{s}",
        source,
        other,
    )
    try:
        run(analyst, "EXEC heads.train @head = ?, @set = ?, @labels = ?", head, f"r_{s}", labels)
        with pytest.raises(DBAPIError) as refused:
            run(
                analyst, "EXEC heads.train @head = ?, @set = ?, @labels = ?", head, f"f_{s}", labels
            )
        assert error_number(refused.value) == 50007
        for named in (other, "all-MiniLM-L6-v2-int8", "@allow_encoder_change = 1", "@head"):
            assert named in str(refused.value), refused.value
        changed = run(
            analyst,
            "EXEC heads.train @head = ?, @set = ?, @labels = ?, @allow_encoder_change = 1",
            head,
            f"f_{s}",
            labels,
        )
        assert changed[0]["version"] == 2 and changed[0]["encoder"] == other
    finally:
        run(admin, "EXEC heads.drop_head @head = ?", head)
        run(admin, "EXEC heads.drop_set @set = ?, @progress = 0", f"f_{s}")
