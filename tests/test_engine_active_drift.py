"""The engine's halves of the label queue and drift, on small arrays: margins, the diverse pick,
the drift reference, PSI and the verdict."""

from __future__ import annotations

import numpy as np
import pytest

from sqlheads.engine.loop import drift
from sqlheads.engine.loop.active import DiverseQueue, margins
from sqlheads.errors import InvalidParameterError


def test_margin_is_the_top_probability_minus_the_runner_up() -> None:
    found = margins(np.array([[0.7, 0.2, 0.1], [0.4, 0.4, 0.2], [0.05, 0.9, 0.05]]))
    assert found == pytest.approx([0.5, 0.0, 0.85])


def test_the_diverse_queue_passes_over_near_duplicates_of_a_picked_row() -> None:
    rng = np.random.default_rng(0)
    distinct = rng.standard_normal((6, 16))
    # rows 0-3 are one text (three copies of row 0, a hair apart); the rest differ
    vectors = np.vstack([distinct[0], distinct[0] + 1e-3, distinct[0] - 1e-3, distinct[1:]])
    picked = DiverseQueue(n=4, max_cosine=0.9).select(vectors)
    assert picked.tolist() == [0, 3, 4, 5]
    # when too few rows are far enough apart, the passed-over ones fill the rest, in order
    assert DiverseQueue(n=7).select(vectors).tolist() == [0, 3, 4, 5, 6, 7, 1]
    # a row without a vector cannot be compared: it is taken in its turn
    known = np.array([True, False, True, True, True, True, True, True])
    assert DiverseQueue(n=3).select(vectors, known).tolist() == [0, 1, 3]


def test_max_cosine_one_turns_the_look_off_even_for_copies() -> None:
    """A vector's cosine with itself can round above 1 in float32: copies must still be taken."""
    rng = np.random.default_rng(7)  # this vector's unit dot product with itself is 1 + 2**-23
    one = rng.standard_normal(384).astype(np.float32)
    copies = np.vstack([one] * 5 + [rng.standard_normal((3, 384))])
    assert DiverseQueue(n=8, max_cosine=1.0).select(copies).tolist() == list(range(8))


@pytest.mark.parametrize(("n", "cosine"), [(0, 0.9), (3, 0.0), (3, 1.5)])
def test_the_diverse_queue_refuses_out_of_range_parameters(n: int, cosine: float) -> None:
    with pytest.raises(InvalidParameterError) as refused:
        DiverseQueue(n=n, max_cosine=cosine)
    assert refused.value.number == 50012 and "pass a value" in refused.value.message


def test_bins_match_the_views_bins() -> None:
    """``min(CAST(score * 20 AS INTEGER), 19)``: 0.05 opens bin 1, 1.0 falls in the last."""
    counts = drift.bin_counts([0.0, 0.0499, 0.05, 0.5, 0.999, 1.0])
    assert counts[[0, 1, 10, 19]].tolist() == [2, 1, 1, 2] and counts.sum() == 6


def test_psi_is_zero_on_the_reference_itself_and_grows_with_a_shift() -> None:
    rng = np.random.default_rng(1)
    held_out = rng.uniform(0.5, 1.0, 2000)
    expected = drift.smoothed_shares(drift.bin_counts(held_out))
    assert drift.psi(expected, drift.bin_counts(held_out)) == pytest.approx(0.0, abs=1e-12)
    same = drift.psi(expected, drift.bin_counts(rng.uniform(0.5, 1.0, 2000)))
    shifted = drift.psi(expected, drift.bin_counts(rng.uniform(0.5, 0.7, 2000)))
    assert same < 0.05 < 1.0 < shifted


def _reference(held_out_rows: int) -> dict:
    rng = np.random.default_rng(2)
    vectors = rng.standard_normal((40, 8)) + 3.0
    probabilities = rng.dirichlet([2, 2], held_out_rows)
    return drift.reference(
        ["negative", "positive"],
        ["negative"] * 30 + ["positive"] * 10,
        probabilities,
        vectors,
        vectors[:held_out_rows],
    )


def test_the_reference_records_what_the_views_read() -> None:
    found = _reference(12)
    assert found["training_class_shares"] == {"negative": 0.75, "positive": 0.25}
    assert found["held_out_rows"] == 12 and len(found["top_probability_shares"]) == 20
    assert sum(found["top_probability_shares"]) == pytest.approx(1.0, abs=1e-5)
    assert len(found["training_centroid"]) == 8 and found["held_out_spread"] > 0
    assert found["min_rows"] == drift.MIN_ROWS and found["limits"]["psi"] == drift.PSI_LIMIT
    # the training rows' own centroid has shift 0
    centroid = np.asarray(found["training_centroid"])
    assert drift.embedding_shift(found, centroid) == pytest.approx(0.0, abs=1e-9)


def test_a_reference_without_held_out_rows_names_what_it_cannot_compute() -> None:
    found = _reference(0)
    for missing in ("held_out_mean_top_probability", "top_probability_shares", "held_out_spread"):
        assert missing not in found
    assert drift.embedding_shift(found, np.ones(8)) is None
    verdict = drift.judge(found, 500, psi=None, confidence_gap=None, share_gap=0.5, shift=None)
    assert verdict.drifted and verdict.reasons == ["largest class share gap 0.500 > 0.15"]
    assert set(verdict.not_computed) == {
        "top-probability PSI",
        "mean top probability gap",
        "embedding shift",
    }


def test_too_few_rows_or_no_reference_are_not_judged() -> None:
    found = _reference(12)
    few = drift.judge(found, 1, psi=9.0, confidence_gap=0.9, share_gap=0.9, shift=9.0)
    assert not few.drifted and few.reasons == [
        f"not judged: 1 new row(s), fewer than {drift.MIN_ROWS}"
    ]
    none = drift.judge(None, 1000, psi=None, confidence_gap=None, share_gap=None, shift=None)
    assert not none.drifted and "no drift reference" in none.reasons[0]
    assert len(none.not_computed) == 4
