"""SQL Server's door (``procedures.sql_server_call``) and what the compute halves share: no
exception leaves the door without a number, one condition has one number whichever verb meets
it, and the loaded models stay within their bytes."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from sqlheads.cli import app
from sqlheads.compute.columns import PREDICT_OUTPUT, TRAIN_INPUT
from sqlheads.compute.model_cache import ModelCache
from sqlheads.engine.heads import HeadClassifier, HeadParams
from sqlheads.engine.kinds import model_kind
from sqlheads.errors import InvalidParameterError
from sqlheads.procedures import sql_server_call
from sqlheads.store.jobs import JobQueue
from sqlheads.store.repository import Store
from sqlheads.store.vectors import pack_rows
from sqlheads.verbs import encoders

runner = CliRunner()


def test_an_unknown_verb_comes_back_numbered_not_as_39004() -> None:
    _, number, message = sql_server_call("nosuch", pd.DataFrame({"item_key": ["a"]}))
    assert number == 50090
    assert "'nosuch'" in message and "embed" in message


def test_a_failure_that_is_no_sqlheads_error_comes_back_as_50090() -> None:
    """A blob that hashes as stored but is no model: the loader's ValueError is a bug's kind
    of failure, and still reaches T-SQL as a number and a message, with the typed row."""
    blob = b"not a model"
    frame = pd.DataFrame({"item_key": ["a"], "vector": [pack_rows(np.zeros((1, 4)))[0]]})
    output, number, message = sql_server_call(
        "predict", frame, model_sha256=hashlib.sha256(blob).hexdigest(), model_blob=blob
    )
    assert number == 50090
    assert "'predict'" in message and "ValueError" in message
    assert list(output.columns) == list(PREDICT_OUTPUT)


def test_labels_that_hold_no_rows_are_50006_through_the_server_and_a_teacher_job(
    store: Store, rt_sample: pd.DataFrame
) -> None:
    empty = pd.DataFrame(columns=list(TRAIN_INPUT))
    _, number, message = sql_server_call("train", empty, dim=4)
    assert number == 50006 and "returned no rows" in message

    rows = rt_sample.head(20)
    rows.to_sql("reviews", store.engine, index=False)
    encoder = encoders.resolve_encoder(store, None)
    store.add_set("reviews", encoder.encoder_id, "window")
    # As heads.request_teacher captures it (it does not count classes): texts, no labels.
    captured = pd.DataFrame({"item_key": rows["item_key"], "label": None, "text": rows["text"]})
    labels = {"labels": "SELECT item_key, NULL AS label FROM reviews"}
    JobQueue(store).enqueue("teacher", "reviews", labels, head="h", inputs=[captured])
    url = store.engine.url.render_as_string(hide_password=False)
    result = runner.invoke(app, ["--url", url, "--json", "sidecar", "--once", "--device", "cpu"])
    (job,) = json.loads(result.stdout.splitlines()[-1])["jobs"]
    assert (job["state"], job["error_number"]) == ("failed", 50006), result.output
    assert "returned no rows" in job["error"]


def _head_blob(dim: int, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(40, dim)).astype(np.float32)
    y = np.where(X[:, 0] > 0, "positive", "negative")
    return HeadClassifier(HeadParams(epochs=2, seed=seed)).fit(X, y).to_bytes()


def test_the_model_cache_drops_the_least_recently_used_beyond_its_bytes() -> None:
    kind = model_kind("head")
    small, other, large = _head_blob(8, 0), _head_blob(8, 1), _head_blob(256, 2)
    assert len(large) > len(small) + len(other)
    cache = ModelCache(max_bytes=len(small) + len(other))
    sha = {b: hashlib.sha256(b).hexdigest() for b in (small, other, large)}
    first = cache.load(sha[small], small, kind)
    cache.load(sha[other], other, kind)
    assert cache.load(sha[small], small, kind) is first  # reused, not loaded again
    assert cache.held_bytes == len(small) + len(other)
    cache.load(sha[large], large, kind)  # over the bound alone: kept, the others dropped
    assert sha[large] in cache and sha[small] not in cache and sha[other] not in cache
    assert cache.held_bytes == len(large)
    cache.load(sha[other], other, kind)  # the large one was used least recently
    assert sha[large] not in cache and sha[other] in cache


def test_the_model_cache_refuses_a_blob_that_is_not_the_stored_model() -> None:
    with pytest.raises(InvalidParameterError, match="corrupt"):
        ModelCache().load("0" * 64, _head_blob(8, 0), model_kind("head"))
