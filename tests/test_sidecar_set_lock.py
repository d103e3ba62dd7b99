"""Issue 19, point 3, on SQLite with two processes: an embed part (the sidecar's) holds the
set's lock only while it writes a batch, so ``drop_set`` can run between two batches; the part's
next batch is then refused with a numbered error (50001) and never re-creates the dropped set.
Real SQLite file, the real MiniLM encoder, real reviews, the real embed-part function."""

from __future__ import annotations

import multiprocessing

import pandas as pd
from sqlalchemy import func, select

from sqlheads.sidecar.embed import run_embed
from sqlheads.sidecar.requests import request_embed
from sqlheads.store import schema as s
from sqlheads.store.repository import Store

SOURCE = "SELECT item_key, text FROM reviews"


def _embed_part(url: str, job_id: int, paused, release, results) -> None:
    """The sidecar's embed part in a process of its own, waiting after its first committed
    batch until the test releases it."""

    def progress(done: int, total: int | None, stage: str | None) -> None:
        if done and not paused.is_set():
            paused.set()
            release.wait(600)

    try:
        summary = run_embed(
            Store.from_url(url), job_id=job_id, set_name="parts", device=None,
            progress=progress, source=SOURCE, engine="onnx", batch_rows=10,
        )  # fmt: skip
        results.put(("ok", summary))
    except Exception as error:  # reported to the test, which names it when it fails
        results.put(("error", getattr(error, "number", None), str(error)))


def test_a_set_dropped_between_two_batches_of_an_embed_part_is_not_made_again(
    store: Store, rt_sample: pd.DataFrame
) -> None:
    rt_sample.head(40)[["item_key", "text"]].to_sql("reviews", store.engine, index=False)
    job_id = request_embed(store, set_name="parts", source=SOURCE, engine="onnx")["job_ids"][0]
    url = store.engine.url.render_as_string(hide_password=False)
    context = multiprocessing.get_context("spawn")
    paused, release, results = context.Event(), context.Event(), context.Queue()
    part = context.Process(target=_embed_part, args=(url, job_id, paused, release, results))
    part.start()
    try:
        assert paused.wait(600), "the embed part never wrote its first batch"
        assert store.require_set("parts")  # made by the part's first batch
        store.drop_set("parts")  # between two batches: no lock is held
    finally:
        release.set()
    part.join(600)
    outcome = results.get(timeout=60)
    assert outcome[:2] == ("error", 50001), outcome
    assert "was dropped while this embed ran" in outcome[2]
    assert store.find_set("parts") is None  # not made again by the later batches
    with store.engine.connect() as c:
        assert c.execute(select(func.count()).select_from(s.embeddings)).scalar_one() == 0
