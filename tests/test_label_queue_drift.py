"""The label queue and drift on a real store: real MiniLM vectors of Rotten Tomatoes and IMDB
reviews, real SQLite, the views as the migration made them, the verbs and the command line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import inspect, text
from typer.testing import CliRunner

from sqlheads import datasets, host
from sqlheads.cli import app
from sqlheads.engine.loop import drift as signals
from sqlheads.engine.loop.active import margins
from sqlheads.errors import InUseError, InvalidNameError, InvalidParameterError, NotFoundError
from sqlheads.report import build_report
from sqlheads.store import queue_drift
from sqlheads.store.repository import Store
from sqlheads.verbs.drift import drift
from sqlheads.verbs.label_queue import label_queue

pytestmark = pytest.mark.slow
HEAD = "sentiment"
EVEN = "CAST(substr(item_key, 4) AS INTEGER) % 2 = 0"  # about half the reviews
FIRST = f"SELECT item_key, label FROM reviews WHERE {EVEN}"
runner = CliRunner()


def cli(store: Store, *args: str) -> dict:
    result = runner.invoke(app, ["--url", str(store.engine.url), "--json", *args])
    return json.loads(result.stdout)


def view(store: Store, name: str) -> pd.DataFrame:
    with store.engine.connect() as c:
        return pd.read_sql(text(f"SELECT * FROM {name}"), c)


@pytest.fixture(scope="module")
def half_template(tmp_path_factory, embedded_template: Path, copy_sqlite) -> Path:
    """Version 1 of the head trained on the reviews of even keys and deployed; every review
    scored."""
    store = copy_sqlite(embedded_template, tmp_path_factory.mktemp("half") / "heads.db")
    host.train(store, head=HEAD, set_name="reviews", labels=FIRST, deploy="always")
    host.predict(store, head=HEAD, set_name="reviews")
    store.engine.dispose()
    return Path(store.engine.url.database)


@pytest.fixture
def half(half_template: Path, copy_database) -> Store:
    """A copy of half_template of its own (built once, for the module)."""
    return copy_database(half_template)


def labelled_count(store: Store, where: str = EVEN) -> int:
    with store.engine.connect() as c:
        return c.execute(text(f"SELECT COUNT(*) FROM reviews WHERE {where}")).scalar_one()


# -- the label queue --------------------------------------------------------------------------


def test_the_queue_lists_unlabelled_rows_least_sure_first(half: Store, rt_sample) -> None:
    labelled = set(rt_sample.loc[rt_sample["item_key"].str[3:].astype(int) % 2 == 0, "item_key"])
    queue = view(half, "label_queue")
    assert len(queue) == len(rt_sample) - len(labelled) > 0
    assert not set(queue["item_key"]) & labelled and set(queue["version"]) == {1}
    # the view's margin is the top probability minus the runner-up's, from the stored rows
    with half.engine.connect() as c:
        stored = dict(c.execute(text("SELECT item_key, probabilities_json FROM predictions")).all())
    probabilities = np.array([list(json.loads(stored[k]).values()) for k in queue["item_key"]])
    assert queue["margin"].to_numpy() == pytest.approx(margins(probabilities), abs=2e-6)

    # the view the migration froze is the select the store defines
    with half.engine.connect() as c:
        selected = pd.DataFrame(c.execute(queue_drift.label_queue_select()).mappings().all())
    selected["predicted_at"] = selected["predicted_at"].astype(str)  # the view's is text
    key = ["item_key"]
    pd.testing.assert_frame_equal(
        selected.sort_values(key, ignore_index=True), queue.sort_values(key, ignore_index=True)
    )

    result = label_queue(half, head=HEAD, n=25)
    rows = result["rows"]
    assert len(rows) == 25 and [r["queue_rank"] for r in rows] == list(range(1, 26))
    least = np.sort(queue["margin"].to_numpy())[:25]
    assert [r["margin"] for r in rows] == pytest.approx(least.tolist())  # no near-twins here
    printed = cli(half, "label-queue", "--head", HEAD, "--n", "5")
    assert [(r["item_key"], r["margin"]) for r in printed["rows"]] == [
        (r["item_key"], r["margin"]) for r in rows[:5]
    ]


def test_near_duplicates_are_passed_over(half: Store) -> None:
    """The least sure review copied under ten new keys: the queue lists one of the eleven."""
    first = label_queue(half, head=HEAD, n=1)["rows"][0]["item_key"]
    with half.engine.begin() as c:
        body = c.execute(text("SELECT text FROM reviews WHERE item_key = :k"), {"k": first})
        body = body.scalar_one()
        for copy in range(10):
            c.execute(
                text(
                    "INSERT INTO reviews (item_key, text, label, split) VALUES (:k, :t, 'x', 'x')"
                ),
                {"k": f"{first}-copy{copy}", "t": body},
            )
    host.embed(half, set_name="reviews", source="SELECT item_key, text FROM reviews")
    host.predict(half, head=HEAD, set_name="reviews")
    result = label_queue(half, head=HEAD, n=15)
    assert sum(r["item_key"].startswith(first) for r in result["rows"]) == 1
    assert result["passed_over"] == 10
    margin_only = label_queue(half, head=HEAD, n=15, max_cosine=1.0)
    assert margin_only["passed_over"] == 0
    assert sum(r["item_key"].startswith(first) for r in margin_only["rows"]) > 1


def test_an_empty_queue_when_every_row_is_labelled(embedded: Store) -> None:
    every = "SELECT item_key, label FROM reviews"
    host.train(embedded, head=HEAD, set_name="reviews", labels=every, deploy="always")
    host.predict(embedded, head=HEAD, set_name="reviews")
    assert view(embedded, "label_queue").empty
    assert label_queue(embedded, head=HEAD, n=10)["rows"] == []
    assert cli(embedded, "label-queue", "--head", HEAD, "--into", "round_1")["rows"] == []
    assert "round_1" in inspect(embedded.engine).get_table_names()
    assert drift(embedded, head=HEAD)["sets"] == []  # no row beyond the labelled ones


def test_a_head_never_deployed_is_refused_with_its_number(embedded: Store) -> None:
    host.train(embedded, head=HEAD, set_name="reviews", labels=FIRST, deploy="never")
    for verb in (lambda: label_queue(embedded, head=HEAD, n=5), lambda: drift(embedded, head=HEAD)):
        with pytest.raises(NotFoundError) as refused:
            verb()
        assert refused.value.number == 50001 and "sqlheads deploy" in refused.value.message
    for command in (["label-queue", "--head", HEAD], ["drift", "--head", HEAD]):
        assert cli(embedded, *command)["number"] == 50001
    with pytest.raises(NotFoundError, match="no trained versions"):
        label_queue(embedded, head="never_trained", n=5)


def test_rows_scored_by_an_older_version(half: Store, rt_sample) -> None:
    """The queue is the deployed version's: a newer version's predictions do not change it
    until it is deployed, and then its own labelled rows leave the queue."""
    more = f"{FIRST} OR CAST(substr(item_key, 4) AS INTEGER) % 4 = 1"  # three quarters
    host.train(half, head=HEAD, set_name="reviews", labels=more, deploy="never")
    host.predict(half, head=HEAD, set_name="reviews", version=2)
    before = view(half, "label_queue")
    assert set(before["version"]) == {1} and len(before) == len(rt_sample) - labelled_count(half)
    host.deploy(half, head=HEAD, version=2)
    after = view(half, "label_queue")
    assert set(after["version"]) == {2}
    last_quarter = rt_sample["item_key"].str[3:].astype(int) % 4 == 3
    assert set(after["item_key"]) == set(rt_sample.loc[last_quarter, "item_key"])
    with half.engine.connect() as c:
        scored = dict(
            c.execute(text("SELECT item_key, score FROM predictions WHERE model_id = 2")).all()
        )
    assert after["probability"].tolist() == pytest.approx([scored[k] for k in after["item_key"]])
    host.roll_back(half, head=HEAD)
    assert set(view(half, "label_queue")["version"]) == {1}
    half.drop_head(HEAD, 0)  # its labelled keys go with its versions
    assert view(half, "labelled_keys").empty and view(half, "label_queue").empty


def test_into_writes_a_labelling_table_that_train_reads_back(half: Store) -> None:
    result = label_queue(half, head=HEAD, n=30, into="round_1")
    with half.engine.connect() as c:
        table = pd.read_sql(text("SELECT * FROM round_1 ORDER BY queue_rank"), c)
    assert table["item_key"].tolist() == [r["item_key"] for r in result["rows"]]
    assert table["label"].isna().all() and table["queue_rank"].tolist() == list(range(1, 31))
    round_only = "SELECT item_key, label FROM round_1"
    with pytest.raises(InvalidParameterError) as unfilled:
        host.train(half, head=HEAD, set_name="reviews", labels=round_only)
    assert unfilled.value.number == 50012 and "WHERE label IS NOT NULL" in unfilled.value.message
    with half.engine.begin() as c:  # the person labels two thirds of the round
        c.execute(
            text(
                "UPDATE round_1 SET label = (SELECT r.label FROM reviews AS r WHERE "
                "r.item_key = round_1.item_key) WHERE queue_rank <= 20"
            )
        )
    labels = f"{FIRST} UNION ALL SELECT item_key, label FROM round_1 WHERE label IS NOT NULL"
    trained = host.train(half, head=HEAD, set_name="reviews", labels=labels, deploy="always")
    assert trained["rows_train"] + trained["rows_test"] == labelled_count(half) + 20
    queued = set(view(half, "label_queue")["item_key"])
    assert len(queued & set(table["item_key"])) == 10  # the ten left unlabelled stay queued

    with pytest.raises(InUseError) as exists:
        label_queue(half, head=HEAD, n=5, into="round_1")
    assert exists.value.number == 50015 and "--replace" in exists.value.message
    assert len(label_queue(half, head=HEAD, n=5, into="round_1", replace=True)["rows"]) == 5
    for bad in ("round 1; DROP TABLE reviews", "1round", "main.round_2", ""):
        with pytest.raises(InvalidNameError) as refused:
            label_queue(half, head=HEAD, n=5, into=bad)
        assert refused.value.number == 50002
    assert {"reviews", "round_1"} <= set(inspect(half.engine).get_table_names())


# -- drift ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rt_and_imdb() -> tuple[pd.DataFrame, pd.DataFrame]:
    """300 reviews of RT's training split (150 a class), 150 of its test split, 150 IMDB."""
    rt = datasets.rotten_tomatoes()
    train = rt[rt["split"] == "train"].groupby("label").sample(150, random_state=0)
    unseen = rt[rt["split"] == "test"].sample(150, random_state=0)
    imdb = datasets.imdb()
    return pd.concat([train, unseen]), imdb[imdb["split"] == "test"].sample(150, random_state=0)


def test_imdb_on_an_rt_head_drifts_and_unseen_rt_rows_do_not(store: Store, rt_and_imdb) -> None:
    """Trained on the training-split reviews, the head scores RT's test-split reviews (never
    labelled: the data it was trained on) and IMDB reviews (another site, longer texts)."""
    rt, imdb = rt_and_imdb
    rt.to_sql("reviews", store.engine, index=False)
    imdb.to_sql("imdb_reviews", store.engine, index=False)
    host.embed(store, set_name="reviews", source="SELECT item_key, text FROM reviews")
    host.embed(store, set_name="imdb", source="SELECT item_key, text FROM imdb_reviews")
    train = "SELECT item_key, label FROM reviews WHERE split = 'train'"
    host.train(store, head=HEAD, set_name="reviews", labels=train, deploy="always")
    host.predict(store, head=HEAD, set_name="reviews")
    host.predict(store, head=HEAD, set_name="imdb")

    result = drift(store, head=HEAD)
    found = {s["set"]: s for s in result["sets"]}
    assert found["reviews"]["rows_scored"] == found["imdb"]["rows_scored"] == 150
    assert not found["reviews"]["drifted"], found["reviews"]
    assert found["imdb"]["drifted"], found["imdb"]
    assert (
        found["imdb"]["embedding_shift"] > signals.SHIFT_LIMIT > found["reviews"]["embedding_shift"]
    )
    printed = cli(store, "drift", "--head", HEAD)
    assert [(s["set"], s["drifted"]) for s in printed["sets"]] == [
        ("imdb", True),
        ("reviews", False),
    ]

    # the view computes the SQL signals exactly as the engine does from the same rows
    table = view(store, "drift").set_index("set_name")
    reference = json.loads(store.model_record(1)["metrics_json"])["drift"]
    with store.engine.connect() as c:
        scores = pd.read_sql(
            text(
                "SELECT s.name, p.score, p.label FROM predictions AS p JOIN embedding_sets AS s "
                "ON s.set_id = p.set_id WHERE s.name = 'imdb' OR p.item_key NOT IN "
                "(SELECT item_key FROM labelled_keys)"
            ),
            c,
        )
    for name, rows in scores.groupby("name"):
        counts = signals.bin_counts(rows["score"])
        expected = signals.psi(reference["top_probability_shares"], counts)
        assert table.loc[name, "top_probability_psi"] == pytest.approx(expected, rel=1e-9)
        assert table.loc[name, "rows_scored"] == len(rows)
        shares = rows["label"].value_counts(normalize=True)
        gap = signals.share_gap(reference, shares.to_dict())
        assert table.loc[name, "largest_share_gap"] == pytest.approx(gap, rel=1e-9)
    assert table.loc["reviews", "judged"] == 1 and table.loc["reviews", "drifted"] == 0

    page = build_report(store, HEAD, out_dir=store.engine.url.database + "-report")
    html = Path(page["html"]).read_text(encoding="utf-8")
    assert "Label queue" in html and "Drift" in html and "imdb" in html


def test_drift_on_a_set_with_one_row(half: Store) -> None:
    with half.engine.begin() as c:
        c.execute(text("CREATE TABLE one (item_key TEXT, text TEXT)"))
        c.execute(text("INSERT INTO one VALUES ('only', 'A warm, funny and wise film.')"))
    host.embed(half, set_name="one", source="SELECT item_key, text FROM one")
    host.predict(half, head=HEAD, set_name="one")
    found = {s["set"]: s for s in drift(half, head=HEAD)["sets"]}["one"]
    assert found["rows_scored"] == 1 and found["drifted"] is False
    assert found["reasons"] == [f"not judged: 1 new row(s), fewer than {signals.MIN_ROWS}"]
    assert found["embedding_shift"] is not None and found["top_probability_psi"] is not None
    queue = label_queue(half, head=HEAD, n=1000, set_name="one")
    assert [r["item_key"] for r in queue["rows"]] == ["only"]


def _rewrite_reference(store: Store, reference: dict | None) -> None:
    metrics = json.loads(store.model_record(1)["metrics_json"])
    metrics.pop("drift")
    if reference is not None:
        metrics["drift"] = reference
    with store.engine.begin() as c:
        c.execute(
            text("UPDATE models SET metrics_json = :m WHERE model_id = 1"),
            {"m": json.dumps(metrics)},
        )


def test_drift_on_a_version_with_no_held_out_rows(half: Store) -> None:
    """Its reference as the engine records one without held-out rows: what needs them is named
    as not computed (in the view, NULL), the rest is still judged."""
    reference = json.loads(half.model_record(1)["metrics_json"])["drift"]
    no_held_out = signals.reference(
        ["negative", "positive"],
        ["negative", "positive"],
        np.empty((0, 2)),
        np.asarray(reference["training_centroid"])[None, :],
    )
    _rewrite_reference(half, no_held_out)
    found = drift(half, head=HEAD)["sets"][0]
    assert found["top_probability_psi"] is None and found["embedding_shift"] is None
    assert found["held_out_mean_top_probability"] is None
    assert set(found["not_computed"]) == {
        "top-probability PSI",
        "mean top probability gap",
        "embedding shift",
    }
    assert found["largest_share_gap"] is not None
    row = view(half, "drift").iloc[0]
    assert row["top_probability_psi"] is None or np.isnan(row["top_probability_psi"])

    _rewrite_reference(half, None)  # as a version trained before drift references
    result = drift(half, head=HEAD)
    assert "not recorded" in result["reference"]
    assert result["sets"][0]["drifted"] is False and len(result["sets"][0]["not_computed"]) == 4
    with half.engine.begin() as c:  # and before labelled keys: not listed, and said why
        c.execute(text("DELETE FROM labelled_keys"))
    result = drift(half, head=HEAD)
    assert result["sets"] == [] and "recorded no labelled keys" in result["sets_not_listed"]
    with pytest.raises(NotFoundError, match="recorded no labelled keys"):
        label_queue(half, head=HEAD, n=5)
