"""The deployment itself, checked without Docker or a server (issue 10, points 1, 3, 6, 8, 9):
the image runs launchpadd beside sqlservr, applies mssql.conf settings at start (not at build),
pins its Python runtime with torch CPU-only, and the supported Python/SQLAlchemy/driver
combinations are explicit, tested, and refused clearly where they cannot work."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import namedtuple
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from sqlheads.errors import InvalidParameterError
from sqlheads.store import drivers, server_checks

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"
DOCKERFILE = (DOCKER / "mssql" / "Dockerfile").read_text()
START = (DOCKER / "mssql" / "start.sh").read_text()
SUPERVISOR = (DOCKER / "mssql" / "supervisord.conf").read_text()
CONSTRAINTS = (DOCKER / "mssql" / "runtime-constraints.txt").read_text()


def instructions(dockerfile: str) -> list[str]:
    """Dockerfile instructions with continuation lines joined and comments dropped."""
    joined = re.sub(
        r"\\\n",
        " ",
        "\n".join(line for line in dockerfile.splitlines() if not line.lstrip().startswith("#")),
    )
    return [line.strip() for line in joined.splitlines() if line.strip()]


# -- point 1: the image starts the launchpad ---------------------------------------------------


def test_base_image_is_a_pinned_ubuntu_22_04_tag() -> None:
    tag = re.search(r"^ARG MSSQL_TAG=(\S+)", DOCKERFILE, re.M).group(1)
    assert "latest" not in tag and re.fullmatch(r"2022-CU\d+-ubuntu-22\.04", tag), tag
    assert "FROM mcr.microsoft.com/mssql/server:${MSSQL_TAG}" in DOCKERFILE


def test_image_runs_sqlservr_and_launchpadd() -> None:
    programs = dict(re.findall(r"^\[program:(\w+)\]\n(?:.*\n)*?command=(.*)$", SUPERVISOR, re.M))
    assert programs["sqlservr"] == "/opt/mssql/bin/sqlservr"
    assert programs["launchpadd"].startswith("/opt/mssql/bin/launchpadd")
    assert "user=mssql" in SUPERVISOR.split("[program:launchpadd]")[0]  # sqlservr as mssql
    assert 'CMD ["/src/docker/mssql/start.sh"]' in DOCKERFILE
    assert START.rstrip().endswith("/src/docker/mssql/supervisord.conf")
    run = " ".join(i for i in instructions(DOCKERFILE) if i.startswith("RUN"))
    for needed in (
        "libpython3.10",
        "mssql-server-extensibility",
        "supervisor",
        "/var/opt/mssql-extensibility",
    ):
        assert needed in run, needed


# -- points 3 and 9: settings at start, the cache the sandbox may write ------------------------


def test_mssql_conf_is_set_at_start_not_in_the_image() -> None:
    """mssql.conf lives in /var/opt/mssql, the data volume: a setting made at build time never
    reaches a volume that already exists."""
    assert "mssql-conf" not in " ".join(instructions(DOCKERFILE))
    for setting in (
        "set EULA accepteulaml Y",
        "set extensibility pythonbinpath /usr/bin/python3.10",
        "set extensibility datadirectories",
    ):
        assert setting in START, setting
    assert "mssql_satellite" in START and "chmod -R 2775" in START


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash here to check start.sh")
def test_start_script_is_valid_bash() -> None:
    result = subprocess.run(["bash", "-n", str(DOCKER / "mssql" / "start.sh")], capture_output=True)
    assert result.returncode == 0, result.stderr


# -- point 8: the server's Python runtime ------------------------------------------------------


def test_runtime_is_pinned_and_torch_is_cpu_only() -> None:
    pins = {}
    for line in CONSTRAINTS.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            requirement = Requirement(line)
            specifiers = list(requirement.specifier)
            assert len(specifiers) == 1 and specifiers[0].operator == "==", line
            pins[requirement.name.lower()] = specifiers[0].version
    assert pins["torch"].endswith("+cpu")  # only the CPU index has it: no CUDA from PyPI
    assert pins["numpy"] == "1.22.0"  # Microsoft's install page pins it for revoscalepy
    for package in ("pandas", "onnxruntime", "scikit-learn", "sqlalchemy", "pyodbc"):
        assert package in pins, package
    # One pip run: --target does not see what an earlier run installed, so a second run would
    # resolve torch again, from PyPI.
    pip_runs = [i for i in instructions(DOCKERFILE) if "pip install" in i]
    assert len(pip_runs) == 1
    assert "--constraint /src/docker/mssql/runtime-constraints.txt" in pip_runs[0]
    assert "download.pytorch.org/whl/cpu" in pip_runs[0]
    assert "torch.version.cuda is None" in pip_runs[0]


# -- point 6: supported combinations -----------------------------------------------------------


def extra(name: str) -> list[Requirement]:
    """An optional-dependency list of pyproject.toml (read without tomllib: Python 3.10 too)."""
    text = (ROOT / "pyproject.toml").read_text()
    block = re.search(rf"^{name} = \[(.*?)^\]", text, re.M | re.S).group(1)
    return [Requirement(r) for r in re.findall(r'^\s*"([^"]+)",', block, re.M)]


@pytest.mark.parametrize(
    ("python", "expected"),
    [("3.10", {"pyodbc"}), ("3.11", {"pyodbc", "mssql-python", "sqlalchemy"})],
)
def test_mssql_extra_per_python(python: str, expected: set[str]) -> None:
    environment = {"python_version": python, "python_full_version": f"{python}.0"}
    chosen = {r.name for r in extra("mssql") if r.marker is None or r.marker.evaluate(environment)}
    assert chosen == expected
    if python == "3.11":
        sqlalchemy = next(r for r in extra("mssql") if r.name == "sqlalchemy")
        assert sqlalchemy.specifier.contains("2.1.0")
        assert not sqlalchemy.specifier.contains("2.0.99")


def test_compose_migrate_uses_the_driver_its_python_has() -> None:
    compose = (DOCKER / "compose.yaml").read_text()
    assert 'entrypoint: ["python3.10"' in compose
    urls = re.findall(
        r"SQLHEADS_MSSQL(?:_MASTER)?_URL: \"([^\"]+)\"", compose.split("services:")[0]
    )
    assert urls and all(u.startswith("mssql+pyodbc://") and "ODBC+Driver+18" in u for u in urls)


def test_mssqlpython_url_on_sqlalchemy_2_0_is_refused_with_the_fix(monkeypatch) -> None:
    drivers.check_mssql_url("mssql+mssqlpython://u:p@h/d")  # this SQLAlchemy has it
    drivers.check_mssql_url("mssql+pyodbc://u:p@h/d?driver=ODBC+Driver+18+for+SQL+Server")

    def missing(name: str):
        from sqlalchemy.exc import NoSuchModuleError

        raise NoSuchModuleError(f"Can't load plugin: sqlalchemy.dialects:{name}")

    monkeypatch.setattr(drivers.registry, "load", missing)
    with pytest.raises(InvalidParameterError) as refused:
        drivers.check_mssql_url("mssql+mssqlpython://u:p@h/d")
    assert refused.value.number == 50012
    assert "mssql+pyodbc://" in refused.value.message and "3.11" in refused.value.message


# -- first deployment: the database's level, and what the smoke script says (issue 36) ---------


def test_a_database_below_level_160_is_refused_with_the_fix_before_anything_is_made() -> None:
    assert server_checks.compatibility_refusal("sales", 160, 16) is None
    refused = server_checks.compatibility_refusal("sales]x", 150, 16)
    assert refused.number == 50075
    assert "ALTER DATABASE [sales]]x] SET COMPATIBILITY_LEVEL = 160;" in refused.message
    assert "nothing was created" in refused.message
    older = server_checks.compatibility_refusal("sales", 150, 15)
    assert "SQL Server 2022 or later" in older.message
    # The check's query, as the driver sends it, parses under Microsoft's grammar; Alembic's
    # online runs (sqlheads init) make it before anything else, offline scripts start with
    # the same check.
    env = (ROOT / "migrations" / "env.py").read_text()
    assert env.index("check_compatibility(connection)") < env.index(
        "connection.exec_driver_sql(CREATE_SCHEMA)"
    )
    assert env.index("context.execute(COMPATIBILITY_GUARD)") < env.index(
        "context.execute(CREATE_SCHEMA)"
    )
    migrate = (DOCKER / "migrate.py").read_text()
    assert migrate.index("check_compatibility(connection, database)") < migrate.index(
        'ROOT / "setup.sql"'
    )


def test_the_compatibility_checks_parse_under_microsofts_grammar(tmp_path) -> None:
    exe = shutil.which("maxdop")
    assert exe, "maxdop is not installed: pip install maxdop (it is in the test extra)"
    script = tmp_path / "check.sql"
    script.write_text(
        "DECLARE @database sysname = NULL;\n"
        + server_checks.LEVEL.text.replace(":database", "@database")
        + ";\nGO\n"
        + server_checks.COMPATIBILITY_GUARD
        + ";\n"
    )
    result = subprocess.run(
        [exe, "--parser-version", "2022", str(script)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr


Answer = namedtuple("Answer", "question found")
SIGNED = [
    Answer("signed module heads.embed_batch", "heads_external_script"),
    Answer("database permission of heads_external_script", "EXECUTE ANY EXTERNAL SCRIPT"),
    Answer("cache folder /var/opt/mssql/sqlheads/cache", "writable"),
    Answer(server_checks.SIGNED_PYTHON, "ran: 2 vectors, long_text window"),
    Answer(server_checks.OWN_PYTHON, "refused, as it should be: 297"),
    Answer("request -> sidecar -> predict as a heads_analyst", "skipped: no login ..."),
]


def _answers(**changed: str) -> list:
    return [Answer(a.question, changed.get(a.question, a.found)) for a in SIGNED]


def test_a_signature_that_does_not_reach_the_external_script_is_reported_with_the_fix() -> None:
    """Finding 8 of the fourth audit: whether the certificate's permission reaches
    sys.sp_execute_external_script only a server can say (docker/smoke.sql, section 5); what
    migrate.py makes of each answer is decided here."""
    assert server_checks.smoke_problems(SIGNED) == []
    refused = "FAILED: 297 The user does not have permission to perform this action."
    (problem,) = server_checks.smoke_problems(_answers(**{server_checks.SIGNED_PYTHON: refused}))
    assert refused in problem and server_checks.SIGNATURE_FIX in problem
    assert "GRANT EXECUTE ANY EXTERNAL SCRIPT TO heads_external_python;" in problem
    unsigned = [a for a in _answers(**{server_checks.SIGNED_PYTHON: refused})
                if not a.question.startswith("signed module")]  # fmt: skip
    (problem,) = server_checks.smoke_problems(unsigned)
    assert "EXEC heads.sign_external_scripts;" in problem
    allowed = "ALLOWED: analysts can run any Python (not least privilege)"
    (problem,) = server_checks.smoke_problems(_answers(**{server_checks.OWN_PYTHON: allowed}))
    assert "revoke EXECUTE ANY EXTERNAL SCRIPT" in problem
    failed = "FAILED: 39004 A 'Python' script error occurred"
    (problem,) = server_checks.smoke_problems(_answers(**{"Python runs": failed}) + [
        Answer("Python runs", failed)
    ])  # fmt: skip
    assert problem == f"Python runs: {failed}"


def test_the_smoke_script_asks_what_migrate_reads() -> None:
    smoke = (DOCKER / "smoke.sql").read_text()
    for question in (server_checks.SIGNED_PYTHON, server_checks.OWN_PYTHON):
        assert f"N'{question}'" in smoke
    assert "EXEC heads.claim_job" in smoke and "@kinds = N'sqlheads_smoke_none'" in smoke
    assert "compatibility_level" in smoke
