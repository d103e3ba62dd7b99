"""score: predictions written per second, end to end into the predictions table.

A real store (SQLite file, the package's schema through ``host.init``), the default int8
encoder registered, Rotten Tomatoes vectors stored in a set (repeated under new keys up to
the row counts below), a head trained with ``host.train`` on Rotten Tomatoes labels, then
``host.predict`` timed: keyset pages of stored vectors read, scored by the procedure, and
written to ``predictions`` with their probabilities as JSON, one transaction per page.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from bench.common import Section, Table, cached_vectors, fmt, pct, save_figure, timer
from sqlheads.report.figures import pyplot

SIZES = {
    "full": {"rows": (10_000, 100_000, 1_000_000), "rt_rows": None},
    "quick": {"rows": (10_000, 50_000), "rt_rows": None},
    "tiny": {"rows": (1_000, 3_000), "rt_rows": 600},
}
HEAD, SET, LABELS = "bench_head", "bench_set", "bench_labels"
WRITE_ROWS = 20_000


def run(out_dir: Path, scale: str = "full") -> Section:
    from sqlalchemy import delete

    from bench.common import seeded_subsample
    from sqlheads import datasets, host, procedures
    from sqlheads.store import schema
    from sqlheads.store.repository import Store
    from sqlheads.verbs import encoders

    size = SIZES[scale]
    reviews = seeded_subsample(datasets.rotten_tomatoes(), size["rt_rows"])
    vectors, _ = cached_vectors("rt", "int8", reviews["text"].tolist())
    results: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="sqlheads-bench-score-") as tmp:
        store = Store.from_url(f"sqlite:///{tmp}/score.db")
        host.init(store)
        encoder = encoders.register_encoder(store)
        embedding_set = store.add_set(SET, encoder.encoder_id, "window")
        keys = [f"r{i:07d}" for i in range(len(reviews))]
        pd.DataFrame({"item_key": keys, "label": reviews["label"]}).to_sql(
            LABELS, store.engine, index=False
        )
        stored = 0
        for rows in size["rows"]:
            stored = fill_set(store, embedding_set.set_id, vectors, stored, rows)
            if rows == size["rows"][0]:
                trained = host.train(
                    store,
                    head=HEAD,
                    set_name=SET,
                    labels=f"SELECT item_key, label FROM {LABELS}",
                    deploy="always",
                )
            with store.engine.begin() as connection:
                connection.execute(delete(schema.predictions))
            end_to_end = host.predict(store, head=HEAD, set_name=SET)
            # The same pages again, without the writes: read only, then read and score.
            model = store.find_model(HEAD)
            blob = store.model_blob(model.model_id)
            with timer() as read_seconds:
                pages = list(store.iter_vectors(embedding_set.set_id, 10_000))
            with timer() as score_seconds:
                for page in pages:
                    procedures.predict(page, model_sha256=model.sha256, model_blob=blob)
            results[rows] = {
                "seconds": end_to_end["seconds"],
                "written": end_to_end["rows"],
                "read_seconds": read_seconds[0],
                "score_seconds": score_seconds[0],
            }
            del pages
    section = Section(
        name="score",
        title="score: predictions into the predictions table",
        scale=scale,
        intro=__doc__.split("\n", 2)[2].strip()
        + f" The head: {', '.join(trained['classes'])} trained on {trained['rows_train']:,} rows "
        f"(held-out accuracy {pct(trained['accuracy'])}).",
    )
    table = Table(
        "host.predict, end to end (SQLite file, WAL)",
        ["rows", "predictions written/s", "seconds", "reading vectors", "scoring",
         "writing predictions"],
    )  # fmt: skip
    for rows, r in results.items():
        write = max(r["seconds"] - r["read_seconds"] - r["score_seconds"], 0.0)
        table.rows.append(
            [fmt(rows), fmt(r["written"] / r["seconds"]), fmt(r["seconds"], 1),
             pct(r["read_seconds"] / r["seconds"], 0), pct(r["score_seconds"] / r["seconds"], 0),
             pct(write / r["seconds"], 0)]
        )  # fmt: skip
    section.tables.append(table)
    largest = max(results)
    r = results[largest]
    section.headline.append(
        ["score", f"head predictions written into SQLite, {largest:,} rows",
         f"{fmt(r['written'] / r['seconds'])} rows/s end to end "
         f"(scoring alone {fmt(largest / r['score_seconds'])} rows/s)"]
    )  # fmt: skip
    section.notes += [
        "Shares: reading and scoring were timed again on their own over the same pages; "
        "writing is the rest of the end-to-end time (deletes of old predictions for the "
        "page's keys, inserts, commit).",
        "Students score from text, not from stored vectors: they are timed in the students "
        "section (and, on a GPU machine, the sidecar section); this one measures the head.",
    ]
    section.plots.append(_plot(out_dir, results))
    return section


def fill_set(store, set_id: int, vectors: np.ndarray, stored: int, rows: int) -> int:
    """Store vectors under keys r0000000... up to ``rows``, repeating the RT vectors."""
    from sqlheads.store.vectors import pack_rows

    for start in range(stored, rows, WRITE_ROWS):
        index = np.arange(start, min(rows, start + WRITE_ROWS))
        keys = [f"r{i:07d}" for i in index]
        store.write_embed_batch(
            set_id,
            pd.DataFrame(
                {
                    "item_key": keys,
                    "text_sha256": [hashlib.sha256(k.encode()).hexdigest() for k in keys],
                    "vector": pack_rows(vectors[index % len(vectors)]),
                    "windows": 1,
                    "reject_reason": None,
                }
            ),
        )
    return rows


def _plot(out_dir: Path, results) -> str:
    plt = pyplot()
    figure, ax = plt.subplots(figsize=(6.5, 4))
    rows = sorted(results)
    ax.plot(rows, [results[n]["written"] / results[n]["seconds"] for n in rows], marker="o",
            label="end to end (read, score, write)")  # fmt: skip
    ax.plot(rows, [n / results[n]["score_seconds"] for n in rows], marker="s", linestyle="--",
            label="scoring alone")  # fmt: skip
    ax.set(xscale="log", yscale="log", xlabel="rows scored", ylabel="rows / s",
           title="head predictions into SQLite")  # fmt: skip
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return save_figure(figure, out_dir, "bench-score.png")
