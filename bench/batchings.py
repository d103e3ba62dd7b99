"""A text's vectors in several batchings: alone, shuffled in batches of 8, in the encoder's
length-sorted batches of 32 and beside a long text. Apart from :mod:`bench.int8_graphs`, whose
tables pull pandas and the store in: :mod:`bench.emulated` runs this under QEMU, where every
import is two orders of magnitude slower."""

from __future__ import annotations

import numpy as np

BATCH_OF_8, BATCH_OF_32 = "shuffled, batches of 8", "length-sorted, batches of 32"


def batchings(encoder, texts: list[str], long: str | None = None) -> dict[str, np.ndarray]:
    """The same ``texts`` embedded by ``encoder`` (an ``OnnxEncoder``) each alone, shuffled in
    batches of 8 (one ``encode`` call with no token limit is one batch: mixed lengths), in the
    encoder's own length-sorted batches of 32, and, given a ``long`` text, each beside it (a
    batch padded to the long text's width). A text's vector should be the same in each."""
    order = np.random.default_rng(7).permutation(len(texts))
    shuffled = np.zeros((len(texts), encoder.dim), dtype=np.float32)
    for start in range(0, len(texts), 8):
        rows = order[start : start + 8]
        shuffled[rows] = encoder.encode([texts[i] for i in rows], batch_tokens=None).vectors
    found = {
        "alone": np.vstack([encoder.encode([text]).vectors for text in texts]),
        BATCH_OF_8: shuffled,
        BATCH_OF_32: encoder.encode(texts, batch_size=32).vectors,
    }
    if long is not None:
        found["beside a long text"] = np.vstack(
            [encoder.encode([text, long], long_text="truncate", batch_tokens=None).vectors[:1]
             for text in texts]
        )  # fmt: skip
    return found
