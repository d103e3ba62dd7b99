"""Item keys stay the text of the value the database returns (issue 16, part 2): integer keys
are '1', never '1.0', even in a column with a NULL; text and Unicode keys are kept as given, up
to the store's 450 characters; a NULL key goes to rejects in embed and refuses a labels, soft
labels or keys query (50003), on every verb, in the embedded host and in SQL Server's Python."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from sqlheads import host, procedures
from sqlheads.cli import app
from sqlheads.errors import QueryShapeError
from sqlheads.store import schema
from sqlheads.store.keys import KEYLESS, item_key_text
from sqlheads.store.repository import Store

runner = CliRunner()
ROWS = 80  # 40 of each class
SOURCE = "SELECT n AS item_key, body AS text FROM t"
LABELS = "SELECT n AS item_key, stars AS label FROM t WHERE n IS NOT NULL"
SOFT = "SELECT n AS item_key, negative, positive FROM t WHERE n IS NOT NULL"
LONG_KEY = "k" * 450


@pytest.fixture(scope="module")
def ints_template(tmp_path_factory, rt_sample) -> Path:
    """Table ``t``: INTEGER keys 1..80 and one row whose key is NULL, real reviews, and a
    teacher's logits (the gold class +2), embedded into set 'ints' by the command line."""
    path = tmp_path_factory.mktemp("keys") / "heads.db"
    url = f"sqlite:///{path}"
    store = Store.from_url(url)
    host.init(store)
    rows = pd.concat(
        [group.head(ROWS // 2) for _, group in rt_sample.groupby("label")], ignore_index=True
    )
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE t (n INTEGER, body TEXT, stars TEXT, negative REAL, positive REAL)")
        c.executemany(
            "INSERT INTO t VALUES (?, ?, ?, ?, ?)",
            [
                (
                    i + 1,
                    r.text,
                    r.label,
                    2.0 * (r.label == "negative"),
                    2.0 * (r.label != "negative"),
                )
                for i, r in enumerate(rows.itertuples())
            ]
            + [(None, "a review whose key is NULL", "positive", 0.0, 2.0)],
        )
    result = runner.invoke(
        app, ["--url", url, "--json", "embed", "--set", "ints", "--source", SOURCE]
    )
    assert result.exit_code == 0, result.output
    (path.parent / "embed.json").write_text(result.stdout)
    store.engine.dispose()
    return path


@pytest.fixture
def ints(ints_template: Path, copy_database) -> Store:
    return copy_database(ints_template)


def _stored(store: Store, table) -> list[tuple]:
    with store.engine.connect() as c:
        columns = [table.c.item_key] + ([table.c.reason] if "reason" in table.c else [])
        return [tuple(r) for r in c.execute(select(*columns).order_by(table.c.item_key))]


def test_a_key_is_the_text_of_the_value_the_database_returns() -> None:
    assert [item_key_text(v) for v in (1, 1.5, 2.0, "a", "ключ", None, float("nan"), pd.NA)] == [
        "1", "1.5", "2.0", "a", "ключ", None, None, None,
    ]  # fmt: skip


def test_integer_keys_stay_integers_and_a_null_key_is_rejected(ints_template: Path, ints: Store):
    summary = json.loads((ints_template.parent / "embed.json").read_text())
    assert (summary["rows_read"], summary["embedded"], summary["rejected"]) == (ROWS + 1, ROWS, 1)
    keys = [k for (k,) in _stored(ints, schema.embeddings)]
    assert sorted(keys, key=int) == [str(n) for n in range(1, ROWS + 1)]
    assert _stored(ints, schema.rejects) == [(KEYLESS, "item_key is NULL")]
    again = host.embed(ints, set_name="ints", source=SOURCE)  # the same on every run
    assert (again["unchanged"], again["rejected"], again["set_rejects"]) == (ROWS, 1, 1)


def test_labels_soft_labels_and_keys_match_integer_keys(ints: Store):
    trained = host.train(ints, head="ints_head", set_name="ints", labels=LABELS, epochs=2)
    assert trained["version"] == 1
    predicted = host.predict(
        ints, head="ints_head", set_name="ints", keys="SELECT n AS item_key FROM t WHERE n <= 10"
    )
    assert (predicted["rows"], predicted["keys_without_embedding"]) == (10, 0)
    distilled = host.distill(
        ints, head="ints_student", set_name="ints", labels=LABELS, soft_labels=SOFT, epochs=2
    )
    assert distilled["version"] == 1
    with ints.engine.connect() as c:
        soft_keys = {k for (k,) in c.execute(select(schema.soft_labels.c.item_key))}
    assert soft_keys == {str(n) for n in range(1, ROWS + 1)}


@pytest.mark.parametrize(
    ("verb", "what"),
    [
        ("train", "labels"),
        ("distill_labels", "labels"),
        ("distill_soft", "soft labels"),
        ("predict", "keys"),
    ],
)
def test_a_null_key_refuses_a_labels_soft_labels_or_keys_query(ints: Store, verb: str, what: str):
    with_null = {
        "labels": "SELECT n AS item_key, stars AS label FROM t",
        "soft": "SELECT n AS item_key, negative, positive FROM t",
        "keys": "SELECT n AS item_key FROM t",
    }
    host.train(ints, head="ints_head", set_name="ints", labels=LABELS, epochs=2)
    calls = {
        "train": lambda: host.train(ints, head="h", set_name="ints", labels=with_null["labels"]),
        "distill_labels": lambda: host.distill(
            ints, head="s", set_name="ints", labels=with_null["labels"], soft_labels=SOFT
        ),
        "distill_soft": lambda: host.distill(
            ints, head="s", set_name="ints", labels=LABELS, soft_labels=with_null["soft"]
        ),
        "predict": lambda: host.predict(
            ints, head="ints_head", set_name="ints", keys=with_null["keys"]
        ),
    }
    with pytest.raises(QueryShapeError, match=f"the {what} query returned 1 row.* NULL") as raised:
        calls[verb]()
    assert raised.value.number == 50003


def test_text_unicode_float_and_long_keys_are_kept_as_given(store: Store, rt_sample):
    keys = ["alpha", "ключ-🙂", 1.5, 7, LONG_KEY]
    with sqlite3.connect(store.engine.url.database) as c:
        c.execute("CREATE TABLE k (key, body TEXT)")  # no type: each value keeps its own
        c.executemany(
            "INSERT INTO k VALUES (?, ?)", zip(keys, rt_sample["text"].head(len(keys)), strict=True)
        )
    summary = host.embed(
        store, set_name="mixed", source="SELECT key AS item_key, body AS text FROM k"
    )
    assert summary["embedded"] == len(keys)
    assert sorted(k for (k,) in _stored(store, schema.embeddings)) == sorted(
        ["alpha", "ключ-🙂", "1.5", "7", LONG_KEY]
    )
    with sqlite3.connect(store.engine.url.database) as c:
        c.execute("INSERT INTO k VALUES (?, 'too long a key')", ("k" * 451,))
    with pytest.raises(QueryShapeError, match="item_key of 451 characters") as raised:
        host.embed(store, set_name="mixed", source="SELECT key AS item_key, body AS text FROM k")
    assert raised.value.number == 50003


def test_an_empty_key_is_rejected_like_a_null_one() -> None:
    """As SQL Server's Python gets it: every row is rejected, so no encoder is needed (one
    would be looked up in the cache by this sha256, and fail with 50009)."""
    frame = pd.DataFrame({"item_key": [None, "", "a", float("nan")], "text": ["x", "y", None, "z"]})
    out = procedures.embed(frame, encoder_sha256="0" * 64)
    rejected = dict(zip(out["item_key"], out["reject_reason"], strict=True))
    assert len(out) == 2 and rejected == {KEYLESS: "item_key is NULL", "a": "text is NULL"}
