"""deploy: what a deploy costs now that it re-scores instead of blanking latest_predictions.

A real store (SQLite file, WAL), Rotten Tomatoes vectors of the default int8 encoder stored in
a set (repeated under new keys up to the row counts below, as in the score section), head
version 1 trained on their labels, deployed and scored over the whole set; version 2 trained
and not deployed. Timed: ``host.deploy`` of version 2 (the deployment row, version 2's
predictions of every row version 1 had scored, the removal of version 1's, one transaction),
then ``host.roll_back`` to version 1 (the same the other way), and a dashboard's
``SELECT COUNT(*) FROM latest_predictions WHERE head = ...`` after each.
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

from bench.common import Section, Table, cached_vectors, fmt, save_figure, seeded_subsample, timer
from bench.score import fill_set
from sqlheads.report.figures import pyplot

SIZES = {
    "full": {"rows": (100_000, 1_000_000), "rt_rows": 2_000},
    "quick": {"rows": (30_000, 300_000), "rt_rows": 2_000},
    "tiny": {"rows": (1_000, 3_000), "rt_rows": 600},
}
HEAD, SET, LABELS = "bench_head", "bench_set", "bench_labels"


def run(out_dir: Path, scale: str = "full") -> Section:
    import pandas as pd

    from sqlheads import datasets, host
    from sqlheads.store.repository import Store
    from sqlheads.verbs import encoders

    size = SIZES[scale]
    reviews = seeded_subsample(datasets.rotten_tomatoes(), size["rt_rows"])
    vectors, _ = cached_vectors("rt", "int8", reviews["text"].tolist())
    results: dict[int, dict[str, float]] = {}
    for rows in size["rows"]:
        with tempfile.TemporaryDirectory(prefix="sqlheads-bench-deploy-") as tmp:
            path = Path(tmp) / "deploy.db"
            store = Store.from_url(f"sqlite:///{path}")
            host.init(store)
            encoder = encoders.register_encoder(store)
            embedding_set = store.add_set(SET, encoder.encoder_id, "window")
            keys = [f"r{i:07d}" for i in range(len(reviews))]
            pd.DataFrame({"item_key": keys, "label": reviews["label"]}).to_sql(
                LABELS, store.engine, index=False
            )
            fill_set(store, embedding_set.set_id, vectors, 0, rows)
            labels = f"SELECT item_key, label FROM {LABELS}"
            host.train(store, head=HEAD, set_name=SET, labels=labels, deploy="always")
            predicted = host.predict(store, head=HEAD, set_name=SET)
            host.train(store, head=HEAD, set_name=SET, labels=labels, deploy="never", hidden=8)
            with timer() as deploy_seconds:
                deployed = host.deploy(store, head=HEAD, version=2)
            view_after_deploy = _dashboard(path)
            with timer() as roll_back_seconds:
                rolled = host.roll_back(store, head=HEAD)
            view_after_roll_back = _dashboard(path)
            store.engine.dispose()
        assert deployed["rows_rescored"] == rolled["rows_rescored"] == rows
        assert view_after_deploy[0] == view_after_roll_back[0] == rows
        results[rows] = {
            "predict": predicted["seconds"],
            "deploy": deploy_seconds[0],
            "roll_back": roll_back_seconds[0],
            "view_count": view_after_deploy[1],
        }
    section = Section(
        name="deploy",
        title="deploy: re-scoring the replaced predictions in the deploy's transaction",
        scale=scale,
        intro=__doc__.split("\n", 2)[2].strip(),
    )
    table = Table(
        "host.deploy and host.roll_back on a head with every row scored (SQLite file, WAL)",
        ["rows scored", "deploy s", "deploy rows/s", "roll-back s", "predict s (for scale)",
         "dashboard COUNT(*) s"],
    )  # fmt: skip
    for rows, r in results.items():
        table.rows.append(
            [fmt(rows), fmt(r["deploy"], 1), fmt(rows / r["deploy"]), fmt(r["roll_back"], 1),
             fmt(r["predict"], 1), fmt(r["view_count"], 2)]
        )  # fmt: skip
    section.tables.append(table)
    largest = max(results)
    section.headline.append(
        ["deploy", f"deploy re-scoring {largest:,} scored rows (SQLite)",
         f"{fmt(results[largest]['deploy'], 1)} s ({fmt(largest / results[largest]['deploy'])} "
         "rows/s)"]
    )  # fmt: skip
    section.notes.append(
        "Before issue 20 a deploy only inserted a row and deleted the old predictions (well "
        "under a second) and latest_predictions was empty until predict ran again: the cost "
        "here is about that predict, moved into the deploy's transaction, plus the delete."
    )
    section.plots.append(_plot(out_dir, results))
    return section


def _dashboard(path: Path) -> tuple[int, float]:
    """A BI tool's query on its own connection: the rows it sees and the seconds it took."""
    with sqlite3.connect(path) as reader, timer() as seconds:
        (count,) = reader.execute(
            "SELECT COUNT(*) FROM latest_predictions WHERE head = ?", (HEAD,)
        ).fetchone()
    return count, seconds[0]


def _plot(out_dir: Path, results) -> str:
    plt = pyplot()
    figure, ax = plt.subplots(figsize=(6.5, 4))
    rows = sorted(results)
    for what, marker in (("predict", "o"), ("deploy", "s"), ("roll_back", "^")):
        ax.plot(rows, [results[n][what] for n in rows], marker=marker, label=what)
    ax.set(xscale="log", yscale="log", xlabel="rows scored", ylabel="seconds",
           title="deploy re-scores every scored row")  # fmt: skip
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return save_figure(figure, out_dir, "bench-deploy.png")
