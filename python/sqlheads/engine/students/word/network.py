"""The word student's network: token ids in, class logits out, small enough for < 1M
parameters and fast enough on a CPU to score text without any encoder.

Every architecture reads the encoder tokenizer's ids and first maps them through a fixed table
onto the vocabulary the student was fitted on (the tokens its texts use, 0 for padding, 1 for
any other token, which starts at zero as padding does): embedding rows of tokens no text used
would never be trained, so the width they would have cost goes to the tokens that matter
instead. The table is a constant of the graph, not a parameter. What differs between
architectures is how a text's token embeddings become one vector of features (its
:class:`WordArchitecture`'s pooling, one module each in :mod:`.architectures`); an MLP turns
that vector into the classes' logits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

PAD, OTHER = 0, 1  # the compact vocabulary's first two rows


@dataclass(frozen=True)
class WordArchitecture:
    """One way to pool a text's token embeddings, and the size it was measured best at.

    ``pooling(dim, channels, buckets)`` builds the PyTorch module (import torch inside it: the
    registry is read by processes that never fit). The module has ``features``, the width of
    what it returns, and ``forward(ids, attention_mask, tokens, mask)``: the compact ids
    (batch, positions), the tokenizer's attention mask, the token embeddings with padding
    zeroed (batch, positions, dim) and the mask as float (batch, positions, 1).
    """

    pooling: Callable[[int, int, int], Any]
    size: dict[str, int]  # WordStudentParams fields: the measured best under 1M parameters
    needs_channels: bool = True  # channels 0 leaves nothing to pool
    needs_buckets: bool = False  # hashed bigram rows


def compact_vocabulary(
    token_ids: Sequence[Sequence[int]],
    vocab_size: int,
    min_count: int = 1,
    max_rows: int | None = None,
) -> np.ndarray:
    """The table from tokenizer ids to the student's rows: tokens seen at least ``min_count``
    times (the ``max_rows`` most used of them, if given) get rows 2, 3, ... in id order; the
    rest share row 1 (``OTHER``). ``min_count`` 0 keeps every token of the vocabulary (its
    unseen tokens keep their initial embedding). ``max_rows`` keeps a student under its
    parameter budget whatever the size of its texts' vocabulary."""
    counts = np.bincount(
        np.concatenate([np.asarray(s, dtype=np.int64) for s in token_ids] or [np.zeros(0, int)]),
        minlength=vocab_size,
    )[:vocab_size]
    kept = np.flatnonzero(counts >= min_count)
    if max_rows is not None and len(kept) > max_rows:
        most_used = np.argsort(-counts[kept], kind="stable")[:max_rows]
        kept = np.sort(kept[most_used])
    table = np.full(vocab_size, OTHER, dtype=np.int64)
    table[kept] = np.arange(2, 2 + len(kept))
    return table


class Shape(Protocol):
    """A word network's size (:class:`~.student.WordStudentParams` is one)."""

    dim: int  # token embedding width
    channels: int  # what the pooling takes besides (its filters, its LSTM units)
    hidden: int  # the MLP's
    dropout: float
    buckets: int  # hashed bigram rows (ngrams)


def build_network(
    architecture: WordArchitecture, table: np.ndarray, n_classes: int, pad_id: int, shape: Shape
):
    """The PyTorch module of ``architecture`` at ``shape``, reading tokenizer ids through
    ``table``."""
    import torch

    rows = int(table.max()) + 1
    dim, hidden, dropout = shape.dim, shape.hidden, shape.dropout

    class WordNetwork(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            remap = torch.from_numpy(table.astype(np.int64))
            remap[pad_id] = PAD
            self.register_buffer("remap", remap)
            self.embedding = torch.nn.Embedding(rows, dim, padding_idx=PAD)
            # OTHER starts at zero, the mean of the random and of the (centred) encoder starts:
            # when the texts use fewer tokens than the vocabulary's limit it is never trained,
            # and a random start would push every unseen token of a scored text one fixed way.
            with torch.no_grad():
                self.embedding.weight[OTHER] = 0.0
            self.pooling = architecture.pooling(dim, shape.channels, shape.buckets)
            self.mlp = torch.nn.Sequential(
                torch.nn.Linear(self.pooling.features, hidden),
                torch.nn.ReLU(),
                torch.nn.Dropout(dropout),
                torch.nn.Linear(hidden, n_classes),
            )

        def forward(self, input_ids, attention_mask):
            ids = self.remap[input_ids]
            mask = attention_mask.to(torch.float32).unsqueeze(-1)
            tokens = self.embedding(ids) * mask
            return self.mlp(self.pooling(ids, attention_mask, tokens, mask))

    return WordNetwork()


def max_over(features, mask):
    """Max over positions of (batch, channels, positions) features that are >= 0 (ReLU), with
    padding zeroed: the max of a text is then its own. A convolution padded on both sides
    gives ``width - 1`` more positions than tokens; those at the end read padding only."""
    import torch

    positive = torch.relu(features)[:, :, : mask.shape[1]] * mask.transpose(1, 2)
    return positive.max(dim=2).values
