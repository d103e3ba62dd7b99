"""Embedding into the store: incremental by text hash, rejects, batches that survive a kill."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import func, select, text

from sqlheads import host
from sqlheads.errors import (
    EncoderMismatchError,
    InvalidNameError,
    InvalidParameterError,
    NotFoundError,
    QueryNotAllowedError,
    QueryShapeError,
)
from sqlheads.store import schema
from sqlheads.store.repository import Store
from sqlheads.store.vectors import unpack_rows
from sqlheads.verbs import encoders


def _count(store: Store, table, **where) -> int:
    query = select(func.count()).select_from(table)
    for column, value in where.items():
        query = query.where(table.c[column] == value)
    with store.engine.connect() as c:
        return int(c.execute(query).scalar_one())


def test_embed_stores_unit_vectors_of_the_encoder_size(embedded: Store, rt_sample):
    assert _count(embedded, schema.embeddings) == len(rt_sample)
    with embedded.engine.connect() as c:
        blobs = [r.vector for r in c.execute(select(schema.embeddings.c.vector).limit(20))]
    vectors = unpack_rows(blobs, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)


def test_rerun_skips_unchanged_and_reembeds_changed_rows(embedded: Store, rt_sample):
    source = "SELECT item_key, text FROM reviews"
    again = host.embed(embedded, set_name="reviews", source=source)
    assert (again["embedded"], again["unchanged"]) == (0, len(rt_sample))

    changed = rt_sample["item_key"].iloc[:3].tolist()
    with embedded.engine.begin() as c:
        before = dict(
            c.execute(
                text("SELECT item_key, vector FROM embeddings WHERE item_key IN (:a, :b, :c)"),
                dict(zip("abc", changed, strict=True)),
            ).all()
        )
        c.execute(
            text(
                "UPDATE reviews SET text = 'A completely different and awful film.' "
                "WHERE item_key IN (:a, :b, :c)"
            ),
            dict(zip("abc", changed, strict=True)),
        )
        c.execute(
            text(
                "INSERT INTO reviews (item_key, text, label, split) "
                "VALUES ('new-1', 'Brilliant.', 'positive', 'train')"
            )
        )
    third = host.embed(embedded, set_name="reviews", source=source)
    assert third["embedded"] == 4
    assert third["unchanged"] == len(rt_sample) - 3
    assert _count(embedded, schema.embeddings) == len(rt_sample) + 1
    with embedded.engine.connect() as c:
        after = dict(
            c.execute(
                text("SELECT item_key, vector FROM embeddings WHERE item_key IN (:a, :b, :c)"),
                dict(zip("abc", changed, strict=True)),
            ).all()
        )
    assert all(before[k] != after[k] for k in changed)


def test_null_and_empty_text_go_to_rejects_with_a_reason(store: Store):
    pd.DataFrame({"id": [1, 2, 3, 4], "body": ["Lovely.", None, "   ", "Dreadful."]}).to_sql(
        "notes", store.engine, index=False
    )
    result = host.embed(
        store, set_name="notes", source="SELECT id AS item_key, body AS text FROM notes"
    )
    assert (result["embedded"], result["rejected"]) == (2, 2)
    with store.engine.connect() as c:
        reasons = dict(c.execute(select(schema.rejects.c.item_key, schema.rejects.c.reason)).all())
    assert reasons == {"2": "text is NULL", "3": "text is empty"}
    # Fixing the text moves the row out of rejects and into embeddings.
    with store.engine.begin() as c:
        c.execute(text("UPDATE notes SET body = 'Fixed now.' WHERE id = 2"))
    host.embed(store, set_name="notes", source="SELECT id AS item_key, body AS text FROM notes")
    assert _count(store, schema.rejects) == 1
    assert _count(store, schema.embeddings) == 3


def test_long_texts_are_windowed_and_reported(store: Store):
    long_review = "An endless, meandering film that keeps circling its own ideas. " * 80
    pd.DataFrame({"item_key": ["short", "long"], "text": ["Short and sweet.", long_review]}).to_sql(
        "docs", store.engine, index=False
    )
    result = host.embed(store, set_name="docs", source="SELECT item_key, text FROM docs")
    assert result["windowed"] == 1
    with store.engine.connect() as c:
        windows = dict(
            c.execute(select(schema.embeddings.c.item_key, schema.embeddings.c.windows)).all()
        )
    assert windows["short"] == 1 and windows["long"] > 1
    truncated = host.embed(
        store, set_name="docs_cut", source="SELECT item_key, text FROM docs", long_text="truncate"
    )
    assert truncated["windowed"] == 0


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"set_name": "bad name;"}, InvalidNameError, "not allowed"),
        ({"source": "SELECT item_key FROM reviews"}, QueryShapeError, "missing text"),
        ({"source": "SELECT nope FROM nowhere"}, QueryShapeError, "failed"),
        ({"source": "DELETE FROM reviews"}, QueryNotAllowedError, "DELETE from reviews"),
        ({"long_text": "squash"}, InvalidParameterError, "window or truncate"),
        ({"encoder": "no-such-encoder"}, NotFoundError, "register-encoder"),
    ],
)
def test_bad_embed_requests_are_refused_and_write_nothing(store, rt_sample, kwargs, error, match):
    rt_sample.head(5).to_sql("reviews", store.engine, index=False)
    arguments = {"set_name": "reviews", "source": "SELECT item_key, text FROM reviews", **kwargs}
    with pytest.raises(error, match=match):
        host.embed(store, **arguments)
    assert _count(store, schema.embeddings) == 0
    with store.engine.connect() as c:
        assert c.execute(text("SELECT COUNT(*) FROM reviews")).scalar_one() == 5


def test_a_set_keeps_its_encoder(embedded: Store):
    encoders.register_encoder(embedded, name="minilm-fp32", quantization="none")
    with pytest.raises(EncoderMismatchError, match="cannot share a set"):
        host.embed(
            embedded,
            set_name="reviews",
            source="SELECT item_key, text FROM reviews",
            encoder="minilm-fp32",
        )


def test_killed_embed_loses_at_most_a_batch_and_resumes_without_duplicates(tmp_path):
    url = f"sqlite:///{tmp_path / 'kill.db'}"
    store = Store.from_url(url)
    host.init(store)
    encoders.register_encoder(store)  # export before the clock starts
    from sqlheads import datasets

    rows = datasets.rotten_tomatoes().head(3000)
    rows[["item_key", "text"]].to_sql("reviews", store.engine, index=False)
    command = [
        sys.executable,
        "-m",
        "sqlheads.cli",
        "--url",
        url,
        "--json",
        "embed",
        "--set",
        "reviews",
        "--source",
        "SELECT item_key, text FROM reviews",
        "--batch-rows",
        "100",
    ]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ.copy()
    )
    deadline = time.monotonic() + 240
    done = 0
    while time.monotonic() < deadline and process.poll() is None:
        done = _count(store, schema.embeddings)
        if done >= 300:
            break
        time.sleep(0.2)
    assert process.poll() is None, "embed finished before it could be killed"
    process.send_signal(signal.SIGKILL)
    process.wait()
    survived = _count(store, schema.embeddings)
    assert 300 <= survived < len(rows)
    assert survived % 100 == 0  # whole batches only

    # Resumed over the survivors and 200 rows never embedded (3,000 rows only made sure the
    # kill came mid-run; embedding the rest would check nothing more).
    with store.engine.begin() as c:
        c.execute(
            text(
                "DELETE FROM reviews WHERE item_key NOT IN (SELECT item_key FROM embeddings) "
                "AND item_key NOT IN (SELECT item_key FROM reviews WHERE item_key NOT IN "
                "(SELECT item_key FROM embeddings) ORDER BY item_key LIMIT 200)"
            )
        )
    resumed = subprocess.run(command, capture_output=True, text=True, check=True)
    import json

    result = json.loads(resumed.stdout)
    assert result["unchanged"] == survived
    assert result["embedded"] == 200
    assert _count(store, schema.embeddings) == survived + 200
