"""Shuffled batches of rows, shared by every training loop: the fine-tuning's and the
students' distillation."""

from __future__ import annotations

import numpy as np


def batch_order(
    n_rows: int, batch_size: int, generator: np.random.Generator, lengths: np.ndarray | None
) -> list[np.ndarray]:
    """Shuffled batches; with ``lengths``, rows of similar length share a batch.

    Sorting within a window of 50 shuffled batches keeps most padding out of text batches
    (bucketing) while each epoch still sees the rows in a new order.
    """
    order = generator.permutation(n_rows)
    if lengths is not None:
        window = batch_size * 50
        order = np.concatenate(
            [
                chunk[np.argsort(lengths[chunk], kind="stable")]
                for chunk in np.array_split(order, max(1, -(-n_rows // window)))
            ]
        )
    batches = [order[s : s + batch_size] for s in range(0, n_rows, batch_size)]
    return [batches[i] for i in generator.permutation(len(batches))]
