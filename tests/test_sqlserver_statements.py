"""Checks that read the T-SQL's statements, not where words sit in a file (the third SQL Server
audit, point 6). No server runs here, so these are the safety net a parser alone is not:

- a contract over every revision: each ``EXEC heads.X`` names only parameters X declares (at
  that revision), passes every one without a default, and marks OUTPUT exactly where X
  declares it; no procedure that refuses a caller's transaction is run by ``INSERT ... EXEC``;
  every ``THROW`` number is one of sqlheads' errors; every variable is declared before it is
  used. The same contract holds for docker/smoke.sql and the T-SQL the Python sends;
- policies that depend on control flow, over every path (IF, WHILE, BREAK, THROW):
  Python's deploy decision runs outside the head's lock transaction in heads.write_version,
  heads.add_version writes a version, its deployment and its re-scoring in one transaction;
- the role revoker and heads.cancel_job's refusal evaluated, NULL as T-SQL has it.

Each check is shown failing on a planted mistake."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlheads_sql
from sqlserver_tsql import (
    ROOT,
    Expression,
    Flow,
    Statement,
    Token,
    exec_calls,
    procedure_body,
    procedure_parameters,
    statements,
    tokens,
    transactions,
)

from sqlheads.errors import ERRORS
from sqlheads.store import (
    claims,
    jobs,
    server_jobs,
    server_versions,
    set_writes,
    transfer_cache,
)

NUMBERS = {error.number for error in ERRORS}
SMOKE = ROOT / "docker" / "smoke.sql"


def declared_procedures(revision: str) -> dict[str, Path]:
    """Every procedure standing at ``revision``: name -> its file."""
    return {
        sqlheads_sql.object_name(p)[1]: p
        for p in sqlheads_sql.object_files(revision)
        if sqlheads_sql.object_name(p)[0] == "procedure"
    }


def _refuses_a_transaction(path: Path) -> bool:
    return any(
        call.procedure == "heads.assert_no_transaction"
        for call in exec_calls(tokens(sqlheads_sql.batches(path)[-1]))
    )


def contract_problems(sql: str, revision: str) -> list[str]:
    """What is wrong with the T-SQL ``sql`` (one or more GO-separated batches) against the
    procedures of ``revision``."""
    known = declared_procedures(revision)
    problems = []
    for batch in re.split(r"^\s*GO\s*;?\s*$", sql, flags=re.M | re.I):
        found = tokens(batch)
        calls = exec_calls(found)
        problems += _call_problems(calls, known)
        problems += [
            f"line {t.line}: THROW {n.text} is not one of sqlheads' error numbers"
            for t, n in zip(found, found[1:], strict=False)
            if t.is_word("THROW") and n.kind == "number" and int(n.text) not in NUMBERS
        ]
        problems += _variable_problems(found)
    return problems


def _call_problems(calls, known: dict[str, Path]) -> list[str]:
    problems = []
    for call in calls:
        if not call.procedure.startswith("heads."):
            continue
        where = f"line {call.line}: EXEC {call.procedure}"
        if call.procedure not in known:
            problems.append(f"{where}: no such procedure at this revision")
            continue
        declared = {p.name.lower(): p for p in procedure_parameters(known[call.procedure])}
        passed = {}
        for argument in call.arguments:
            if argument.parameter is None:
                problems.append(f"{where}: a positional argument; name every parameter")
                continue
            parameter = declared.get(argument.parameter)
            if parameter is None:
                problems.append(f"{where}: no parameter @{argument.parameter}")
                continue
            passed[argument.parameter] = argument
            if argument.output != parameter.output:
                problems.append(
                    f"{where}: @{argument.parameter} "
                    + ("is OUTPUT but not passed OUTPUT" if parameter.output else "is no OUTPUT")
                )
        for name, parameter in declared.items():
            if parameter.default is None and name not in passed:
                problems.append(f"{where}: @{name} has no default and is not passed")
        if call.into_table and _refuses_a_transaction(known[call.procedure]):
            problems.append(
                f"{where}: INSERT ... EXEC runs it inside the INSERT's transaction, which it "
                "refuses (50017): call it plainly"
            )
    return problems


def _variable_problems(found: list[Token]) -> list[str]:
    """Variables used before (or without) their DECLARE, or a procedure's parameter list."""
    named = {i for call in _calls_with_positions(found) for i in call}
    declared: set[str] = set()
    start = 0
    if found and found[0].is_word("CREATE"):
        start = next((i for i, t in enumerate(found) if t.is_word("AS")), 0)
        declared = {t.text.lower() for t in found[:start] if t.kind == "variable"}
    problems, i = [], start
    while i < len(found):
        token = found[i]
        if token.is_word("DECLARE"):
            i = _declare(found, i + 1, declared)
            continue
        if (
            token.kind == "variable"
            and not token.text.startswith("@@")
            and i not in named
            and token.text.lower() not in declared
        ):
            problems.append(f"line {token.line}: {token.text} is used but never declared before")
        i += 1
    return problems


def _declare(found: list[Token], i: int, declared: set[str]) -> int:
    """Declare the variables of one DECLARE; the index after its first name."""
    depth = 0
    expect_name = True
    while i < len(found):
        token = found[i]
        if expect_name and token.kind == "variable":
            declared.add(token.text.lower())
            expect_name = False
            i += 1
            continue
        if token.text == ";":
            return i
        depth += {"(": 1, ")": -1}.get(token.text, 0)
        if depth == 0 and token.text == ",":
            expect_name = True
        elif depth == 0 and token.kind == "variable" and found[i - 1].text in ("=", "("):
            return i  # the value names a variable: a use, read by the caller
        i += 1
    return i


def _calls_with_positions(found: list[Token]) -> list[list[int]]:
    return [call.named for call in exec_calls(found)]


def revision_sql(revision: str) -> list[tuple[str, str]]:
    return [
        (str(path.relative_to(ROOT / "sql")), path.read_text(encoding="utf-8"))
        for path in sqlheads_sql.revision_files(revision)
    ]


@pytest.mark.parametrize("revision", sqlheads_sql.revisions())
def test_every_revision_keeps_the_contract_of_the_procedures_it_calls(revision: str) -> None:
    problems = [
        f"{name}: {problem}"
        for name, sql in revision_sql(revision)
        for problem in contract_problems(sql, revision)
    ]
    assert problems == []


def test_the_setup_and_smoke_scripts_keep_the_contract() -> None:
    newest = sqlheads_sql.revisions()[-1]
    for path in (ROOT / "sql" / "setup.sql", SMOKE):
        assert contract_problems(path.read_text(), newest) == [], path.name


def test_the_python_callers_keep_the_contract() -> None:
    """The T-SQL the Python sends to SQL Server (the sidecar's scoped writes, the CLI's)."""
    newest = sqlheads_sql.revisions()[-1]
    sent = {
        "heads.add_version": server_versions.ADD_VERSION.text,
        "heads.store_soft_labels": server_versions.STORE_SOFT_LABELS.text,
        "heads.job_set": claims.JOB_SET.text,
        "heads.cancel_job": jobs.CANCEL_JOB.text,
        # revision 0008: the queue's transitions, the scoped batch writes, the CLI's set and jobs
        "heads.claim_job": server_jobs.CLAIM.text,
        "heads.heartbeat_job": server_jobs.HEARTBEAT.text,
        "heads.finish_job": server_jobs.FINISH.text,
        "heads.fail_job": server_jobs.FAIL.text,
        "heads.release_job": server_jobs.RELEASE.text,
        "heads.enqueue_job": server_jobs.ENQUEUE.text,
        "heads.write_embeddings": set_writes.WRITE_EMBEDDINGS.text,
        "heads.store_set": set_writes.STORE_SET.text,
        "heads.write_transfer_rows": transfer_cache.WRITE_TRANSFER_ROWS.text,
    }
    for procedure, text in sent.items():
        batch = re.sub(r":(\w+)", r"@\1", text)  # bind parameters, as the driver sends them
        batch = (
            "DECLARE "
            + ", ".join(  # each bound value arrives like a declared variable
                f"@{name} int" for name in sorted(set(re.findall(r":(\w+)", text)))
            )
            + ";\n"
            + batch
            if ":" in text
            else batch
        )
        assert procedure in {c.procedure for c in exec_calls(tokens(batch))}, procedure
        assert contract_problems(batch, newest) == [], procedure


# -- the contract check, shown failing on planted mistakes ------------------------------------

TRAIN_0004 = ROOT / "sql" / "0004" / "procedures" / "train.sql"


PLANTS = {
    # the audit's plant: a parameter heads.write_version does not declare
    "unknown parameter": (
        "@deployed_model_id = @deployed_model_id,",
        "@deployed_model = @deployed_model_id,",
        "no parameter @deployed_model",
    ),
    "missing parameter": (
        "@deployed_model_id = @deployed_model_id,",
        "",
        "@deployed_model_id has no default",
    ),
    "missing OUTPUT": (
        "@model_id = @model_id OUTPUT,",
        "@model_id = @model_id,",
        "is OUTPUT but not passed",
    ),
    "extra OUTPUT": (
        "@head = @head,\n            @set_id",
        "@head = @head OUTPUT,\n            @set_id",
        "is no OUTPUT",
    ),
    "THROW": ("THROW 50007, @message, 1;", "THROW 59999, @message, 1;", "THROW 59999"),
    "undeclared": ("DECLARE @dim int;\n", "", "@dim is used but never declared"),
    "unknown procedure": (
        "EXEC heads.assert_name @kind = N'head'",
        "EXEC heads.assert_names @kind = N'head'",
        "no such procedure",
    ),
}


@pytest.mark.parametrize(("old", "new", "complaint"), PLANTS.values(), ids=PLANTS)
def test_the_contract_check_finds_a_planted_mistake(old: str, new: str, complaint: str) -> None:
    text = TRAIN_0004.read_text()
    assert old in text
    planted = text.replace(old, new, 1)
    assert contract_problems(text, "0004") == []
    found = contract_problems(planted, "0004")
    assert any(complaint in problem for problem in found), found


def test_the_contract_check_finds_a_procedure_run_by_insert_exec() -> None:
    """docker/smoke.sql once read heads.request_embed's row through INSERT ... EXEC of the
    dynamic SQL that runs it: the request then ran inside the INSERT's transaction (50017)."""
    planted = """
CREATE TABLE #smoke_request (first_job_id int);
INSERT INTO #smoke_request
EXEC sys.sp_executesql N'
    EXECUTE AS USER = N''sqlheads_smoke_analyst'';
    EXEC heads.request_embed @set = N''s'', @source = N''SELECT 1 AS item_key, N''''x'''' AS text'';
    REVERT;';
"""
    found = contract_problems(planted, sqlheads_sql.revisions()[-1])
    assert any("INSERT ... EXEC runs it" in p for p in found), found


# -- control flow: the transactions each statement runs in -----------------------------------


def _probe(*marks: str):
    def probe(statement: Statement) -> str | None:
        words = statement.text
        return next((m for m in marks if m in words), None) if not statement.body else None

    return probe


def newest(name: str) -> Path:
    return {sqlheads_sql.object_name(p)[1]: p for p in sqlheads_sql.object_files()}[name]


def decision_runs_outside_the_lock(body: list[Statement]) -> bool:
    seen = transactions(body, _probe("EXEC heads.decide_run", "heads.take_lock"))
    return bool(seen.get("EXEC heads.decide_run")) and all(
        f.depth == 0 for f in seen["EXEC heads.decide_run"]
    )


def test_write_version_asks_python_outside_the_heads_lock_transaction() -> None:
    """heads.write_version asks Python again (heads.decide_run) with no transaction open on
    every path, so the head's Exclusive lock (Transaction-owned) is never held while a Python
    process starts; it writes only when the deployed version is still the one decided
    against."""
    body = procedure_body(newest("heads.write_version"))
    assert decision_runs_outside_the_lock(body)
    seen = transactions(body, _probe("INSERT INTO heads.models", "heads.take_lock"))
    assert {f.depth for f in seen["INSERT INTO heads.models"]} == {1}
    # the write happens in a transaction that took the head's lock
    assert {f.began for f in seen["INSERT INTO heads.models"]} <= {
        f.began for f in seen["heads.take_lock"]
    }


def test_the_write_version_check_finds_a_decision_inside_the_transaction() -> None:
    """The COMMIT that gives the lock up moved after the decision: word positions barely
    change, the control flow does."""
    text = newest("heads.write_version").read_text()
    commit = "        COMMIT TRANSACTION;\n        SET @decided_against = @now_deployed_model_id;\n"
    assert commit in text
    planted = text.replace(commit, "        SET @decided_against = @now_deployed_model_id;\n", 1)
    decided = "            @reason = decision.deploy_reason\n        FROM #decided AS decision;\n"
    planted = planted.replace(decided, decided + "        COMMIT TRANSACTION;\n", 1)
    assert planted.count("COMMIT TRANSACTION") == text.count("COMMIT TRANSACTION")
    assert not decision_runs_outside_the_lock(_body_of(planted))


def _body_of(text: str) -> list[Statement]:
    batches = re.split(r"^[ \t]*GO[ \t]*;?[ \t]*$", text, flags=re.M | re.I)
    found = tokens(next(b for b in reversed(batches) if tokens(b)))
    return statements(found[next(i for i, t in enumerate(found) if t.is_word("AS")) + 1 :])


WRITES = (
    "heads.take_lock",
    "EXEC heads.decide_run",
    "INSERT INTO heads.models",
    "INSERT INTO heads.labelled_keys",
    "INSERT INTO heads.deployments",
    "EXEC heads.replace_predictions",
)


def one_transaction(body: list[Statement]) -> set[Flow] | None:
    """The one transaction every write of heads.add_version runs in, or None."""
    seen = transactions(body, _probe(*WRITES))
    flows = [seen.get(mark, set()) for mark in WRITES]
    if not all(flows) or any(f.depth < 1 for found in flows for f in found):
        return None
    began = {f.began for found in flows for f in found}
    return began if len(began) == 1 else None


def test_add_version_writes_the_version_its_deployment_and_rescoring_in_one_transaction() -> None:
    """Under the head's lock, on every path: the decision, the version, the keys it was
    labelled on, the deployment and the predictions it replaces, in the transaction that took
    the lock."""
    text = newest("heads.add_version").read_text()
    assert one_transaction(_body_of(text)) is not None
    body = _body_of(text)
    xact = next(i for i, s in enumerate(body[0].body) if s.text.startswith("SET XACT_ABORT ON"))
    begin = next(i for i, s in enumerate(body[0].body) if s.kind == "BEGIN TRANSACTION")
    assert xact < begin  # any error rolls the version back with its deployment


def test_the_add_version_check_finds_a_deployment_outside_the_versions_transaction() -> None:
    text = newest("heads.add_version").read_text()
    planted = text.replace(
        "    SET @model_id = SCOPE_IDENTITY();\n",
        "    SET @model_id = SCOPE_IDENTITY();\n    COMMIT TRANSACTION;\n    BEGIN TRANSACTION;\n",
        1,
    )
    assert planted != text and one_transaction(_body_of(planted)) is None


# -- evaluated: the role revoker and cancel_job's refusal --------------------------------------

CATALOG = [  # sys.database_permissions joined to the grantee's name, as the revoker reads it
    {"r.name": "heads_sidecar", "p.class": 1, "p.major_id": 10, "p.minor_id": 0,
     "p.permission_name": "SELECT"},
    {"r.name": "heads_sidecar", "p.class": 1, "p.major_id": 10, "p.minor_id": 7,
     "p.permission_name": "UPDATE"},
    {"r.name": "heads_sidecar", "p.class": 1, "p.major_id": 20, "p.minor_id": 0,
     "p.permission_name": "SELECT"},  # a DBA's grant in dbo, granted WITH GRANT OPTION
    {"r.name": "heads_sidecar", "p.class": 3, "p.major_id": 5, "p.minor_id": 0,
     "p.permission_name": "SELECT"},
    {"r.name": "heads_sidecar", "p.class": 0, "p.major_id": 0, "p.minor_id": 0,
     "p.permission_name": "EXECUTE ANY EXTERNAL SCRIPT"},
    {"r.name": "heads_sidecar", "p.class": 0, "p.major_id": 0, "p.minor_id": 0,
     "p.permission_name": "CREATE TABLE"},
    {"r.name": "heads_reader", "p.class": 1, "p.major_id": 10, "p.minor_id": 0,
     "p.permission_name": "SELECT"},
]  # fmt: skip
OBJECTS = {10: ("heads", "job_queue"), 20: ("dbo", "reviews")}
SCHEMAS = {5: "heads"}
FUNCTIONS = {  # NULL for an id of another class, as the catalog functions return
    "OBJECT_SCHEMA_NAME": lambda i: OBJECTS.get(i, (None, None))[0],
    "OBJECT_NAME": lambda i: OBJECTS.get(i, (None, None))[1],
    "SCHEMA_NAME": lambda i: SCHEMAS.get(i),
    "COL_NAME": lambda i, c: {(10, 7): "state"}.get((i, c)),
}


def revoked(revoker: str, role: str) -> list[str]:
    """The REVOKE statements a role revoker batch builds from :data:`CATALOG`, evaluated."""
    found = tokens(revoker.replace("ROLE_NAME", role))
    select = next(s for s in statements(found) if s.kind == "SELECT")
    parts = select.tokens
    start = next(i for i, t in enumerate(parts) if t.is_word("STRING_AGG")) + 2
    depth, end = 0, start
    while depth or parts[end].text != ",":
        depth += {"(": 1, ")": -1}.get(parts[end].text, 0)
        end += 1
    where = next(i for i, t in enumerate(parts) if t.is_word("WHERE")) + 1
    built = []
    for row in CATALOG:
        if Expression(parts[where:], row, FUNCTIONS).value() is True:
            built.append(Expression(parts[start:end], row, FUNCTIONS).value())
    return built


def test_the_role_revoker_revokes_the_roles_heads_grants_with_cascade_and_nothing_else() -> None:
    """A DBA's ``GRANT SELECT ON dbo.reviews TO heads_sidecar`` survives every revision, as do
    database permissions no role file grants and other roles' grants; a grant made WITH GRANT
    OPTION is revoked with CASCADE (Msg 4611 without it), a column grant column by column."""
    assert revoked(sqlheads_sql.REVOKE_ROLE, "heads_sidecar") == [
        "REVOKE SELECT ON OBJECT::[heads].[job_queue] FROM [heads_sidecar] CASCADE;",
        "REVOKE UPDATE ([state]) ON OBJECT::[heads].[job_queue] FROM [heads_sidecar] CASCADE;",
        "REVOKE SELECT ON SCHEMA::[heads] FROM [heads_sidecar] CASCADE;",
        "REVOKE EXECUTE ANY EXTERNAL SCRIPT FROM [heads_sidecar] CASCADE;",
    ]


def test_the_revoker_check_finds_the_revokers_earlier_mistakes() -> None:
    """Revision 0006's revoker: no CASCADE, and a column grant revoked as a table's."""
    earlier = sqlheads_sql.REVOKE_ROLE.replace(" CASCADE;", ";").replace(
        "WHEN p.class = 1 AND p.minor_id <> 0", "WHEN 1 = 0"
    )
    built = revoked(earlier, "heads_sidecar")
    assert built and not any(b.endswith("CASCADE;") for b in built)
    widened = sqlheads_sql.REVOKE_ROLE.replace("OBJECT_SCHEMA_NAME(p.major_id) = N'heads'", "1 = 1")
    assert any("[dbo]" in b for b in revoked(widened, "heads_sidecar"))


def refuses_to_cancel(path: Path, requested_user: str | None, admin: bool = False) -> bool:
    """Whether heads.cancel_job's 50070 guard refuses, for caller bob (whose SID is b"bob";
    revision 0008 compares SIDs, earlier revisions names)."""
    guard = next(
        s
        for s in _walk(procedure_body(path))
        if s.kind == "IF" and "THROW 50070" in " ".join(b.text for b in _walk(s.body))
    )
    member = {"heads_admin": int(admin), "db_owner": 0}
    sid = None if requested_user is None else requested_user.encode()
    condition = Expression(
        guard.tokens[1:],
        {"@requested_user": requested_user, "@requested_sid": sid},
        {
            "USER_NAME": lambda: "bob",
            "USER_SID": lambda: b"bob",
            "IS_MEMBER": lambda role: member[role],
        },
    ).value()
    return condition is True


def _walk(body: list[Statement]):
    for statement in body:
        yield statement
        yield from _walk(statement.body + statement.orelse + statement.catch)


def test_only_the_requester_or_an_admin_cancels_a_job_and_a_job_without_one_is_the_admins() -> None:
    current = newest("heads.cancel_job")
    assert not refuses_to_cancel(current, "bob")
    assert refuses_to_cancel(current, "alice")
    assert refuses_to_cancel(current, None)  # queued before requesters were recorded
    assert not refuses_to_cancel(current, None, admin=True)
    # revision 0006: `@requested_user <> USER_NAME()` is UNKNOWN for NULL, so it let anyone
    assert not refuses_to_cancel(ROOT / "sql" / "0006" / "procedures" / "cancel_job.sql", None)
    message = re.search(r"THROW 50070, @message", current.read_text())
    assert message and "@requested" not in _message_of(current)  # names no other user
    assert "@requested_sid <> USER_SID()" in current.read_text()  # by SID (revision 0008)


def _message_of(path: Path) -> str:
    body = list(_walk(procedure_body(path)))
    at = next(i for i, s in enumerate(body) if s.text.startswith("THROW 50070"))
    return body[at - 1].text
