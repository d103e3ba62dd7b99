"""Is a set a version scores still the kind of data it was trained on?

At training time a version records its *reference* (:func:`reference`, kept in its metrics
JSON under ``drift``): the training labels' class shares, the held-out rows' mean top
probability and their top probabilities' histogram, the training rows' centroid and the
held-out rows' spread around it. Later, each set the version scored is compared with it:

- the predicted class shares against the training labels' (the largest gap);
- the mean top probability against the held-out rows' (a head meeting unfamiliar text is
  usually less sure of it, sometimes more);
- the population stability index (PSI) of the top probability over :data:`SCORE_BINS` bins of
  [0, 1] against the held-out histogram, both smoothed by :data:`SMOOTHING` rows a bin, judged
  above the PSI that two samples of their sizes show by chance (:func:`psi_noise`);
- the embedding shift: one minus the cosine between the set's centroid and the training rows',
  over the held-out rows' own spread (one minus the cosine of each held-out row with the
  training centroid, averaged), so that encoders whose vectors crowd or spread compare alike.

The first three are computed by SQL (the ``drift`` view, which cannot read vectors), the shift
by :func:`embedding_shift` from the stored vectors; :func:`judge` flags a set when any of them
passes its limit. The limits were measured by ``bench/drift.py`` (docs/benchmarks.md): a Rotten
Tomatoes head scoring unseen Rotten Tomatoes rows against the same head scoring IMDB.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

SCORE_BINS = 20  # as the report's score histogram: the top probability in steps of 0.05
SMOOTHING = 0.5  # rows added to every bin of both histograms: no empty bin, no log of 0
MIN_ROWS = 100  # fewer new rows than this are not judged: their histogram is mostly noise
# Limits, measured by bench/drift.py (docs/benchmarks.md, "drift"): a Rotten Tomatoes head on
# subsets of 100 to 1,000 unseen RT rows against the same head on IMDB reviews.
# - The embedding shift separates them: unseen RT rows gave at most 0.062 (100 rows), IMDB at
#   least 0.231; the limit sits between, well above the first.
# - Two samples of one distribution of n and m rows differ by a PSI of about (bins - 1) *
#   (1/n + 1/m) (a chi-square's mean over the rows): with 40 held-out rows that is ~0.5 however
#   many rows are scored. The PSI limit is this much over that noise (psi_noise).
# - The top probability and the class shares moved little on IMDB (RT's largest: 0.031 and
#   0.120; IMDB's largest: 0.049 and 0.27): their limits only flag a large change.
PSI_LIMIT = 0.15
CONFIDENCE_LIMIT = 0.08  # |mean top probability - the held-out rows'|
SHARE_LIMIT = 0.15  # the largest |predicted share - training share| of a class
SHIFT_LIMIT = 0.1  # (1 - cos(set centroid, training centroid)) / held-out spread
DIGITS = 6  # decimals kept in the metrics JSON


def bin_counts(top_probabilities: Sequence[float]) -> np.ndarray:
    """Rows per bin of the top probability, bins of width 1/:data:`SCORE_BINS` (1.0 in the
    last), as the view bins ``predictions.score``."""
    top = np.asarray(top_probabilities, dtype=np.float64)
    bins = np.minimum((top * SCORE_BINS).astype(np.int64), SCORE_BINS - 1)
    return np.bincount(np.maximum(bins, 0), minlength=SCORE_BINS)


def smoothed_shares(counts: np.ndarray) -> np.ndarray:
    counts = np.asarray(counts, dtype=np.float64)
    return (counts + SMOOTHING) / (counts.sum() + SMOOTHING * len(counts))


def psi(reference_shares: Sequence[float], counts: np.ndarray) -> float:
    """Population stability index of a set's histogram ``counts`` against the reference's
    (already smoothed) shares: sum over bins of (actual - expected) * ln(actual / expected)."""
    expected = np.asarray(reference_shares, dtype=np.float64)
    actual = smoothed_shares(counts)
    return float(np.sum((actual - expected) * np.log(actual / expected)))


def psi_noise(rows: int, held_out_rows: int) -> float:
    """The PSI two samples of one distribution show by chance, about: (bins - 1) * (1/n + 1/m).
    The view adds the same to the recorded limit."""
    return (SCORE_BINS - 1) * (1.0 / rows + 1.0 / held_out_rows)


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


def reference(
    classes: Sequence[str],
    training_labels: Sequence[str],
    held_out_probabilities: np.ndarray,
    training_vectors: np.ndarray | None = None,
    held_out_vectors: np.ndarray | None = None,
) -> dict[str, Any]:
    """What a version records at training time for :mod:`drift` (JSON-ready).

    ``held_out_probabilities``: the version's class probabilities on its held-out rows (none:
    an empty array); the vectors are None for a model that reads text, whose shift is then
    not recorded.
    """
    labels = np.asarray([str(v) for v in training_labels])
    found: dict[str, Any] = {
        # How the views compare a set with this reference: recorded with it, so that SQL
        # restates none of these numbers.
        "score_bins": SCORE_BINS,
        "smoothing": SMOOTHING,
        "min_rows": MIN_ROWS,
        "limits": {
            "psi": PSI_LIMIT,
            "confidence": CONFIDENCE_LIMIT,
            "share": SHARE_LIMIT,
            "shift": SHIFT_LIMIT,
        },
        "training_rows": len(labels),
        "training_class_shares": {
            str(c): round(float(np.mean(labels == str(c))) if len(labels) else 0.0, DIGITS)
            for c in classes
        },
        "held_out_rows": len(held_out_probabilities),
    }
    if len(held_out_probabilities):
        top = np.asarray(held_out_probabilities, dtype=np.float64).max(axis=1)
        found["held_out_mean_top_probability"] = round(float(top.mean()), DIGITS)
        found["top_probability_shares"] = [
            round(float(v), DIGITS) for v in smoothed_shares(bin_counts(top))
        ]
    if training_vectors is not None and len(training_vectors):
        centroid = np.asarray(training_vectors, dtype=np.float64).mean(axis=0)
        found["training_centroid"] = [round(float(v), DIGITS) for v in centroid]
        if held_out_vectors is not None and len(held_out_vectors):
            cosines = _unit(np.asarray(held_out_vectors, dtype=np.float64)) @ _unit(centroid)
            found["held_out_spread"] = round(float(np.mean(1.0 - cosines)), DIGITS)
    return found


def embedding_shift(found: dict[str, Any], centroid: np.ndarray) -> float | None:
    """(1 - cosine(``centroid``, the training centroid)) / the held-out spread; None when the
    version recorded no training centroid or held-out spread."""
    if "training_centroid" not in found or not found.get("held_out_spread"):
        return None
    training = _unit(np.asarray(found["training_centroid"], dtype=np.float64))
    cosine = float(_unit(np.asarray(centroid, dtype=np.float64)) @ training)
    return (1.0 - cosine) / float(found["held_out_spread"])


def share_gap(found: dict[str, Any], predicted_shares: dict[str, float]) -> float | None:
    """The largest |predicted share - training share| over the version's classes."""
    training = found.get("training_class_shares")
    if not training:
        return None
    return max(abs(predicted_shares.get(c, 0.0) - share) for c, share in training.items())


@dataclass
class Verdict:
    """Whether a set drifted, which signals say so, and what could not be computed."""

    drifted: bool
    reasons: list[str] = field(default_factory=list)
    not_computed: list[str] = field(default_factory=list)


def judge(
    found: dict[str, Any] | None,
    rows: int,
    *,
    psi: float | None,
    confidence_gap: float | None,
    share_gap: float | None,
    shift: float | None,
) -> Verdict:
    """Flag a set one of whose signals passes the limit its version recorded (``found``, its
    reference). A set under the recorded minimum of rows is not judged, and a signal the
    version did not record is named, not guessed."""
    limits = (found or {}).get("limits", {})
    named = {
        "top-probability PSI": (psi, "psi"),
        "mean top probability gap": (confidence_gap, "confidence"),
        "largest class share gap": (share_gap, "share"),
        "embedding shift": (shift, "shift"),
    }
    verdict = Verdict(drifted=False)
    verdict.not_computed = [
        name for name, (value, limit) in named.items() if value is None or limit not in limits
    ]
    minimum = (found or {}).get("min_rows")
    if minimum is None:
        verdict.reasons.append("not judged: the version recorded no drift reference")
        return verdict
    if rows < minimum:
        verdict.reasons.append(f"not judged: {rows} new row(s), fewer than {minimum}")
        return verdict
    allowed = dict(limits)
    if psi is not None and "psi" in allowed:
        allowed["psi"] = round(allowed["psi"] + psi_noise(rows, found["held_out_rows"]), 3)
    for name, (value, limit) in named.items():
        if value is not None and limit in allowed and value > allowed[limit]:
            verdict.reasons.append(f"{name} {value:.3f} > {allowed[limit]}")
    verdict.drifted = bool(verdict.reasons)
    return verdict
