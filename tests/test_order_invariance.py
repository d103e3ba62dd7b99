"""Same data, same answer: every verb that reads a query gives the same result for the same rows
in another order (a shuffled copy of the table, read without ORDER BY) and with other batch
sizes. Versions: the same blob and byte-identical metrics and baselines (less the baseline's
wall-clock seconds). Vectors: cosine 0.99999 or more to the same text's. Predictions, the
label queue and drift: the same classes, probabilities and signals.

Real weights, real Rotten Tomatoes rows (the session's 600), real SQLite. The tests that embed
text now (``embed``, a sidecar's embed parts, a teacher head filling its transfer cache in two
steps) hold the encoder to batch invariance: a text's vector must not depend on the texts that
share its batch (issue 35).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import count_rows, order_free_metrics
from sqlalchemy import select
from typer.testing import CliRunner

from sqlheads import host, procedures
from sqlheads.cli import app
from sqlheads.compute.columns import text_sha256
from sqlheads.errors import InvalidParameterError
from sqlheads.sidecar.requests import request_embed
from sqlheads.sidecar.worker import Sidecar, SidecarOptions
from sqlheads.store import schema as s
from sqlheads.store.repository import Store
from sqlheads.store.vectors import pack_rows, unpack_rows
from sqlheads.verbs.drift import drift
from sqlheads.verbs.label_queue import label_queue
from sqlheads.verbs.rows import RowSource

DIM = 384  # all-MiniLM-L6-v2
COSINE = 0.99999
# The same rows two ways: the table in key order, and a shuffled copy read as stored.
ORDERED = "SELECT item_key, {columns} FROM reviews ORDER BY item_key"
SHUFFLED = "SELECT item_key, {columns} FROM shuffled"
LOGITS = "SELECT item_key, negative, positive FROM {table}"
EVEN = "CAST(substr(item_key, 4) AS INTEGER) % 2 = 0"  # rt-00042: half the rows by key
FIFTH = "CAST(substr(item_key, 4) AS INTEGER) % 5 = 0"  # a fifth of the rows by key
LABELS = "SELECT item_key, label FROM reviews"
runner = CliRunner()


def query(template: str, columns: str, where: str | None = None) -> str:
    sql = template.format(columns=columns)
    if where is None:
        return sql
    head, _, order = sql.partition(" ORDER BY ")
    return f"{head} WHERE {where}" + (f" ORDER BY {order}" if order else "")


@pytest.fixture(scope="module")
def orders_template(tmp_path_factory, taught_template: Path, copy_sqlite) -> Path:
    """The session's taught sample (tests/conftest.py) with the same reviews and teacher
    logits again in shuffled tables (``shuffled``, ``shuffled_logits``), and its teacher head
    deployed."""
    path = tmp_path_factory.mktemp("orders") / "heads.db"
    store = copy_sqlite(taught_template, path)
    with store.engine.connect() as c:
        reviews = pd.read_sql("SELECT item_key, text, label FROM reviews", c)
        logits = pd.read_sql("SELECT item_key, negative, positive FROM teacher_logits", c)
    reviews.sample(frac=1.0, random_state=1).to_sql("shuffled", store.engine, index=False)
    logits.sample(frac=1.0, random_state=2).to_sql("shuffled_logits", store.engine, index=False)
    host.deploy(store, head="teacher_head", version=1)
    store.engine.dispose()
    return path


@pytest.fixture
def orders(orders_template: Path, copy_database) -> Store:
    return copy_database(orders_template)


def vectors_of(store: Store, set_name: str) -> dict[str, np.ndarray]:
    found = store.require_set(set_name)
    e = s.embeddings.c
    with store.engine.connect() as c:
        rows = c.execute(select(e.item_key, e.vector).where(e.set_id == found.set_id)).all()
    keys = sorted(r.item_key for r in rows)
    stored = {r.item_key: bytes(r.vector) for r in rows}
    return dict(zip(keys, unpack_rows([stored[k] for k in keys], DIM), strict=True))


def min_cosine(one: dict[str, np.ndarray], other: dict[str, np.ndarray]) -> float:
    assert sorted(one) == sorted(other)
    keys = sorted(one)
    a, b = np.stack([one[k] for k in keys]), np.stack([other[k] for k in keys])
    return float((a * b).sum(axis=1).min())  # unit vectors: the cosine


def predictions_of(store: Store, head: str, version: int | None = None) -> dict[str, tuple]:
    """key -> (label, probabilities_json) of the head's (deployed or given) version."""
    model = store.find_model(head, version)
    p = s.predictions.c
    with store.engine.connect() as c:
        rows = c.execute(
            select(p.item_key, p.label, p.probabilities_json).where(p.model_id == model.model_id)
        ).all()
    return {r.item_key: (r.label, r.probabilities_json) for r in rows}


def classes_in(store: Store, head: str, set_name: str) -> dict[str, str]:
    """key -> the class the head's deployed version gave the row of ``set_name``."""
    model, found = store.find_model(head), store.require_set(set_name)
    p = s.predictions.c
    with store.engine.connect() as c:
        return dict(
            c.execute(
                select(p.item_key, p.label).where(
                    p.model_id == model.model_id, p.set_id == found.set_id
                )
            ).all()
        )


def version_of(store: Store, result: dict) -> dict:
    """What must be the same for the same rows: the blob, the metrics (baseline included),
    the parameters and the loss curve."""
    record = store.model_record(result["model_id"])
    return {
        "sha256": record["sha256"],
        "metrics": order_free_metrics(record["metrics_json"]),
        "params_json": record["params_json"],
        "loss_curve_json": record["loss_curve_json"],
        "rows": (record["rows_train"], record["rows_test"]),
    }


# -- embed, and scoring what it embedded -------------------------------------------------------


def test_embed_in_another_order_and_other_batches_gives_the_same_vectors_and_classes(
    orders: Store,
):
    """The set ``reviews`` was embedded in key order with the default batches; here the same
    texts come shuffled, read 64 rows at a time and encoded 7 at a time; then a twentieth of
    them change and are embedded again among the unchanged rows, 50 and 3 at a time."""
    shuffled = host.embed(
        orders, set_name="shuffled", source=query(SHUFFLED, "text"), batch_rows=64, batch_size=7
    )
    assert shuffled["embedded"] == 600 and shuffled["rejected"] == 0
    assert min_cosine(vectors_of(orders, "shuffled"), vectors_of(orders, "reviews")) >= COSINE
    # One head scores both sets: every row keeps its class.
    host.train(orders, head="judge", set_name="reviews", labels=query(ORDERED, "label"))
    for set_name in ("reviews", "shuffled"):
        host.predict(orders, head="judge", set_name=set_name)
    assert classes_in(orders, "judge", "shuffled") == classes_in(orders, "judge", "reviews")
    # Incremental: a changed row is embedded again among other rows; its vector is the one a
    # fresh set of the changed texts holds.
    changed = "CAST(substr(item_key, 4) AS INTEGER) % 20 = 0"
    with orders.engine.begin() as c:
        count = c.exec_driver_sql(
            f"UPDATE shuffled SET text = text || ' all in all.' WHERE {changed}"
        )
    again = host.embed(
        orders, set_name="shuffled", source=query(SHUFFLED, "text"), batch_rows=50, batch_size=3
    )
    assert 0 < count.rowcount == again["embedded"] == 600 - again["unchanged"]
    fresh_source = f"SELECT item_key, text FROM shuffled WHERE {changed} ORDER BY item_key"
    host.embed(orders, set_name="fresh", source=fresh_source)
    fresh = vectors_of(orders, "fresh")
    embedded_again = {k: v for k, v in vectors_of(orders, "shuffled").items() if k in fresh}
    assert min_cosine(embedded_again, fresh) >= COSINE


def test_embed_parts_of_a_shuffled_source_give_a_plain_embeds_vectors(orders: Store):
    """A sidecar's embed parts (key ranges of a shuffled source, batch sizes of their own)
    hold the vectors the plain embed in key order made."""
    request_embed(
        orders,
        set_name="parts",
        source=query(SHUFFLED, "text"),
        parts=3,
        engine="onnx",
        batch_rows=40,
        batch_size=5,
    )
    ran = Sidecar(orders, SidecarOptions(device="cpu", once=True)).run()
    assert [j["state"] for j in ran["jobs"]] == ["done"] * 3
    assert min_cosine(vectors_of(orders, "parts"), vectors_of(orders, "reviews")) >= COSINE


# -- train and predict --------------------------------------------------------------------------


def test_train_and_predict_in_another_order_give_the_same_version_and_predictions(
    orders: Store,
):
    """Labels, the baseline's texts and the keys scored, each in key order or shuffled."""
    made = {}
    for name, template in (("ordered", ORDERED), ("shuffled", SHUFFLED)):
        made[name] = host.train(
            orders,
            head=name,
            set_name="reviews",
            labels=query(template, "label"),
            source=query(template, "text"),
            epochs=5,
            deploy="always",
        )
    assert made["ordered"]["baseline"]["accuracy"] > 0.6  # each text beside its own label
    assert version_of(orders, made["ordered"]) == version_of(orders, made["shuffled"])
    host.predict(orders, head="ordered", set_name="reviews")  # the whole set, by key
    keyed = query(SHUFFLED, "label").replace("item_key, label", "item_key")
    host.predict(orders, head="shuffled", set_name="reviews", keys=keyed)
    assert predictions_of(orders, "ordered") == predictions_of(orders, "shuffled")


# -- a key given twice ----------------------------------------------------------------------

FIRST_KEY = "(SELECT MIN(item_key) FROM reviews)"


def test_a_key_a_source_gives_twice_has_no_text_and_is_not_scored(orders: Store):
    """Which copy's text to read would depend on the order the query returned them in: a key
    given twice has none, as embed rejects it and heads.predict skips it."""
    twice = (
        "SELECT item_key, text FROM shuffled UNION ALL "
        f"SELECT item_key, 'another text' FROM reviews WHERE item_key = {FIRST_KEY}"
    )
    texts = RowSource(orders, twice).texts()
    first = min(texts)
    assert list(texts) == sorted(texts) and len(texts) == 600 and texts[first] is None
    host.distill(
        orders, head="words", set_name="reviews", labels=LABELS, student="tfidf",
        soft_labels=LOGITS.format(table="teacher_logits"), deploy="always",
    )  # fmt: skip
    scored = host.predict(orders, head="words", set_name="reviews", source=twice)
    assert scored["rows"] == 599 and first not in predictions_of(orders, "words")


def test_deploying_a_text_model_scores_no_key_its_source_gives_twice(orders: Store):
    """Deploy re-scores the replaced version's rows through the set's stored source: a key it
    gives twice keeps its earlier prediction until predict, which skips it too."""
    some = f"SELECT item_key, text FROM reviews WHERE {FIFTH} OR item_key = {FIRST_KEY}"
    twice = f"{some} UNION ALL SELECT {FIRST_KEY}, 'another text'"
    host.embed(orders, set_name="some", source=twice)  # stored: the set's source from now on
    for deploy in ("always", "never"):
        host.distill(
            orders, head="words", set_name="some", student="tfidf", deploy=deploy,
            labels=f"SELECT item_key, label FROM reviews WHERE {FIFTH}",
            soft_labels=LOGITS.format(table="teacher_logits") + f" WHERE {FIFTH}",
        )  # fmt: skip
    host.predict(orders, head="words", set_name="some", source=some)
    key = min(predictions_of(orders, "words"))
    host.deploy(orders, head="words", version=2)
    assert key not in predictions_of(orders, "words", 2)
    assert key in predictions_of(orders, "words", 1)


def test_a_labels_query_giving_a_key_twice_is_refused_before_a_teacher_scores(orders: Store):
    """Which of its labels to learn would depend on the order the query returned them in."""
    twice = (
        f"{LABELS} UNION ALL SELECT item_key, 'positive' FROM reviews WHERE item_key = {FIRST_KEY}"
    )
    for verb, arguments in (
        (host.train, {}),
        (host.distill, {"teacher_head": "teacher_head", "student": "tfidf"}),
    ):
        with pytest.raises(InvalidParameterError, match="1 item_key.* more than once") as refused:
            verb(orders, head="twice", set_name="reviews", labels=twice, **arguments)
        assert refused.value.number == 50012
    assert count_rows(orders, s.transfer_rows) == 0 and count_rows(orders, s.teachers) == 0


# -- distill -------------------------------------------------------------------------------------

STUDENTS = {
    "word": {"epochs": 1},
    "head": {"epochs": 5},
    "tfidf": {},
    # fine-tuning MiniLM: two steps of 8 rows, on a fifth of the rows
    "encoder": {"epochs": 1, "batch_size": 8, "max_steps": 2, "max_length": 32, "device": "cpu"},
}


@pytest.mark.parametrize("student", sorted(STUDENTS))
def test_distill_in_another_order_gives_the_same_student(orders: Store, student: str):
    """Gold labels, soft labels and the student's texts, each in key order or shuffled: the
    same student, its metrics and baseline, the same soft labels stored, and the same
    predictions of the rows read in key order or shuffled (a text model reads --source)."""
    where = FIFTH if student == "encoder" else None
    made = {}
    for name, template, logits in (
        ("ordered", ORDERED, "teacher_logits"),
        ("shuffled", SHUFFLED, "shuffled_logits"),
    ):
        soft_labels = LOGITS.format(table=logits) + (f" WHERE {where}" if where else "")
        made[name] = host.distill(
            orders,
            head=name,
            set_name="reviews",
            labels=query(template, "label", where),
            soft_labels=soft_labels + (" ORDER BY item_key" if name == "ordered" else ""),
            source=query(template, "text", where),
            student=student,
            deploy="always",
            **STUDENTS[student],
        )
        if student == "head":  # it reads the set's vectors: the keys come in either order
            keys = query(template, "label", where).replace("item_key, label", "item_key")
            host.predict(orders, head=name, set_name="reviews", keys=keys)
        else:
            texts = query(template, "text", where)
            host.predict(orders, head=name, set_name="reviews", source=texts)
    assert version_of(orders, made["ordered"]) == version_of(orders, made["shuffled"])
    assert predictions_of(orders, "ordered") == predictions_of(orders, "shuffled")
    soft = s.soft_labels.c
    stored = {}
    for name in made:
        with orders.engine.connect() as c:
            stored[name] = dict(
                c.execute(
                    select(soft.item_key, soft.logits)
                    .join(s.teachers)
                    .where(s.teachers.c.name == f"{name}_teacher")
                ).all()
            )
    assert stored["ordered"] == stored["shuffled"]
    assert len(stored["ordered"]) == (120 if where else 600)


def _teach(store: Store, template: str, transfer_rows: int) -> dict:
    """A TF-IDF student (the cheapest that reads transfer rows) of the deployed teacher head,
    on the even keys' labels (the odd ones: unlabelled rows the teacher labels)."""
    return host.distill(
        store,
        head="student",
        set_name="reviews",
        labels=query(template, "label", EVEN),
        source=query(template, "text"),
        student="tfidf",
        teacher_head="teacher_head",
        transfer_rows=transfer_rows,
    )


@pytest.fixture(scope="module")
def taught_both_ways(tmp_path_factory, orders_template: Path, copy_sqlite) -> dict:
    """``--teacher-head`` with 40 transfer rows, the rows read in key order or shuffled, each in
    a store of its own (no shared cache): the stores and the students' versions."""
    found = {}
    for name, template in (("ordered", ORDERED), ("shuffled", SHUFFLED)):
        path = tmp_path_factory.mktemp(f"taught_{name}") / "heads.db"
        store = copy_sqlite(orders_template, path)
        result = _teach(store, template, 40)
        assert result["teacher_rows_scored"]["transfer_rows_scored"] == 40
        found[name] = (path, version_of(store, result), _soft_and_transfer_rows(store))
        store.engine.dispose()
    return found


def _soft_and_transfer_rows(store: Store) -> tuple[dict, list]:
    soft, rows = s.soft_labels.c, s.transfer_rows.c
    with store.engine.connect() as c:
        labels = dict(c.execute(select(soft.item_key, soft.logits)).all())
        transfer = c.execute(
            select(rows.ordinal, rows.origin_key, rows.how, rows.text, rows.logits).order_by(
                rows.ordinal
            )
        ).all()
    return labels, [tuple(r) for r in transfer]


def test_distill_from_a_teacher_head_in_another_order_gives_the_same_student(
    taught_both_ways: dict,
):
    """The teacher scores the student's rows and builds and scores transfer rows from them:
    the same soft labels, transfer rows and student whatever order the rows came in."""
    _, ordered, ordered_rows = taught_both_ways["ordered"]
    _, shuffled, shuffled_rows = taught_both_ways["shuffled"]
    assert ordered == shuffled
    assert ordered_rows == shuffled_rows and len(ordered_rows[1]) == 40


def test_a_transfer_cache_filled_in_two_steps_holds_what_one_step_makes(
    taught_both_ways: dict, orders_template: Path, copy_database
):
    """The teacher scores transfer rows as they are asked for: 40 then 120 in one store, 120 at
    once in another. The rows and their soft labels are the same, so every student of the
    teacher learns the same thing whatever order its cache was filled in."""
    steps = copy_database(taught_both_ways["ordered"][0], "steps.db")
    once = copy_database(orders_template, "once.db")
    assert _teach(steps, ORDERED, 120)["teacher_rows_scored"]["transfer_rows_cached"] == 40
    assert _teach(once, ORDERED, 120)["teacher_rows_scored"]["transfer_rows_scored"] == 120
    filled, made = _soft_and_transfer_rows(steps)[1], _soft_and_transfer_rows(once)[1]
    assert [r[:4] for r in filled] == [r[:4] for r in made] and len(made) == 120
    a = unpack_rows([r[4] for r in filled], 2)
    b = unpack_rows([r[4] for r in made], 2)
    assert np.array_equal(a.argmax(axis=1), b.argmax(axis=1))
    assert float(np.abs(a - b).max()) <= 1e-5


# -- SQL Server's doors: the same rows in any order, the embedded host's answer ----------------


def _frame(store: Store, *columns: str) -> pd.DataFrame:
    """The rows T-SQL would hand Python: the sample's keys with their label, text, stored
    vector and the teacher's logits, in key order."""
    with store.engine.connect() as c:
        rows = pd.read_sql(
            "SELECT r.item_key, r.label, r.text, t.negative, t.positive FROM reviews AS r "
            "JOIN teacher_logits AS t ON t.item_key = r.item_key ORDER BY r.item_key",
            c,
        )
    vectors = store.vectors_for_keys(store.require_set("reviews").set_id, list(rows["item_key"]))
    rows["vector"] = [vectors[k] for k in rows["item_key"]]
    rows["logits"] = pack_rows(rows[["negative", "positive"]].to_numpy(np.float32))
    return rows[list(columns)]


def _shuffled(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sample(frac=1.0, random_state=4).reset_index(drop=True)


def test_sql_servers_train_and_distill_give_the_embedded_hosts_version_in_any_order(
    orders: Store,
):
    """heads.train and heads.distill hand Python their rows in whatever order the server
    reads them: the version is the one the embedded host makes of the same rows."""
    trained = host.train(
        orders, head="embedded", set_name="reviews", labels=LABELS, epochs=5, deploy="never"
    )
    distilled = host.distill(
        orders, head="embedded", set_name="reviews", labels=LABELS, student="tfidf",
        soft_labels=LOGITS.format(table="teacher_logits"), deploy="never",
    )  # fmt: skip
    frame = _frame(orders, "item_key", "label", "vector", "text", "logits")
    for rows in (frame, _shuffled(frame)):
        train_row = procedures.train(rows.drop(columns="logits"), dim=DIM, epochs=5).iloc[0]
        assert train_row["sha256"] == version_of(orders, trained)["sha256"]
        assert (
            order_free_metrics(train_row["metrics_json"]) == version_of(orders, trained)["metrics"]
        )
        distill_row = procedures.distill(
            rows, student="tfidf", teacher_classes_json='["negative", "positive"]', dim=DIM
        ).iloc[0]
        assert distill_row["sha256"] == version_of(orders, distilled)["sha256"]
        assert (
            order_free_metrics(distill_row["metrics_json"])
            == version_of(orders, distilled)["metrics"]
        )


def test_sql_servers_teacher_head_scores_what_the_embedded_host_caches_in_any_order(
    taught_both_ways: dict, copy_database
):
    """heads.distill @teacher_head: heads.teach_run's soft labels and transfer rows for the
    rows in key order or shuffled are those the embedded host stored and cached."""
    store = copy_database(taught_both_ways["ordered"][0])
    labels, cached = taught_both_ways["ordered"][2]
    teacher = store.find_model("teacher_head")
    encoder = store.encoder(teacher.encoder_id)
    onnx, tokenizer_json = store.encoder_bytes(encoder.encoder_id)
    frame = _frame(store, "item_key", "text", "label", "vector")
    frame["label"] = [
        label if int(key[3:]) % 2 == 0 else None
        for key, label in zip(frame["item_key"], frame["label"], strict=True)
    ]
    frame["teacher_text_sha256"] = [text_sha256(t) for t in frame["text"]]
    frame = frame.rename(columns={"vector": "teacher_vector"})
    blob = store.model_blob(teacher.model_id)
    arguments = dict(
        teacher_blob=blob, teacher_sha256=teacher.sha256, teacher_kind="head",
        encoder_sha256=encoder.sha256, encoder_onnx=onnx, tokenizer_json=tokenizer_json,
        dim=DIM, max_length=encoder.max_length, student_tokenizer_json=tokenizer_json,
        student_encoder_onnx=onnx, transfer_rows=40,
    )  # fmt: skip
    for rows in (frame, _shuffled(frame)):
        out = procedures.teach(rows, **arguments)
        own, made = out[out["transfer"] == 0], out[out["transfer"] == 1]
        assert dict(zip(own["item_key"], own["logits"], strict=True)) == labels
        assert [(r.origin_key, r.text, r.logits) for r in made.itertuples(index=False)] == [
            (origin, text, logits) for _, origin, _, text, logits in cached
        ]


# -- the label queue and drift ----------------------------------------------------------------


def test_the_label_queue_and_drift_do_not_depend_on_the_order_rows_came_in(
    orders_template: Path, copy_database
):
    """A head trained on half the rows scores the other half: in one store everything is read
    in key order, in the other shuffled (the keys scored too, so the predictions are written in
    another order). The queue and drift's signals are the same."""
    found = {}
    for name, template in (("ordered", ORDERED), ("shuffled", SHUFFLED)):
        store = copy_database(orders_template, f"{name}.db")
        host.train(
            store,
            head="half",
            set_name="reviews",
            labels=query(template, "label", EVEN),
            epochs=5,
            deploy="always",
        )
        keys = query(template, "label").replace("item_key, label", "item_key")
        host.predict(store, head="half", set_name="reviews", keys=keys)
        queue = label_queue(store, head="half", n=40)
        drifted = drift(store, head="half")
        for entry in drifted["sets"]:  # when, not what
            entry.pop("first_predicted_at"), entry.pop("last_predicted_at")
        found[name] = (json.dumps(queue, sort_keys=True), json.dumps(drifted, sort_keys=True))
    assert found["ordered"] == found["shuffled"]
    queue = json.loads(found["ordered"][0])
    assert len(queue["rows"]) == 40
    assert json.loads(found["ordered"][1])["sets"][0]["rows_scored"] == 300


# -- the command line: the same 600 reviews three ways -----------------------------------------


def test_cli_embeds_the_same_vectors_and_classes_in_any_order_and_batch_size(
    tmp_path: Path, rt_sample: pd.DataFrame
):
    """Issue 35's check, as a user runs it: 600 Rotten Tomatoes reviews embedded with the
    default batches, shuffled with --batch-size 7, and one at a time; every row's three vectors
    within cosine 0.99999, and one head gives each row the same class in all three sets."""
    url = f"sqlite:///{tmp_path / 'three.db'}"
    store = Store.from_url(url)

    def cli(*args: str) -> dict:
        result = runner.invoke(app, ["--url", url, "--json", *args])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    cli("init")
    rt_sample.to_sql("reviews", store.engine, index=False)
    rt_sample.sample(frac=1.0, random_state=3).to_sql("shuffled", store.engine, index=False)
    ways = {
        "default": ("SELECT item_key, text FROM reviews",),
        "seven": ("SELECT item_key, text FROM shuffled", "--batch-size", "7"),
        "one": ("SELECT item_key, text FROM reviews", "--batch-size", "1"),
    }
    for name, (source, *batches) in ways.items():
        assert cli("embed", "--set", name, "--source", source, *batches)["embedded"] == 600
    cli("train", "--head", "judge", "--set", "default", "--labels", LABELS)
    classes = {}
    for name in ways:
        cli("predict", "--head", "judge", "--set", name)
        classes[name] = classes_in(store, "judge", name)
    default = vectors_of(store, "default")
    for name in ("seven", "one"):
        assert min_cosine(vectors_of(store, name), default) >= COSINE, name
        assert classes[name] == classes["default"], name
