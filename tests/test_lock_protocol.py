"""Python writers take the T-SQL verbs' application locks by name and by mode (the third SQL
Server audit, point 4), checked on SQLite, where the store keeps the same protocol with OS
read-write locks: Shared holds coexist, an Exclusive one waits for them; drop_head holds
head.use, so it waits for a predict. The modes each verb takes are asserted against the
T-SQL's own (tests/test_sqlserver_policy.py's LOCKS); the live half is in
tests/test_sqlserver_live_audit.py."""

from __future__ import annotations

import multiprocessing
from contextlib import contextmanager

import pytest

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
