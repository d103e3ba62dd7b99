"""The word student's networks: token ids in, class logits out, each small enough for < 1M
parameters and fast enough on a CPU to score text without any encoder.

Every architecture reads the encoder tokenizer's ids and first maps them through a fixed table
onto the vocabulary the student was fitted on (the tokens its texts use, 0 for padding, 1 for
any other token, which starts at zero as padding does): embedding rows of tokens no text used
would never be trained, so the width they would have cost goes to the tokens that matter
instead. The table is a constant of the graph, not a parameter. Architectures (``arch``):

- ``bag``: mean of token embeddings concatenated with a max-pooled width-3 convolution, MLP;
- ``cnn``: Kim (2014): convolutions of widths 3, 4 and 5, each max-pooled, MLP;
- ``bilstm``: Tang et al. (2019): a bidirectional LSTM, max-pooled over the text, MLP; each
  direction reads only the text's own tokens, so padding never changes a row's result;
- ``ngrams``: fastText-like: the mean of unigram and hashed-bigram embeddings, MLP.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

ARCHITECTURES = ("bag", "cnn", "bilstm", "ngrams")
PAD, OTHER = 0, 1  # the compact vocabulary's first two rows
_BIGRAM_PRIME = 1_000_003


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


def build_network(
    arch: str,
    table: np.ndarray,
    n_classes: int,
    pad_id: int,
    *,
    dim: int,
    channels: int,
    hidden: int,
    dropout: float,
    buckets: int,
):
    """The PyTorch module of ``arch`` reading tokenizer ids through ``table``."""
    import torch

    rows = int(table.max()) + 1

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
            if arch == "bag":
                self.conv = torch.nn.Conv1d(dim, channels, 3, padding=1) if channels else None
                features = dim + channels
            elif arch == "cnn":
                self.convs = torch.nn.ModuleList(
                    torch.nn.Conv1d(dim, channels, width, padding=width - 1) for width in (3, 4, 5)
                )
                features = 3 * channels
            elif arch == "bilstm":
                self.forward_lstm = torch.nn.LSTM(dim, channels, batch_first=True)
                self.backward_lstm = torch.nn.LSTM(dim, channels, batch_first=True)
                features = 2 * channels
            else:  # ngrams
                self.bigrams = torch.nn.Embedding(buckets, dim)
                # zero, as OTHER: a bucket no training bigram hashes to is never trained, and
                # a scored text's unseen bigrams would add random vectors to its mean
                with torch.no_grad():
                    self.bigrams.weight.zero_()
                features = dim
            self.mlp = torch.nn.Sequential(
                torch.nn.Linear(features, hidden),
                torch.nn.ReLU(),
                torch.nn.Dropout(dropout),
                torch.nn.Linear(hidden, n_classes),
            )

        def forward(self, input_ids, attention_mask):
            ids = self.remap[input_ids]
            mask = attention_mask.to(torch.float32).unsqueeze(-1)
            tokens = self.embedding(ids) * mask
            if arch == "bag":
                pooled = tokens.sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
                if self.conv is not None:
                    local = _max_over(self.conv(tokens.transpose(1, 2)), mask)
                    pooled = torch.cat([pooled, local], 1)
            elif arch == "cnn":
                pooled = torch.cat(
                    [_max_over(conv(tokens.transpose(1, 2)), mask) for conv in self.convs], 1
                )
            elif arch == "bilstm":
                lengths = attention_mask.sum(dim=1, keepdim=True)
                positions = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
                # each text reversed within its own length; padding stays at the end
                flipped = torch.where(positions < lengths, lengths - 1 - positions, positions)
                backward_tokens = tokens.gather(1, flipped.unsqueeze(-1).expand_as(tokens))
                ahead, _ = self.forward_lstm(tokens)
                behind, _ = self.backward_lstm(backward_tokens)
                # LSTM outputs lie in (-1, 1): padding at -2 never wins the max
                pooled = torch.cat(
                    [(h * mask - 2.0 * (1.0 - mask)).max(dim=1).values for h in (ahead, behind)], 1
                )
            else:
                pairs = (ids[:, :-1] * _BIGRAM_PRIME + ids[:, 1:]) % self.bigrams.num_embeddings
                pair_mask = mask[:, 1:] * mask[:, :-1]
                both = tokens.sum(dim=1) + (self.bigrams(pairs) * pair_mask).sum(dim=1)
                pooled = both / (mask.sum(dim=1) + pair_mask.sum(dim=1)).clamp(min=1.0)
            return self.mlp(pooled)

    return WordNetwork()


def _max_over(features, mask):
    """Max over positions of (batch, channels, positions) features that are >= 0 (ReLU), with
    padding zeroed: the max of a text is then its own. A convolution padded on both sides
    gives ``width - 1`` more positions than tokens; those at the end read padding only."""
    import torch

    positive = torch.relu(features)[:, :, : mask.shape[1]] * mask.transpose(1, 2)
    return positive.max(dim=2).values
