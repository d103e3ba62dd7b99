"""What issue 10 asks of the T-SQL that a parser cannot see, checked without a server: Python
decides policy and T-SQL never restates it (point 20), one lock procedure with normalised names
(points 10, 11, 13), every verb guarded against a caller's transaction (15), progress messages
only on request (5), least privilege by module signing and the grants (17), the error numbers
(21), and what a fresh Python must not import (18)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import sqlheads_sql
from sqlserver_grants import Grant, parse_grant
from sqlserver_tsql import (
    ROOT,
    procedure_parameters,
    statements,
    strip_comments_and_strings,
    tokens,
)

from sqlheads import procedures, settings
from sqlheads.compute.embed import EmbedParams
from sqlheads.engine.heads import HeadParams
from sqlheads.errors import ERRORS, InvalidParameterError
from sqlheads.store import schema

CURRENT = sqlheads_sql.object_files()
BY_NAME = {sqlheads_sql.object_name(p)[1]: p for p in CURRENT}
PUBLIC = [p for p in CURRENT if p.parent.name == "procedures"]


def code(path: Path) -> str:
    """The file without comments (string literals kept)."""
    return re.sub(r"--[^\n]*", "", path.read_text())


# -- point 20: one source of truth ------------------------------------------------------------


def python_constants() -> tuple[set[str], set[str], set[float]]:
    """(strings, integers as written, floats) that Python decides."""
    strings = {settings.DEFAULT_ENCODER, settings.REASON_BY_HAND, settings.REASON_ROLL_BACK}
    strings |= set(settings.DEPLOY_POLICIES) | {
        settings.deploy_reason(p) for p in settings.DEPLOY_POLICIES
    }
    integers: set[str] = set()
    for setting in settings.SETTINGS.values():
        strings |= set(setting.choices)
        for value in (setting.default, setting.minimum, setting.maximum):
            if isinstance(value, str):
                strings.add(value)
            elif isinstance(value, int) and value > 1:
                integers.add(str(value))
    head = HeadParams()
    integers |= {str(head.epochs)}
    floats = {head.lr, head.weight_decay, head.dropout, 0.2}
    return {s.lower() for s in strings}, integers, floats


def duplicated_literals(sql: str) -> list[str]:
    """Literals of ``sql`` that restate a Python constant."""
    strings, integers, floats = python_constants()
    text = re.sub(r"--[^\n]*", "", sql)
    found = [
        f"'{m}'"
        for m in re.findall(r"N?'((?:[^']|'')*)'", text)
        if m.replace("''", "'").strip().lower() in strings
    ]
    bare = strip_comments_and_strings(sql)
    bare = re.sub(r"\b\w+\s*\(\s*\d+(\s*,\s*\d+)?\s*\)", "", bare)  # nvarchar(450), decimal(18, 1)
    bare = re.sub(r"\bTHROW\s+\d+", "", bare)
    for number in re.findall(r"(?<![\w.])(\d+(?:\.\d+)?(?:[eE]-?\d+)?)(?![\w.])", bare):
        is_float = "." in number or "e" in number.lower()
        if (is_float and float(number) in floats) or (not is_float and number in integers):
            found.append(number)
    return found


@pytest.mark.parametrize("path", CURRENT, ids=lambda p: str(p.relative_to(ROOT / "sql")))
def test_no_tsql_literal_restates_a_python_constant(path: Path) -> None:
    assert duplicated_literals(path.read_text()) == [], (
        f"{path.name} restates Python's policy: read it from heads.settings (heads.setting, "
        "heads.setting_int), or let Python apply its default (pass NULL)"
    )


def test_the_duplicate_check_finds_the_drift_it_was_written_for() -> None:
    """Revision 0002's texts restated the policy (and drifted): the check must see it."""
    old = ROOT / "sql" / "0002" / "procedures"
    assert "'if-better'" in duplicated_literals((old / "train.sql").read_text())
    assert "600000" in duplicated_literals((old / "deploy.sql").read_text())
    assert "'all-MiniLM-L6-v2-int8'" in duplicated_literals((old / "embed.sql").read_text())
    assert "'rollback'" not in duplicated_literals((old / "roll_back.sql").read_text())  # drifted


def test_settings_rows_are_python_settings() -> None:
    batch = sqlheads_sql.settings_batch(settings.SETTINGS)
    for name, setting in settings.SETTINGS.items():
        assert f"N'{name}'" in batch
        if setting.default is not None:
            assert f"N'{setting.default}'" in batch
    read = set(re.findall(r"@name = N'([\w.]+)'", "".join(p.read_text() for p in CURRENT)))
    assert read <= set(settings.SETTINGS), read - set(settings.SETTINGS)
    assert {"reason.by_hand", "reason.roll_back", "encoder", "long_text"} <= read


def test_choices_have_one_canonical_spelling() -> None:
    assert settings.choice("long_text", " WINDOW ") == "window"
    assert settings.choice("deploy", "If-Better") == "if-better"
    assert settings.choice("long_text", None) == settings.SETTINGS["long_text"].default
    with pytest.raises(InvalidParameterError, match="sometimes") as refused:
        settings.choice("deploy", "sometimes")
    assert refused.value.number == 50012
    assert EmbedParams().batch_rows == 1000  # a bounded setting's default, and its bounds
    with pytest.raises(InvalidParameterError, match="batch_size") as out_of_range:
        EmbedParams(batch_size=0)
    assert out_of_range.value.number == 50012
    # T-SQL canonicalises in heads.setting, against the same choices, lower-cased both sides.
    setting = code(BY_NAME["heads.setting"])
    assert (
        "LOWER(c.value) = LOWER(TRIM(@value))" in setting and "SET @value = @canonical" in setting
    )


# -- points 10, 11, 13: locks ---------------------------------------------------------------


def lock_resource(kind: str, name: str) -> str:
    """Evaluate heads.lock_resource()'s RETURN expression as T-SQL would."""
    body = code(BY_NAME["heads.lock_resource"])
    expression = re.search(r"RETURN\s+CONCAT\((.*)\);", body).group(1)
    parts = []
    for token in re.findall(r"N'[^']*'|LOWER\(@\w+\)|UPPER\(@\w+\)|@\w+", expression):
        values = {"@kind": kind, "@name": name}
        if token.startswith("N'"):
            parts.append(token[2:-1])
        elif token.startswith("LOWER("):
            parts.append(values[token[6:-1]].lower())
        elif token.startswith("UPPER("):
            parts.append(values[token[6:-1]].upper())
        else:
            parts.append(values[token])
    return "".join(parts)


def test_lock_names_are_normalised() -> None:
    assert lock_resource("head", "Reviews") == lock_resource("head", "reviews")
    assert lock_resource("head", "reviews") != lock_resource("set", "reviews")
    assert len(lock_resource("head.use", "x" * 128)) <= 255  # sp_getapplock's limit


def test_only_take_lock_takes_locks() -> None:
    for path in CURRENT:
        text = code(path)
        name = sqlheads_sql.object_name(path)[1]
        if "sp_getapplock" in text:
            assert name == "heads.take_lock", name
        if "sp_releaseapplock" in text:
            assert name == "heads.release_lock", name
    release = code(BY_NAME["heads.release_lock"])
    assert "WHILE APPLOCK_MODE(" in release  # every count this session holds
    take = code(BY_NAME["heads.take_lock"])
    assert take.index("EXEC heads.release_lock") < take.index("sp_getapplock")
    assert "THROW 50016" in take


LOCKS = {
    # procedure: {(kind, name parameter, mode, owner)}
    "embed": {("embed", "set", "Exclusive", "Session"), ("set", "set", "Shared", "Session")},
    # train and distill take head:<name> in heads.write_version's short transaction
    "train": {("set", "set", "Shared", "Session")},
    "distill": {("set", "set", "Shared", "Session")},
    "predict": {("head.use", "head", "Shared", "Session"), ("set", "set", "Shared", "Session")},
    "deploy": {("head", "head", "Exclusive", "Transaction")},
    "roll_back": {("head", "head", "Exclusive", "Transaction")},
    "drop_head": {
        ("head", "head", "Exclusive", "Transaction"),
        ("head.use", "head", "Exclusive", "Transaction"),
    },
    "drop_set": {("set", "set", "Exclusive", "Session")},
    # The sidecar's requests lock nothing: a request only inserts rows into heads.job_queue,
    # and a cancel decides under the job row's UPDLOCK.
    "request_embed": set(),
    "request_teacher": set(),
    "cancel_job": set(),
}


@pytest.mark.parametrize("path", PUBLIC, ids=lambda p: p.stem)
def test_verbs_take_the_documented_locks_and_release_them(path: Path) -> None:
    if path.stem in ("train", "distill"):  # the head's lock: heads.write_version, below
        assert "EXEC heads.write_version" in code(path)
    text = code(path)
    taken = set(
        re.findall(
            r"EXEC heads\.take_lock\s+@kind = N'([\w.]+)', @name = @(\w+), @mode = N'(\w+)', "
            r"@owner = N'(\w+)'",
            text,
        )
    )
    assert taken == LOCKS[path.stem]
    catch = text[text.index("BEGIN CATCH") :]
    for kind, name, _, owner in taken:
        if owner == "Session":  # released on success and in CATCH
            release = f"EXEC heads.release_lock @kind = N'{kind}', @name = @{name};"
            assert text.count(release) >= 2 and release in catch, (path.stem, kind)


def test_write_version_takes_the_heads_lock_in_its_transaction() -> None:
    text = code(BY_NAME["heads.write_version"])
    lock = text.index(
        "@kind = N'head', @name = @head, @mode = N'Exclusive', @owner = N'Transaction'"
    )
    assert text.index("BEGIN TRANSACTION") < lock < text.index("COMMIT TRANSACTION")


# -- points 5 and 15: progress and transactions -----------------------------------------------


@pytest.mark.parametrize("path", PUBLIC, ids=lambda p: p.stem)
def test_verbs_guard_against_a_callers_transaction(path: Path) -> None:
    text = code(path)
    body = text[text.index("\nAS\nBEGIN") :]
    guard = body.index("SET IMPLICIT_TRANSACTIONS OFF;")
    check = body.index(f"EXEC heads.assert_no_transaction @procedure = N'heads.{path.stem}';")
    first_work = min(
        body.index(w) for w in ("BEGIN TRY", "BEGIN TRANSACTION", "DECLARE") if w in body
    )
    assert guard < check < first_work


def test_progress_messages_only_when_asked() -> None:
    for path in CURRENT:
        text = code(path)
        if "RAISERROR" in text:
            assert path.stem == "report_progress", path
        if "EXEC heads.report_progress" in text:
            parameters = {p.name: p.default for p in procedure_parameters(path)}
            assert parameters.get("progress") == "1", path  # on by default, for SSMS
            calls = re.findall(r"EXEC heads\.report_progress(.*?);", text, re.S)
            assert all("@progress = @progress" in call for call in calls), path
    assert "IF COALESCE(@progress, 0) = 0 RETURN;" in code(BY_NAME["heads.report_progress"])


# -- point 17: least privilege ----------------------------------------------------------------


def grants() -> dict[str, set[Grant]]:
    """``{grantee: {Grant}}`` from the current role files and the signer, read as GRANT
    statements (tests/sqlserver_grants.py reads them; a column grant is a Grant per column)."""
    found: dict[str, set[Grant]] = {}
    for path in CURRENT:
        for batch in sqlheads_sql.batches(path):
            for statement in _walk(statements(tokens(batch))):
                if statement.kind == "GRANT":
                    grantee, permissions = parse_grant(statement.text)
                    found.setdefault(grantee, set()).update(permissions)
    return found


def _walk(body):
    for statement in body:
        yield statement
        yield from _walk(statement.body + statement.orelse + statement.catch)


def executable(role: str) -> set[str]:
    return {g.target for g in grants().get(role, set()) if g.permission == "EXECUTE"}


def test_only_the_certificate_user_may_run_external_scripts() -> None:
    holders = {
        grantee
        for grantee, held in grants().items()
        if any(g.permission == "EXECUTE ANY EXTERNAL SCRIPT" for g in held)
    }
    assert holders == {"heads_external_script"}


# The internal procedures a role may run (revision 0008): the sidecar's job transitions and
# its writes, each scoped to the job it holds (they name @worker: heads.assert_job_held or the
# transition's own WHERE claimed_by = @worker), and heads_admin's, which record their caller
# as author or requester (USER_SID()) or take no job (heads.assert_job_held with @job_id NULL).
SCOPED = {
    "heads_sidecar": {
        "heads.claim_job",
        "heads.heartbeat_job",
        "heads.finish_job",
        "heads.fail_job",
        "heads.release_job",
        "heads.job_set",
        "heads.write_embeddings",
        "heads.write_transfer_rows",
        "heads.add_version",
        "heads.store_soft_labels",
    },
    "heads_admin": {
        "heads.add_version",
        "heads.store_soft_labels",
        "heads.write_transfer_rows",
        "heads.store_set",
        "heads.enqueue_job",
    },
}


def test_roles_get_the_doors_and_nothing_behind_them() -> None:
    found = grants()
    public = {f"heads.{p.stem}" for p in PUBLIC}
    internal = {n for n, p in BY_NAME.items() if p.parent.name == "internal"}
    for role in found:
        doors = executable(role) - SCOPED.get(role, set())
        assert doors <= public and not doors & internal, role
        assert SCOPED.get(role, set()) <= executable(role), role
    for procedure in set().union(*SCOPED.values()):
        text = code(BY_NAME[procedure])
        assert "@worker nvarchar(200)" in text or "USER_SID()" in text, procedure
    assert executable("heads_analyst") == public - {"heads.drop_head", "heads.drop_set"}
    assert all(g.permission == "SELECT" for g in found["heads_reader"])
    readable = {g.target for g in found["heads_reader"]}
    views = {n for n, p in BY_NAME.items() if p.parent.name == "views"}
    # and the schema revision, which every `sqlheads` command reads first (revision 0008)
    assert readable == views | {"heads.alembic_version"}
    # Analysts read the sets through heads.sets, never the table holding others' query texts.
    assert not any(
        "embedding_sets" in g.target for g in found["heads_analyst"] | found["heads_reader"]
    )


def test_signed_modules_run_only_fixed_python() -> None:
    """What the certificate signs (modules that EXEC sp_execute_external_script) runs no
    dynamic SQL, so a caller's text never gains the certificate's permission."""
    signed = [p for p in CURRENT if "EXEC sys.sp_execute_external_script" in p.read_text()]
    assert {p.stem for p in signed} == {
        "embed_batch",
        "train_run",
        "predict_batch",
        "decide_run",
        "distill_run",
        "soft_labels_run",
        "teach_run",
    }
    for path in signed:
        bare = strip_comments_and_strings(path.read_text())
        assert "sp_executesql" not in bare and not re.search(r"EXEC(UTE)?\s*\(", bare), path
    stage = code(BY_NAME["heads.stage_query"])
    assert "sp_execute_external_script" not in stage  # unsigned: caller's permissions only
    signer = code(BY_NAME["heads.sign_external_scripts"])
    for needed in ("REMOVE PRIVATE KEY", "NEWID()", "ADD SIGNATURE TO", "m.object_id <> @@PROCID"):
        assert needed in signer, needed


def test_migrations_sign_after_every_change() -> None:
    head = sqlheads_sql.revisions()[-1]
    up = sqlheads_sql.upgrade_batches(head, settings.SETTINGS)
    assert up[-1] == f"EXEC {sqlheads_sql.SIGNER}"
    down = sqlheads_sql.downgrade_batches("0003", settings.SETTINGS)
    assert down[0] == f"EXEC {sqlheads_sql.SIGNER} @remove = 1"


# -- point 21 and 18 --------------------------------------------------------------------------


def test_error_numbers_are_distinct_and_ours() -> None:
    numbers = [e.number for e in ERRORS]
    assert len(numbers) == len(set(numbers))
    assert {50013, 50014, 50015, 50016, 50017} <= set(numbers)
    assert all(50000 <= n <= 50099 for n in numbers)


def test_a_fresh_python_imports_no_scikit_learn_or_torch() -> None:
    """Every batch of a procedure starts a new Python: importing the door must stay light."""
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, sqlheads.procedures; "
            "print(sorted(m for m in ('sklearn', 'torch', 'scipy', 'transformers') "
            "if m in sys.modules))",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# -- the sidecar (revisions 0005 to 0008) ------------------------------------------------------


def test_the_sidecar_reads_tables_and_writes_only_through_procedures() -> None:
    """No external script: the sidecar runs its own Python. Revision 0008 (the fourth audit):
    it holds SELECT alone on the tables it reads, no column grant (the UPDATE of job_queue's
    claim columns let it mark any job its own) and no INSERT, UPDATE or DELETE anywhere: every
    write is a procedure scoped to the job it holds. Which tables it reads is what its run
    needs, grant by grant (tests/test_sqlserver_grants.py), never a list copied here. Analysts
    request and cancel, and read the queue through the view, never the table."""
    sidecar = grants()["heads_sidecar"]
    assert {g.target for g in sidecar if g.permission == "EXECUTE"} == SCOPED["heads_sidecar"]
    tables = [g for g in sidecar if g.permission != "EXECUTE"]
    assert tables and all(g.permission == "SELECT" and g.column is None for g in tables)
    assert all(g.target.startswith("heads.") for g in tables)  # never the schema, nor dbo
    analyst = grants()["heads_analyst"]
    assert {"heads.request_embed", "heads.cancel_job"} <= executable("heads_analyst")
    assert not any("job_queue" in g.target for g in analyst | grants()["heads_reader"])
    assert Grant("SELECT", "heads.jobs") in grants()["heads_reader"]


def test_heads_admin_writes_no_column_that_decides_who_a_query_runs_as() -> None:
    """Finding 4 of the fourth audit: heads_admin inserts and updates the tables of the schema
    but heads.embedding_sets (a set's source query and its author) and heads.job_queue (a
    job's requester and parameters, which an embed job records as a set's source and author),
    which procedures alone write; of the sets it may update the owner alone. A table added
    later is decided here too: either admin writes it, or the list below says why not."""
    admin = grants()["heads_admin"]
    written = {g.target.removeprefix("heads.") for g in admin if g.permission in ("INSERT",)}
    assert written == {t.name for t in schema.metadata.sorted_tables} - {
        "embedding_sets",
        "job_queue",
        "bit_values",  # two constant rows, made by migration 0007
    }
    assert {g.column for g in admin if g.target == "heads.embedding_sets" and g.column} == {
        "owner_sid",
        "owner_user",
    }
    assert not any(g.target == "heads.job_queue" and g.permission != "SELECT" for g in admin)
    assert Grant("SELECT", "SCHEMA::heads") in admin and Grant("DELETE", "SCHEMA::heads") in admin


@pytest.mark.parametrize("name", ["request_embed", "request_teacher"])
def test_job_parameters_are_json_built_by_sql_server(name: str) -> None:
    """parameters_json comes from FOR JSON (and JSON_MODIFY), never from pasted strings."""
    text = code(BY_NAME[f"heads.{name}"])
    assignments = re.findall(r"SET @parameters = (.*?);\n", text, re.S)
    assert assignments
    for assignment in assignments:
        assert "FOR JSON PATH" in assignment or assignment.startswith("JSON_MODIFY("), assignment
        assert "CONCAT" not in assignment and "+" not in assignment


def test_claims_read_past_locked_rows_and_cancels_lock_the_row() -> None:
    """READPAST under READ_COMMITTED_SNAPSHOT (which docker/migrate.py turns on): Microsoft's
    table-hints page allows it at READ COMMITTED only beside READCOMMITTEDLOCK (finding 6)."""
    claim = code(BY_NAME["heads.claim_job"])
    assert "FROM heads.job_queue AS q WITH (UPDLOCK, READPAST, ROWLOCK, READCOMMITTEDLOCK)" in claim
    assert "FROM heads.job_queue AS q WITH (UPDLOCK, ROWLOCK)" in code(BY_NAME["heads.cancel_job"])


def test_heads_distill_refuses_the_encoder_student_which_belongs_to_the_sidecar() -> None:
    """Fine-tuning a transformer inside SQL Server's external-script runtime would take the
    server's CPUs for minutes: the call comes back as a numbered refusal naming the sidecar."""
    frame = pd.DataFrame({"item_key": ["a"], "label": ["x"], "logits": [b""], "text": ["t"]})
    _, number, message = procedures.sql_server_call("distill", frame, student="encoder")
    assert number == InvalidParameterError.number
    assert "heads.request_teacher" in message
