"""The sidecar's image and healthcheck: what docker/sidecar/Dockerfile promises, checked without
docker; the healthcheck run for real against SQLite files (healthy, uninitialised, GPU absent)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from sqlheads import host
from sqlheads.healthcheck import main as healthcheck
from sqlheads.store import migrations
from sqlheads.store.repository import Store

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = (ROOT / "docker" / "sidecar" / "Dockerfile").read_text()


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE)
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "")
        for line in lines
        if line and not line.startswith("#")
    ]


def test_the_image_is_pytorchs_cuda_12_runtime_pinned_to_a_tag() -> None:
    args = dict(i[1].split("=", 1) for i in _instructions() if i[0] == "ARG" and "=" in i[1])
    (base,) = [a for i, a in _instructions() if i == "FROM"]
    assert base == "pytorch/pytorch:${PYTORCH_TAG}"
    assert re.fullmatch(r"\d+\.\d+\.\d+-cuda12\.\d+-cudnn\d+-runtime", args["PYTORCH_TAG"])


def test_sqlheads_installs_with_the_sidecar_extra_and_torch_held_at_the_images() -> None:
    run = " ".join(a for i, a in _instructions() if i == "RUN")
    assert '"/src[sidecar]"' in run and "--constraint /tmp/torch-pin.txt" in run
    assert "torch.version.cuda" in run  # the build fails if a CPU torch slipped in
    block = re.search(r"^sidecar = \[(.*?)^\]", (ROOT / "pyproject.toml").read_text(), re.M | re.S)
    sidecar = re.findall(r'"([^"]+)"', block.group(1))
    assert any(r.startswith("mssql-python") for r in sidecar)
    assert not any(re.match(r"torch\b", r) for r in sidecar)  # never a second torch


def test_every_package_of_sqlheads_is_listed_for_the_images_non_editable_install() -> None:
    """The image installs /src without -e: a package missing from pyproject's list is left out
    of it and its imports fail only at run time."""
    block = re.search(r"^packages = \[(.*?)^\]", (ROOT / "pyproject.toml").read_text(), re.M | re.S)
    listed = re.findall(r'"([^"]+)"', block.group(1))
    found = {
        ".".join(init.parent.relative_to(ROOT / "python").parts)
        for init in (ROOT / "python" / "sqlheads").rglob("__init__.py")
    }
    assert found <= set(listed), sorted(found - set(listed))


def test_it_runs_as_a_user_of_its_own_with_the_sidecar_as_entrypoint() -> None:
    users = [a for i, a in _instructions() if i == "USER"]
    assert users and users[-1] not in ("root", "0")
    (entrypoint,) = [a for i, a in _instructions() if i == "ENTRYPOINT"]
    assert json.loads(entrypoint) == ["sqlheads", "sidecar"]
    env = " ".join(a for i, a in _instructions() if i == "ENV")
    assert "SQLHEADS_CACHE=/cache" in env and "HF_HUB_OFFLINE=1" in env


def _report(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_healthcheck_passes_on_an_initialised_database(tmp_path, capsys) -> None:
    url = f"sqlite:///{tmp_path / 'heads.db'}"
    host.init(Store.from_url(url))
    assert healthcheck(["--url", url, "--device", "cpu"]) == 0
    report = _report(capsys)
    assert report["healthy"] and report["device"] == "cpu" and report["jobs"] == 0


def test_healthcheck_fails_on_a_database_without_the_schema(tmp_path, capsys) -> None:
    assert healthcheck(["--url", f"sqlite:///{tmp_path / 'empty.db'}", "--device", "cpu"]) == 1
    report = _report(capsys)
    assert not report["healthy"] and report["number"] == 50014


def test_healthcheck_fails_on_a_database_another_version_left(tmp_path, capsys) -> None:
    url = f"sqlite:///{tmp_path / 'heads.db'}"
    store = Store.from_url(url)
    host.init(store)
    migrations.migrate(store, "0004", downgrade=True)
    assert healthcheck(["--url", url, "--device", "cpu"]) == 1
    report = _report(capsys)
    assert report["number"] == 50014 and "revision 0004" in report["error"]
    assert migrations.schema_state(store).current == "0004"  # a check, never an upgrade


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here")
def test_healthcheck_fails_when_the_gpu_is_absent(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'heads.db'}"
    host.init(Store.from_url(url))
    done = subprocess.run(
        [sys.executable, "-m", "sqlheads.healthcheck", "--device", "cuda"],
        capture_output=True,
        text=True,
        env={"SQLHEADS_URL": url, "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"},
        timeout=120,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["number"] == 50055 and "cuda" in report["error"]
