"""Shared fixtures: real weights, real Rotten Tomatoes rows, real SQLite files."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import func, select, update

# Weights come from site-packages; the hub is unreachable. Unless SQLHEADS_CACHE names a cache,
# each test session has a fresh one, shared by its xdist workers as by sidecars of several
# databases on one host (registered encoders, sidecar jobs' teachers: gigabytes by
# the end, removed with the session, CI's disk not being ours to fill), except for what is the
# same on every run: the catalogue's ONNX exports and the unpacked MPNet archive, kept where
# sqlheads keeps them on this machine (~/.cache/sqlheads), so that a second run exports nothing.
# The first use is checked once, on an empty cache of its own (tests/test_cli_progress.py).
os.environ["HF_HUB_OFFLINE"] = "1"
# Under pytest-xdist each worker's torch (and the processes it starts) gets its share of the cores:
# two workers with torch's default of one thread per core each would run four on two cores.
if "PYTEST_XDIST_WORKER_COUNT" in os.environ:
    share = len(os.sched_getaffinity(0)) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, share)))
OWN_CACHE = None if "SQLHEADS_CACHE" in os.environ else tempfile.mkdtemp(prefix="sqlheads-cache-")
if OWN_CACHE:
    os.environ["SQLHEADS_CACHE"] = OWN_CACHE
    for kept in ("exports", "models"):  # written atomically: sessions may share them
        (Path.home() / ".cache" / "sqlheads" / kept).mkdir(parents=True, exist_ok=True)
        (Path(OWN_CACHE) / kept).symlink_to(Path.home() / ".cache" / "sqlheads" / kept)

from sqlheads import datasets, host  # noqa: E402
from sqlheads.engine import kinds  # noqa: E402
from sqlheads.engine.students.distillation import DistillParams  # noqa: E402
from sqlheads.store.repository import Store  # noqa: E402
from sqlheads.store.schema import job_queue  # noqa: E402
from sqlheads.store.vectors import unpack_rows  # noqa: E402


@pytest.fixture(scope="session")
def rt_sample() -> pd.DataFrame:
    """600 real Rotten Tomatoes reviews, 300 of each class, in a fixed order."""
    reviews = datasets.rotten_tomatoes()
    halves = [group.sample(300, random_state=0) for _, group in reviews.groupby("label")]
    return pd.concat(halves).sort_values("item_key").reset_index(drop=True)


@pytest.fixture
def store(tmp_path) -> Store:
    """A migrated, empty SQLite store in a file of its own."""
    store = Store.from_url(f"sqlite:///{tmp_path / 'heads.db'}")
    host.init(store)
    return store


def _copy(template: Path, target: Path) -> Store:
    with closing(sqlite3.connect(template)) as source, closing(sqlite3.connect(target)) as copy:
        source.backup(copy)  # the WAL's pages too, unlike a file copy
    return Store.from_url(f"sqlite:///{target}")


@pytest.fixture(scope="session")
def copy_sqlite() -> Callable[[Path, Path], Store]:
    """``copy_sqlite(template, target)``: the template's copy at ``target``, opened (for fixtures
    of any scope; tests take ``copy_database``)."""
    return _copy


@pytest.fixture
def copy_database(tmp_path) -> Callable[..., Store]:
    """A copy of a template SQLite file as the test's own ``heads.db`` (or ``name``): what is
    expensive to build (embedding, training) is built once, and each test changes only its own
    copy."""
    return lambda template, name="heads.db": _copy(template, tmp_path / name)


@pytest.fixture(scope="session")
def embedded_template(tmp_path_factory, rt_sample: pd.DataFrame) -> Path:
    """The sample in table 'reviews', embedded into set 'reviews' with the default encoder."""
    path = tmp_path_factory.mktemp("embedded") / "heads.db"
    store = Store.from_url(f"sqlite:///{path}")
    host.init(store)
    rt_sample.to_sql("reviews", store.engine, index=False)
    host.embed(store, set_name="reviews", source="SELECT item_key, text FROM reviews")
    store.engine.dispose()
    return path


@pytest.fixture(scope="session")
def tiny_embedded_template(tmp_path_factory, rt_sample: pd.DataFrame) -> Path:
    """40 reviews (20 a class) in table 'reviews', embedded into set 'reviews' (owned by this
    OS user) with the default encoder."""
    path = tmp_path_factory.mktemp("tiny_embedded") / "heads.db"
    store = Store.from_url(f"sqlite:///{path}")
    host.init(store)
    tiny = pd.concat(g.head(20) for _, g in rt_sample.groupby("label")).reset_index(drop=True)
    tiny.to_sql("reviews", store.engine, index=False)
    host.embed(store, set_name="reviews", source="SELECT item_key, text FROM reviews")
    store.engine.dispose()
    return path


@pytest.fixture
def embedded(embedded_template: Path, copy_database) -> Store:
    """The sample embedded into set 'reviews' with the default encoder (a copy of its own)."""
    return copy_database(embedded_template)


@pytest.fixture(scope="session")
def taught_template(tmp_path_factory, embedded_template: Path, rt_sample: pd.DataFrame) -> Path:
    """The embedded sample, and a small real teacher's logits for every row in a user table
    ``teacher_logits(item_key, negative, positive)``, as an analyst would store a teacher's
    output: the log-probabilities of head ``teacher_head`` (version 1, not deployed), trained
    on the sample's gold labels."""
    path = tmp_path_factory.mktemp("taught") / "heads.db"
    store = _copy(embedded_template, path)
    labels = "SELECT item_key, label FROM reviews"
    host.train(store, head="teacher_head", set_name="reviews", labels=labels, deploy="never")
    head = kinds.model_kind("head").load(
        store.model_blob(store.find_model("teacher_head", 1).model_id)
    )
    keys = rt_sample["item_key"].tolist()
    vectors = store.vectors_for_keys(store.find_set("reviews").set_id, keys)
    logits = np.log(head.predict_proba(unpack_rows([vectors[k] for k in keys], 384)) + 1e-6)
    pd.DataFrame({"item_key": keys, "negative": logits[:, 0], "positive": logits[:, 1]}).to_sql(
        "teacher_logits", store.engine, index=False
    )
    store.engine.dispose()
    return path


@pytest.fixture(scope="session")
def taught_tiny(rt_sample: pd.DataFrame) -> pd.DataFrame:
    """40 reviews, 20 of each class, and a confident teacher's logits for each, a tenth of
    them wrong: columns item_key, text, label, split, negative, positive."""
    rows = pd.concat(g.head(20) for _, g in rt_sample.groupby("label")).reset_index(drop=True)
    positive = (rows["label"] == "positive").to_numpy(copy=True)
    positive[::10] = ~positive[::10]
    rows["negative"] = np.where(positive, -1.5, 1.5)
    rows["positive"] = -rows["negative"]
    return rows


@pytest.fixture(scope="session")
def encoder_student(taught_tiny: pd.DataFrame):
    """An encoder student distilled from those logits through the kinds registry, as
    ``distill --student encoder`` fits one: MiniLM, 3 CPU steps of 8 rows of 32 tokens, then its
    checked fp32 export and int8 graph. Fitted once: test_kinds and test_encoder_student read it."""
    kind = kinds.KINDS["encoder_student"]
    params = kinds.student_params(kind.student, max_length=32, max_steps=3, device="cpu")
    distill = kind.distill_params(DistillParams(epochs=1, batch_size=8))
    return kind.distill(
        taught_tiny["text"].tolist(),
        ["negative", "positive"],
        taught_tiny[["negative", "positive"]].to_numpy(np.float32),
        (taught_tiny["label"] == "positive").astype(int).to_numpy(),
        kinds.StudentFit(params, distill),
    )


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory) -> tuple[dict, Path]:
    """The one full run of ``sqlheads --json demo`` in the suite, as a new user runs it (8,530
    reviews embedded, a head trained, every row scored): its JSON and its file. Tests that
    re-run the demo do it on a copy of this file."""
    folder = tmp_path_factory.mktemp("demo")
    result = run_demo(folder)
    database = folder / "sqlheads-demo.db"
    with closing(sqlite3.connect(database)) as c:  # all in the file itself, to be copied
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return result, database


@pytest.fixture(scope="session")
def strict_site(tmp_path_factory) -> Path:
    """The documentation site, ``mkdocs build --strict``, built once for the session: checked
    by tests/test_docs.py, rendered (a copy) by tests/test_docs_render.py, in one worker
    (SAME_WORKER below)."""
    site = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        env=os.environ | {"NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stderr[-3000:]
    return site


def run_demo(folder: Path) -> dict:
    """``sqlheads --json demo`` run in ``folder`` as a user's shell runs it: its JSON."""
    completed = subprocess.run(
        [sys.executable, "-m", "sqlheads.cli", "--json", "demo"],
        cwd=folder,
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=900,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def order_free_metrics(metrics_json: str) -> dict:
    """A version's metrics less the one figure that is a wall-clock time (the baseline's
    ``seconds``): everything else must be the same for the same rows, in any order."""
    metrics = json.loads(metrics_json)
    metrics.get("baseline", {}).pop("seconds", None)
    return metrics


def silent_for(store: Store, seconds: int) -> None:
    """Every running job's last heartbeat ``seconds`` further back: the database's clock (its
    own time stamps decide which claim is stale) moved on without a beat, and no test sleeps."""
    beat = job_queue.c.heartbeat_at
    with store.engine.begin() as c:
        c.execute(update(job_queue).values(heartbeat_at=func.datetime(beat, f"-{seconds} seconds")))


def invoke(*arguments: str, width: int = 80):
    """``sqlheads ARGUMENTS`` through Typer's test runner, on a terminal ``width`` columns wide."""
    from typer.testing import CliRunner

    from sqlheads.cli import app

    return CliRunner().invoke(app, list(arguments), env={"COLUMNS": str(width)})


def versions_of(store: Store, head: str) -> list[int]:
    """The versions of ``head`` in the store, in order."""
    return sorted(store.read_view("model_summary", head=head)["version"].tolist())


def count_rows(store: Store, table) -> int:
    with store.engine.connect() as c:
        return int(c.execute(select(func.count()).select_from(table)).scalar_one())


def pytest_sessionfinish(session, exitstatus) -> None:
    if OWN_CACHE:
        shutil.rmtree(OWN_CACHE, ignore_errors=True)


# The suite runs on every core (-n auto in pyproject.toml), up to four: each worker holds its own
# torch, encoders and session templates, and past four the templates cost more than they save.
MAX_WORKERS = 4
# The modules that take longest (--durations, 2 cores), longest first. Each module is one unit of
# work (--dist loadfile: its module fixtures are built once), and a worker takes the next unit
# when it runs dry, so handing out the long ones first leaves no worker a long tail alone.
LONGEST_FIRST = (
    "test_readme.py",  # every page's shell blocks, in order, in one directory
    "test_bench_smoke.py",  # every benchmark at tiny sizes
    "test_teacher.py",
    "test_order_invariance.py",
    "test_engine_encoder.py",
    "test_teacher_heads.py",
    "test_torch_encoder.py",
    "test_embedded_integrity.py",
    "test_sqlserver_grants.py",
)
# Modules that share a session fixture too dear to build twice join another's unit: the suite's
# one full demo run (demo_run, half a minute) serves the README's blocks and the demo's tests;
# the site built once (strict_site) is checked and rendered.
SAME_WORKER = {"test_cli.py": "test_readme.py", "test_docs_render.py": "test_docs.py"}


def pytest_xdist_auto_num_workers(config) -> int:
    return max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0))))


def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile's units, but SAME_WORKER's modules join another's (xdist's loadgroup
    would do it by marks, but it renames tests through an attribute pytest 9 no longer reads)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            folder, _, name = module.rpartition("/")
            return f"{folder}/{SAME_WORKER.get(name, name)}"

    return ModuleUnits(config, log)


def pytest_collection_modifyitems(config, items) -> None:
    def rank(item) -> int:
        name = item.path.name
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: each module's own order is kept
