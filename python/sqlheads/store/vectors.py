"""Vectors as bytes: little-endian float32, the format of ``embeddings.vector``.

Binary rather than the seed's JSON text: four bytes a dimension, and loading is one
``frombuffer`` over the concatenated rows instead of a JSON parse per row.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sqlheads.errors import DimensionMismatchError

VECTOR_DTYPE = np.dtype("<f4")


def pack_rows(matrix: np.ndarray) -> list[bytes]:
    """Each row of a 2-d matrix to its bytes."""
    matrix = np.ascontiguousarray(matrix, dtype=VECTOR_DTYPE)
    return [row.tobytes() for row in matrix]


def unpack_rows(blobs: Sequence[bytes], dim: int) -> np.ndarray:
    """Stored vectors to an ``(n, dim)`` float32 matrix; refuses vectors of another size."""
    expected = dim * VECTOR_DTYPE.itemsize
    for position, blob in enumerate(blobs):
        if len(blob) != expected:
            raise DimensionMismatchError(
                f"vector {position} has {len(blob)} bytes, expected {expected} "
                f"({dim} float32 values): the set holds vectors of another encoder; "
                "re-embed the set with its own encoder"
            )
    if not blobs:
        return np.empty((0, dim), dtype=np.float32)
    return (
        np.frombuffer(b"".join(blobs), dtype=VECTOR_DTYPE)
        .reshape(len(blobs), dim)
        .astype(np.float32, copy=False)
    )
