"""The baseline every trained or distilled version is shown beside: TF-IDF + logistic regression.

Fitted on exactly the training rows of the version and scored on exactly its held-out rows, so
the two figures answer one question: does the model beat a bag of words on this data? The
features are bounded (word 1-2 grams seen in at least two texts, at most ``MAX_FEATURES`` of
them, sublinear term frequency) so that the baseline stays cheap beside the model it judges.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

# Bounded features: IMDB's 20,000 training reviews hold ~1.3M word 1-2 grams; the 100,000 most
# frequent keep the accuracy (bench students) at a fraction of the memory.
MAX_FEATURES = 100_000
NGRAMS = (1, 2)
MIN_DF = 2
C = 4.0  # the seed baseline's regularisation (bench/accuracy.py)
NO_TEXT = "no text reached the training call: the baseline reads the rows' text"


@dataclass(frozen=True)
class Baseline:
    """The baseline's held-out figures, or why it was not fitted (``skipped``)."""

    accuracy: float | None = None
    macro_f1: float | None = None
    seconds: float | None = None
    features: int | None = None
    skipped: str | None = None

    def as_metrics(self) -> dict[str, float | int | str | None]:
        """The record stored in a version's ``metrics_json`` under ``baseline``."""
        return {k: v for k, v in asdict(self).items() if v is not None}


def skipped(reason: str) -> Baseline:
    return Baseline(skipped=reason)


def tfidf_features(max_features: int = MAX_FEATURES, min_df: int | float = MIN_DF):
    """The bounded TF-IDF vectoriser the baseline (and the TF-IDF student) read text with."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    return TfidfVectorizer(
        ngram_range=NGRAMS,
        min_df=min_df,
        max_features=max_features,
        sublinear_tf=True,
        dtype=np.float32,
    )


def fit_baseline(
    train_texts: Sequence[str],
    train_labels: Sequence[str],
    test_texts: Sequence[str],
    test_labels: Sequence[str],
    classes: Sequence[str],
) -> Baseline:
    """Fit TF-IDF + logistic regression on the training rows; its figures on the test rows.

    Skipped (with the reason) when the training rows hold fewer than two classes or no test
    row: there is nothing a classifier could be compared on.
    """
    from sklearn.linear_model import LogisticRegression

    from sqlheads.engine.evaluation import classification_metrics

    seen = sorted({str(v) for v in train_labels})
    if len(seen) < 2:
        return skipped(f"the training rows hold one class ({seen[0] if seen else 'none'})")
    if len(test_texts) == 0:
        return skipped("no held-out rows to score it on")
    started = time.perf_counter()
    # min_df 2 would leave a handful of short texts with no feature at all
    vectorizer = tfidf_features(min_df=MIN_DF if len(train_texts) >= 1_000 else 1)
    X_train = vectorizer.fit_transform([str(t) for t in train_texts])
    model = LogisticRegression(C=C, max_iter=1_000).fit(X_train, [str(v) for v in train_labels])
    predicted = model.predict(vectorizer.transform([str(t) for t in test_texts]))
    metrics = classification_metrics([str(v) for v in test_labels], predicted, list(classes))
    return Baseline(
        accuracy=metrics["accuracy"],
        macro_f1=metrics["macro_f1"],
        seconds=time.perf_counter() - started,
        features=len(vectorizer.vocabulary_),
    )


def baseline_for(
    texts: Sequence[object] | None,
    labels: np.ndarray,
    train_rows: np.ndarray,
    test_rows: np.ndarray,
    classes: Sequence[str],
    unreachable: str,
) -> Baseline:
    """The baseline on the model's own rows (``train_rows``, ``test_rows``: masks or indices
    into ``texts`` and ``labels``); rows without a gold label or a text are left out of its
    training. ``texts`` None: skipped, saying ``unreachable``."""
    if texts is None:
        return skipped(unreachable)
    texts = np.asarray(list(texts), dtype=object)
    usable = np.array(
        [t is not None and t == t and bool(str(t).strip()) for t in texts], dtype=bool
    ) & np.array([v is not None and v == v and str(v) != "" for v in labels], dtype=bool)
    train = _mask(train_rows, len(texts)) & usable
    test = _mask(test_rows, len(texts))
    if not usable[test].all():
        missing = int((~usable[test]).sum())
        return skipped(f"{missing} held-out row(s) have no text in the source query")
    return fit_baseline(texts[train], labels[train], texts[test], labels[test], classes)


def _mask(rows: np.ndarray, size: int) -> np.ndarray:
    rows = np.asarray(rows)
    if rows.dtype == bool:
        return rows
    mask = np.zeros(size, dtype=bool)
    mask[rows] = True
    return mask
