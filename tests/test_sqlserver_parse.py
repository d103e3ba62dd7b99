"""Parse gates for the T-SQL surface: Microsoft's grammar (ScriptDom, through ``maxdop``) and
sqlfluff (tsql dialect, raw templater) over every file of sql/ that can still change (a released
revision's are frozen) and the offline migration script;
and a deliberately broken file that both gates must reject, so that a gate that cannot fail is
caught. Also the compose file, through the docker compose client where one is installed."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import sqlheads_sql

ROOT = Path(__file__).resolve().parents[1]
SQL_FILES = sqlheads_sql.all_files()
SMOKE = ROOT / "docker" / "smoke.sql"  # the script a DBA runs on a real server (README)
MSSQL_URL = "mssql+mssqlpython://user:password@server/database"


def maxdop(path: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("maxdop")
    if exe is None:
        pytest.fail("maxdop is not installed: pip install maxdop (it is in the test extra)")
    return subprocess.run(
        [exe, "--parser-version", "2022", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def sqlfluff_lint(*paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "sqlfluff",
            "lint",
            "--config",
            str(ROOT / ".sqlfluff"),
            *map(str, paths),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


@pytest.fixture(scope="module")
def offline_script(tmp_path_factory) -> Path:
    """``alembic upgrade head --sql`` for SQL Server, written to a file."""
    out = tmp_path_factory.mktemp("offline") / "upgrade.sql"
    result = subprocess.run(
        [sys.executable, "-m", "alembic", "-x", f"url={MSSQL_URL}", "upgrade", "head", "--sql"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    out.write_text(result.stdout, encoding="utf-8")
    return out


def test_every_object_file_is_listed() -> None:
    on_disk = {p for p in (ROOT / "sql").rglob("*.sql")}
    assert on_disk == set(SQL_FILES), "a .sql file is missing from sqlheads_sql's lists"


@pytest.mark.parametrize("path", [*SQL_FILES, SMOKE], ids=lambda p: str(p.relative_to(ROOT)))
def test_maxdop_parses(path: Path) -> None:
    result = maxdop(path)
    assert result.returncode == 0, result.stderr


def test_maxdop_parses_offline_migration(offline_script: Path) -> None:
    result = maxdop(offline_script)
    assert result.returncode == 0, result.stderr


def test_offline_migration_is_reviewable(offline_script: Path) -> None:
    text = offline_script.read_text()
    assert "VARBINARY(max)" in text and "NVARCHAR(max)" in text
    tables = re.findall(r"CREATE TABLE heads\.\w+ \((.*?)\n\);", text, re.S)
    assert len(tables) >= 8
    column_types = [t for body in tables for t in re.findall(r"^\s+\w+ (\w+)", body, re.M)]
    assert not {"IMAGE", "NTEXT", "TEXT"} & {t.upper() for t in column_types}
    assert "CONSTRAINT pk_models PRIMARY KEY" in text  # named constraints
    # The schema exists before Alembic's version table is created in it.
    assert text.index("CREATE SCHEMA heads") < text.index("CREATE TABLE heads.alembic_version")
    for path in sqlheads_sql.object_files():
        kind, name = sqlheads_sql.object_name(path)
        if kind != "role":
            assert f"CREATE OR ALTER {kind.upper()} {name}" in text, name
        else:
            assert f"CREATE ROLE {name}" in text


def test_offline_downgrade_parses(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "alembic",
            "-x",
            f"url={MSSQL_URL}",
            "downgrade",
            "0002:0001",
            "--sql",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    script = tmp_path / "downgrade.sql"
    script.write_text(result.stdout)
    assert "DROP PROCEDURE IF EXISTS heads.embed" in result.stdout
    assert "DROP ROLE heads_reader" in result.stdout
    assert maxdop(script).returncode == 0


def test_sqlfluff_lints_every_file_that_can_still_change() -> None:
    # A released revision's files were linted before its release, and
    # test_released_revisions_are_frozen keeps them byte for byte: linting them again (half a
    # minute of the suite) could fail only on another sqlfluff, and constraints.txt pins it.
    released = {r for r in sqlheads_sql.revisions() if (ROOT / "sql" / r / "SHA256SUMS").is_file()}
    changing = [p for p in SQL_FILES if p.relative_to(ROOT / "sql").parts[0] not in released]
    result = sqlfluff_lint(*changing, SMOKE)
    assert result.returncode == 0, result.stdout[-4000:]


@pytest.fixture
def broken_file(tmp_path: Path) -> Path:
    """heads.embed with one statement broken (a missing closing parenthesis)."""
    text = (ROOT / "sql" / "0002" / "procedures" / "embed.sql").read_text()
    broken = text.replace(
        "SELECT @total = COUNT_BIG(*) FROM", "SELECT @total = COUNT_BIG(* FROM", 1
    )
    assert broken != text
    path = tmp_path / "broken.sql"
    path.write_text(broken)
    return path


def test_maxdop_rejects_a_broken_file(broken_file: Path) -> None:
    result = maxdop(broken_file)
    assert result.returncode != 0
    assert "syntax" in (result.stderr + result.stdout).lower()


def test_sqlfluff_rejects_a_broken_file(broken_file: Path) -> None:
    result = sqlfluff_lint(broken_file)
    assert result.returncode != 0
    assert "PRS" in result.stdout or "unparsable" in result.stdout.lower()


def _compose() -> list[str] | None:
    docker = shutil.which("docker")
    if (
        docker
        and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0
    ):
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    if legacy and subprocess.run([legacy, "version"], capture_output=True).returncode == 0:
        return [legacy]
    return None


def test_compose_file_is_valid(tmp_path: Path) -> None:
    compose = _compose()
    if compose is None:
        pytest.skip(
            "no docker compose client here (neither `docker compose` nor `docker-compose`): "
            "apt-get install docker-compose"
        )
    result = subprocess.run(
        [*compose, "-f", str(ROOT / "docker" / "compose.yaml"), "config"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(tmp_path)},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    for service in ("mssql", "migrate", "sidecar"):
        assert f"{service}:" in result.stdout


def _compose_services() -> dict:
    import yaml

    return yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())["services"]


def test_compose_sidecar_gets_one_gpu_its_own_login_and_a_healthcheck() -> None:
    sidecar = _compose_services()["sidecar"]
    assert sidecar["build"]["dockerfile"] == "docker/sidecar/Dockerfile"
    assert (ROOT / sidecar["build"]["dockerfile"]).is_file()
    devices = sidecar["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}]
    url = sidecar["environment"]["SQLHEADS_URL"]  # the variable every sqlheads command reads
    login = re.match(r"mssql\+\w+://([^:]+):(\$\{SIDECAR_PASSWORD[^}]*\})@mssql/sqlheads", url)
    assert login, url
    assert login.group(1) == "heads_sidecar_login" and login.group(1) != "sa"
    assert "MSSQL_SA_PASSWORD" not in str(sidecar)
    test = sidecar["healthcheck"]["test"]
    assert test[:4] == ["CMD", "python", "-m", "sqlheads.healthcheck"] and "cuda" in test
    assert sidecar["command"] == ["--device", "cuda"]  # never a silent CPU fallback
    assert any(v.endswith(":/cache") for v in sidecar["volumes"])
    assert sidecar["profiles"] == ["sidecar"]
    assert sidecar["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


def test_compose_migrate_receives_the_sidecar_password_to_create_its_login() -> None:
    migrate = _compose_services()["migrate"]
    assert migrate["environment"]["SIDECAR_PASSWORD"].startswith("${SIDECAR_PASSWORD")
