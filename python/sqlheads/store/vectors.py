"""Vectors as bytes: little-endian float32, the format of ``embeddings.vector``; float16
(:data:`HALF_DTYPE`) for a teacher's vectors kept beside its transfer rows, where half the
bytes lose nothing a student's feature loss can tell.

Binary rather than the seed's JSON text: four bytes a dimension, and loading is one
``frombuffer`` over the concatenated rows instead of a JSON parse per row.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sqlheads.errors import DimensionMismatchError

VECTOR_DTYPE = np.dtype("<f4")
HALF_DTYPE = np.dtype("<f2")


def pack_rows(matrix: np.ndarray, dtype: np.dtype = VECTOR_DTYPE) -> list[bytes]:
    """Each row of a 2-d matrix to its bytes."""
    matrix = np.ascontiguousarray(matrix, dtype=dtype)
    return [row.tobytes() for row in matrix]


def unpack_rows(blobs: Sequence[bytes], dim: int, dtype: np.dtype = VECTOR_DTYPE) -> np.ndarray:
    """Stored vectors to an ``(n, dim)`` float32 matrix; refuses vectors of another size."""
    expected = dim * dtype.itemsize
    for position, blob in enumerate(blobs):
        if len(blob) != expected:
            raise DimensionMismatchError(
                f"vector {position} has {len(blob)} bytes, expected {expected} "
                f"({dim} {dtype.name} values): the set holds vectors of another encoder; "
                "re-embed the set with its own encoder"
            )
    if not blobs:
        return np.empty((0, dim), dtype=np.float32)
    return (
        np.frombuffer(b"".join(blobs), dtype=dtype)
        .reshape(len(blobs), dim)
        .astype(np.float32, copy=False)
    )
