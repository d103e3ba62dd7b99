"""Which unlabelled rows a person should label next: the least certain first, no near-twins.

Uncertainty is the *margin*: the top class probability minus the runner-up's. A row the head
cannot decide between two classes (margin near 0) teaches it more, once labelled, than one it
is sure of. The store ranks rows by margin in SQL (the ``label_queue`` view); what SQL cannot
do is look at the vectors, and ranking by margin alone picks runs of near-identical rows (the
same review posted twice, one template filled in a hundred times), where labelling one says
what the others are. :class:`DiverseQueue` walks the candidates in margin order and passes over
a row whose vector is too close (cosine) to one already picked.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sqlheads.engine.constraints import MISSING, Interval, Params, param

# Two sentence vectors (MiniLM, MPNet) this close are paraphrases or copies of one text;
# measured on Rotten Tomatoes by bench/active.py, which also compares looser settings.
MAX_COSINE = 0.9
MAX_ROWS = 100_000  # one queue; a person labels far fewer in a round


def margins(probabilities: np.ndarray) -> np.ndarray:
    """Top class probability minus the runner-up's, per row (the view's ``margin``)."""
    probabilities = np.asarray(probabilities, dtype=np.float64)
    if probabilities.ndim != 2 or probabilities.shape[1] < 2:
        raise ValueError("margins need one row of at least two class probabilities per row")
    top_two = np.sort(probabilities, axis=1)[:, -2:]
    return top_two[:, 1] - top_two[:, 0]


@dataclass(frozen=True)
class DiverseQueue(Params):
    """Pick ``n`` rows in margin order, skipping near-duplicates of rows already picked.

    ``max_cosine``: a candidate whose cosine with a picked row is above this is passed over
    (1 turns the look off: margin order alone). When fewer than ``n`` candidates are far
    enough apart, the passed-over ones fill the rest in margin order: the queue is never
    shorter than the rows it was given allow.
    """

    n: int = param(MISSING, Interval(int, 1, MAX_ROWS))
    max_cosine: float = param(MAX_COSINE, Interval(float, 0, 1, "right"))

    def select(self, vectors: np.ndarray, has_vector: np.ndarray | None = None) -> np.ndarray:
        """Positions of the picked rows among candidates given in margin order (best first).

        ``vectors``: one row per candidate (any scale: they are normalised here);
        ``has_vector`` marks the rows whose vector is known: a row without one (its row of
        ``vectors`` is ignored) cannot be compared, and is taken in its turn.
        """
        unit = np.array(vectors, dtype=np.float32, ndmin=2)
        count = len(unit)
        known = np.ones(count, dtype=bool) if has_vector is None else np.asarray(has_vector, bool)
        norms = np.linalg.norm(unit, axis=1, keepdims=True)
        unit = np.divide(unit, norms, out=np.zeros_like(unit), where=norms > 0)
        chosen = np.empty((min(self.n, count), unit.shape[1]), dtype=np.float32)
        picked: list[int] = []
        passed: list[int] = []
        for position in range(count):
            if len(picked) == self.n:
                break
            closest = -1.0  # no picked row yet, or no vector to compare
            if known[position] and picked:
                # min: a unit vector's dot product with itself can round to 1 + 2**-23 in
                # float32, and max_cosine 1 must pass nothing over
                closest = min(1.0, float((chosen[: len(picked)] @ unit[position]).max()))
            if closest > self.max_cosine:
                passed.append(position)
                continue
            chosen[len(picked)] = unit[position] if known[position] else 0.0
            picked.append(position)
        picked += passed[: self.n - len(picked)]
        return np.asarray(picked, dtype=np.int64)
