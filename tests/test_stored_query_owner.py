"""A set's stored source query runs only for the user who stored it (the third SQL Server audit,
point 1), on SQLite, where it is the OS user: embed records its author; predict, distill and a
teacher request read the text through it for that author alone, and anyone else passes a source
of their own or gets 50071 before the stored text runs; train's baseline and a deploy's
re-scoring, which can do without the text, skip it and say why. Real SQLite, the real MiniLM
encoder, real reviews. The SQL Server half (heads.set_source) is in the policy and live tests."""

from __future__ import annotations

import getpass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sqlalchemy import update

from sqlheads import host
from sqlheads.errors import StoredQueryOwnerError
from sqlheads.sidecar.requests import request_teacher
from sqlheads.store import schema as s
from sqlheads.store.jobs import JobQueue
from sqlheads.store.repository import Store

SOURCE = "SELECT item_key, text FROM reviews"
LABELS = "SELECT item_key, label FROM reviews"
SOFT = "SELECT item_key, negative, positive FROM teacher_logits"


@pytest.fixture(scope="module")
def owned_template(tmp_path_factory, rt_sample: pd.DataFrame) -> Path:
    """60 real reviews (30 a class) embedded into set 'reviews' by this OS user, and a
    teacher's logits for them in a table of the caller's."""
    store = Store.from_url(f"sqlite:///{tmp_path_factory.mktemp('owned') / 'heads.db'}")
    host.init(store)
    tiny = pd.concat(g.head(30) for _, g in rt_sample.groupby("label")).reset_index(drop=True)
    tiny.to_sql("reviews", store.engine, index=False)
    rng = np.random.default_rng(0)
    sign = np.where(tiny["label"] == "positive", 1.0, -1.0)
    logits = pd.DataFrame(
        {
            "item_key": tiny["item_key"],
            "negative": -sign + rng.normal(0, 0.3, len(tiny)),
            "positive": sign + rng.normal(0, 0.3, len(tiny)),
        }
    )
    logits.to_sql("teacher_logits", store.engine, index=False)
    host.embed(store, set_name="reviews", source=SOURCE)
    store.engine.dispose()
    return Path(store.engine.url.database)


@pytest.fixture
def owned(owned_template: Path, copy_database) -> Store:
    """A copy of owned_template of its own (built once, for the module)."""
    return copy_database(owned_template)


def _stored_by(store: Store, user: str | None) -> None:
    with store.engine.begin() as c:
        c.execute(update(s.embedding_sets).values(source_user=user))


def test_embed_records_the_author_of_the_source_query(owned: Store) -> None:
    found = owned.require_set("reviews")
    assert (found.source_query, found.source_user) == (SOURCE, getpass.getuser())


@pytest.mark.parametrize("author", ["mallory", None], ids=["another user", "no author"])
def test_another_users_stored_query_is_refused_before_it_runs(owned: Store, author) -> None:
    """A stored query of another user (or of nobody known: stored before revision 0007) is
    not run: predict, distill and a teacher request refuse with 50071, naming no one."""
    host.distill(
        owned, head="sent", set_name="reviews", labels=LABELS, student="word",
        soft_labels=SOFT, deploy="always", epochs=2,
    )  # fmt: skip
    _stored_by(owned, author)
    attempts = {
        "predict": lambda: host.predict(owned, head="sent", set_name="reviews"),
        "distill": lambda: host.distill(
            owned,
            head="sent",
            set_name="reviews",
            labels=LABELS,
            student="word",
            teacher="sent_teacher",
            epochs=2,
        ),
        "request_teacher": lambda: request_teacher(
            owned, head="sent", set_name="reviews", labels=LABELS
        ),
    }
    for verb, attempt in attempts.items():
        with pytest.raises(StoredQueryOwnerError) as refused:
            attempt()
        assert refused.value.number == 50071, verb
        assert "--source" in str(refused.value) and "mallory" not in str(refused.value), verb
    assert JobQueue(owned).listing().empty
    # With a source of one's own, each goes ahead.
    assert host.predict(owned, head="sent", set_name="reviews", source=SOURCE)["rows"] == 60
    again = host.distill(
        owned, head="sent", set_name="reviews", labels=LABELS, student="word",
        teacher="sent_teacher", source=SOURCE, epochs=2,
    )  # fmt: skip
    assert again["version"] == 2
    queued = request_teacher(owned, head="sent", set_name="reviews", labels=LABELS, source=SOURCE)
    assert JobQueue(owned).get(queued["job_id"]).state == "queued"


def test_the_author_reads_through_the_stored_query(owned: Store) -> None:
    host.distill(
        owned, head="sent", set_name="reviews", labels=LABELS, student="word",
        soft_labels=SOFT, deploy="always", epochs=2,
    )  # fmt: skip
    assert host.predict(owned, head="sent", set_name="reviews")["rows"] == 60


def test_what_can_do_without_the_text_skips_another_users_query(owned: Store) -> None:
    """train fits its TF-IDF baseline through the stored query only for its author; a deploy
    of a text model re-scores through it only for its author, else keeps the earlier
    predictions until predict (as for a set with no stored query)."""
    _stored_by(owned, "mallory")
    trained = host.train(owned, head="h", set_name="reviews", labels=LABELS, epochs=2)
    assert trained["baseline"]["accuracy"] is None
    skipped = trained["baseline"]["skipped"]
    assert "another user" in skipped and "--source" in skipped
    _stored_by(owned, getpass.getuser())
    for _ in range(2):
        host.distill(
            owned, head="w", set_name="reviews", labels=LABELS, student="word",
            soft_labels=SOFT, teacher="w_teacher", deploy="never", epochs=2,
        )  # fmt: skip
    host.deploy(owned, head="w", version=1)
    host.predict(owned, head="w", set_name="reviews")
    _stored_by(owned, "mallory")
    deployed = host.deploy(owned, head="w", version=2)
    assert (deployed["rows_rescored"], deployed["rows_kept_until_predict"]) == (0, 60)
