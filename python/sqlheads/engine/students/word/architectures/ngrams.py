"""``ngrams``: fastText-like, the mean of the token embeddings and of hashed-bigram ones."""

from __future__ import annotations

from sqlheads.engine.students.word.network import WordArchitecture

BIGRAM_PRIME = 1_000_003


def pooling(dim: int, channels: int, buckets: int):
    import torch

    class Ngrams(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.bigrams = torch.nn.Embedding(buckets, dim)
            # zero, as OTHER: a bucket no training bigram hashes to is never trained, and a
            # scored text's unseen bigrams would add random vectors to its mean
            with torch.no_grad():
                self.bigrams.weight.zero_()
            self.features = dim

        def forward(self, ids, attention_mask, tokens, mask):
            pairs = (ids[:, :-1] * BIGRAM_PRIME + ids[:, 1:]) % self.bigrams.num_embeddings
            pair_mask = mask[:, 1:] * mask[:, :-1]
            both = tokens.sum(dim=1) + (self.bigrams(pairs) * pair_mask).sum(dim=1)
            return both / (mask.sum(dim=1) + pair_mask.sum(dim=1)).clamp(min=1.0)

    return Ngrams()


ARCHITECTURE = WordArchitecture(
    pooling,
    size={"dim": 32, "channels": 0, "hidden": 64, "buckets": 16_000, "max_vocabulary": 15_000},
    needs_channels=False,
    needs_buckets=True,
)
