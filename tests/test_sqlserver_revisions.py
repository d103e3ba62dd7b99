"""T-SQL objects versioned per migration revision (issue 10, point 19), checked without a server:
every upgrade and downgrade step of the chain, offline with ``alembic ... --sql`` on the mssql
dialect, parses under Microsoft's grammar; replaying each step's batches leaves exactly the
objects :func:`sqlheads_sql.object_files` says stand at that revision; and a released
revision's texts never change (its ``SHA256SUMS``)."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sqlheads_sql

from sqlheads.settings import SETTINGS

ROOT = Path(__file__).resolve().parents[1]
MSSQL_URL = "mssql+mssqlpython://user:password@server/database"
REVISIONS = sqlheads_sql.revisions()
CHAIN = ["base", "0001", *REVISIONS]
STEPS = list(zip(CHAIN, CHAIN[1:], strict=False))


def alembic_sql(*arguments: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "alembic", "-x", f"url={MSSQL_URL}", *arguments, "--sql"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def maxdop_parses(tmp_path: Path, script: str) -> None:
    path = tmp_path / "step.sql"
    path.write_text(script, encoding="utf-8")
    exe = shutil.which("maxdop")
    assert exe, "maxdop is not installed: pip install maxdop (it is in the test extra)"
    result = subprocess.run(
        [exe, "--parser-version", "2022", str(path)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(("before", "after"), STEPS, ids=[f"{a}-{b}" for a, b in STEPS])
def test_each_step_upgrades_and_downgrades_offline(tmp_path: Path, before: str, after: str) -> None:
    """``upgrade before:after`` and ``downgrade after:before`` as scripts a DBA can review."""
    up = alembic_sql("upgrade", f"{before}:{after}" if before != "base" else after)
    assert f"UPDATE heads.alembic_version SET version_num='{after}'" in up or before == "base"
    maxdop_parses(tmp_path, up)
    down = alembic_sql("downgrade", f"{after}:{before}")
    maxdop_parses(tmp_path, down)


# -- replaying the batches --------------------------------------------------------------------

CREATE = re.compile(
    r"^CREATE OR ALTER (PROCEDURE|FUNCTION|VIEW) (heads\.\w+)|"
    r"^IF DATABASE_PRINCIPAL_ID\(N'(\w+)'\) IS NULL\s+CREATE ROLE",
    re.M,
)
DROP = re.compile(r"^DROP (PROCEDURE|FUNCTION|VIEW) IF EXISTS (heads\.\w+)$|DROP ROLE (\w+)$")


def replay(state: dict[str, str], batches: list[str]) -> None:
    """Apply batches to ``{object name: its batch text}`` as SQL Server would."""
    for batch in batches:
        created = CREATE.search(batch)
        if created:
            state[created.group(2) or created.group(3)] = batch
            continue
        dropped = DROP.search(batch.strip())
        if dropped:
            state.pop(dropped.group(2) or dropped.group(3), None)


def expected(revision: str) -> dict[str, str]:
    """The objects at ``revision``, as their files hold them."""
    state: dict[str, str] = {}
    for path in sqlheads_sql.object_files(revision):
        name = sqlheads_sql.object_name(path)[1]
        state[name] = next(b for b in sqlheads_sql.batches(path) if CREATE.search(b))
    return state


def upgrade(revision: str) -> list[str]:
    if sqlheads_sql.signs(revision):
        return sqlheads_sql.upgrade_batches(revision, SETTINGS)
    return sqlheads_sql.object_upgrade_batches(revision)


def downgrade(revision: str) -> list[str]:
    if sqlheads_sql.signs(revision):
        return sqlheads_sql.downgrade_batches(revision, SETTINGS)
    return sqlheads_sql.object_downgrade_batches(revision)


def test_replaying_the_chain_gives_each_revisions_objects() -> None:
    state: dict[str, str] = {}
    for revision in REVISIONS:  # up, one revision at a time
        replay(state, upgrade(revision))
        assert state == expected(revision), revision
    for revision, previous in zip(REVISIONS[::-1], REVISIONS[-2::-1], strict=False):  # down
        replay(state, downgrade(revision))
        assert state == expected(previous), f"{revision} -> {previous}"
    replay(state, downgrade(REVISIONS[0]))
    assert state == {}


def test_a_revision_restates_the_whole_grant_list_of_a_role() -> None:
    """Grants accumulate: a role file runs after all the role's permissions are revoked, so
    a permission a later revision leaves out (EXECUTE ANY EXTERNAL SCRIPT) is gone."""
    batches = sqlheads_sql.object_upgrade_batches("0003")
    role = next(i for i, b in enumerate(batches) if "CREATE ROLE heads_analyst" in b)
    assert "N'REVOKE '" in batches[role - 1] and "N'heads_analyst'" in batches[role - 1]
    assert "EXECUTE ANY EXTERNAL SCRIPT" not in re.sub(r"--[^\n]*", "", batches[role])


def test_released_revisions_are_frozen() -> None:
    """Editing a released revision's text changes what a server that ran it holds without the
    server ever running the edit: put the change in a new revision instead."""
    for revision in REVISIONS:
        sums = ROOT / "sql" / revision / "SHA256SUMS"
        assert sums.is_file(), f"sql/{revision}/SHA256SUMS is missing"
        recorded = dict(
            reversed(line.split(maxsplit=1)) for line in sums.read_text().splitlines() if line
        )
        actual = {
            str(p.relative_to(ROOT / "sql" / revision)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted((ROOT / "sql" / revision).rglob("*"))
            if p.is_file() and p.name != "SHA256SUMS"
        }
        assert actual == recorded, (
            f"sql/{revision}/ changed after its release: add a new revision (see sqlheads_sql) "
            "rather than editing this one"
        )
