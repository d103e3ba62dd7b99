"""Shared fixtures: real weights, real Rotten Tomatoes rows, real SQLite files."""

from __future__ import annotations

import os
import shutil
import tempfile

import pandas as pd
import pytest

# Weights come from site-packages; the hub is unreachable. A fresh cache per test session
# exercises the first-use export path, as a new user would; it holds gigabytes of exports by
# the end, so the session that made it removes it (CI's disk is not ours to fill).
os.environ["HF_HUB_OFFLINE"] = "1"
OWN_CACHE = None if "SQLHEADS_CACHE" in os.environ else tempfile.mkdtemp(prefix="sqlheads-cache-")
if OWN_CACHE:
    os.environ["SQLHEADS_CACHE"] = OWN_CACHE

from sqlheads import datasets, host  # noqa: E402
from sqlheads.store.repository import Store  # noqa: E402


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


@pytest.fixture
def embedded(store: Store, rt_sample: pd.DataFrame) -> Store:
    """The sample embedded into set 'reviews' with the default encoder."""
    rt_sample.to_sql("reviews", store.engine, index=False)
    host.embed(store, set_name="reviews", source="SELECT item_key, text FROM reviews")
    return store


def copied_store(template, folder) -> Store:
    """A test's own copy of a store file that a module-scoped fixture built once."""
    import sqlite3

    copy = folder / "heads.db"
    with sqlite3.connect(template) as source, sqlite3.connect(copy) as target:
        source.backup(target)
    return Store.from_url(f"sqlite:///{copy}")


def count_rows(store: Store, table) -> int:
    from sqlalchemy import func, select

    with store.engine.connect() as c:
        return int(c.execute(select(func.count()).select_from(table)).scalar_one())


def pytest_sessionfinish(session, exitstatus) -> None:
    if OWN_CACHE:
        shutil.rmtree(OWN_CACHE, ignore_errors=True)
