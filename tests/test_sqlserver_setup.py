"""The deployment itself, checked without Docker or a server (issue 10, points 1, 3, 6, 8, 9):
the image runs launchpadd beside sqlservr, applies mssql.conf settings at start (not at build),
pins its Python runtime with torch CPU-only, and the supported Python/SQLAlchemy/driver
combinations are explicit, tested, and refused clearly where they cannot work."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from sqlheads.errors import InvalidParameterError
from sqlheads.store import drivers

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
