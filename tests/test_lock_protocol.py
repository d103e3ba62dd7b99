"""Python writers take the T-SQL verbs' application locks by name and by mode (the third SQL
Server audit, point 4), checked on SQLite, where the store keeps the same protocol with OS
read-write locks: Shared holds coexist, an Exclusive one waits for them; drop_head holds
head.use, so it waits for a predict. The modes each verb takes are asserted against the
T-SQL's own (tests/test_sqlserver_policy.py's LOCKS); the live half is in
tests/test_sqlserver_live_audit.py."""

from __future__ import annotations

import multiprocessing
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sqlheads.cli import app
from sqlheads.errors import BusyError
from sqlheads.store.repository import SET_BUSY, Store


@pytest.fixture
def file_store(tmp_path) -> Store:
    return Store.from_url(f"sqlite:///{tmp_path / 'locks.db'}")


def _hold(url: str, kind: str, name: str, shared: bool, held, release) -> None:
    with Store.from_url(url).lock(kind, name, 0, "held by the test", shared=shared):
        held.set()
        release.wait(120)


@contextmanager
def held_elsewhere(store: Store, kind: str, name: str, *, shared: bool):
    """``kind:name`` held by another process (locks coordinate processes) until the block
    ends."""
    context = multiprocessing.get_context("spawn")
    held, release = context.Event(), context.Event()
    url = store.engine.url.render_as_string(hide_password=False)
    child = context.Process(target=_hold, args=(url, kind, name, shared, held, release))
    child.start()
    try:
        assert held.wait(120), "the other process never took its lock"
        yield
    finally:
        release.set()
        child.join(120)


def test_shared_holds_coexist_and_an_exclusive_one_waits_for_them(file_store: Store) -> None:
    with held_elsewhere(file_store, "set", "reviews", shared=True):
        with file_store.lock("set", "reviews", 0, SET_BUSY, shared=True):
            pass
        with pytest.raises(BusyError) as busy, file_store.lock("set", "reviews", 50, SET_BUSY):
            pass
        assert busy.value.number == 50016
    with (
        held_elsewhere(file_store, "set", "reviews", shared=False),
        pytest.raises(BusyError),
        file_store.lock("set", "reviews", 0, SET_BUSY, shared=True),
    ):
        pass
    with (  # one name whatever its case, as heads.lock_resource lower-cases it
        held_elsewhere(file_store, "set", "reviews", shared=False),
        pytest.raises(BusyError),
        file_store.lock("set", "Reviews", 0, SET_BUSY),
    ):
        pass
    with file_store.lock("set", "reviews", 0, SET_BUSY):  # free again
        pass


def test_drop_head_waits_for_a_predict_that_uses_the_head(file_store: Store) -> None:
    """heads.drop_head takes head.use Exclusive, which heads.predict holds Shared for its whole
    run: a version is never deleted under a predict that scores with it."""
    from sqlheads import host

    host.init(file_store)
    with (
        held_elsewhere(file_store, "head.use", "sentiment", shared=True),
        pytest.raises(BusyError) as busy,
    ):
        file_store.drop_head("sentiment", lock_timeout_ms=0)
    assert busy.value.number == 50016


# -- the lock folder ---------------------------------------------------------------------------


def _git(folder, *arguments: str) -> str:
    return subprocess.run(
        ["git", *arguments], cwd=folder, capture_output=True, text=True, check=True
    ).stdout


def test_the_lock_folder_is_hidden_and_out_of_a_users_git_status(tmp_path):
    """A store in a folder under git (the user's, without our .gitignore): after a verb took
    its locks, nothing but the store itself is new to ``git status``, and ``ls`` shows no lock
    folder."""
    _git(tmp_path, "init", "-q")
    url = f"sqlite:///{tmp_path / 'notes.db'}"
    assert CliRunner().invoke(app, ["--url", url, "init"]).exit_code == 0
    Store.from_url(url).engine.dispose()
    with Store.from_url(url).lock("set", "reviews", 0, SET_BUSY):
        pass
    untracked = _git(tmp_path, "status", "--porcelain", "--untracked-files=all").splitlines()
    assert [line for line in untracked if "notes.db" not in line or "lock" in line] == []
    shown = [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")]
    assert set(shown) <= {"notes.db", "notes.db-wal", "notes.db-shm"}, shown  # SQLite's own


def test_the_projects_gitignore_ignores_the_demos_lock_folder():
    root = Path(__file__).resolve().parents[1]
    for path in ("sqlheads-demo.db.locks/set.x.rwlock", ".sqlheads-demo.db.locks/set.x.rwlock"):
        assert _git(root, "check-ignore", "--no-index", path).strip() == path, path
