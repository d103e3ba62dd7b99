"""``bag``: the mean of the token embeddings, beside a max-pooled width-3 convolution (none
with ``channels`` 0)."""

from __future__ import annotations

from sqlheads.engine.students.word.network import WordArchitecture, max_over


def pooling(dim: int, channels: int, buckets: int):
    import torch

    class Bag(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv1d(dim, channels, 3, padding=1) if channels else None
            self.features = dim + channels

        def forward(self, ids, attention_mask, tokens, mask):
            pooled = tokens.sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
            if self.conv is None:
                return pooled
            return torch.cat([pooled, max_over(self.conv(tokens.transpose(1, 2)), mask)], 1)

    return Bag()


ARCHITECTURE = WordArchitecture(
    pooling,
    size={"dim": 64, "channels": 64, "hidden": 64, "max_vocabulary": 15_000},
    needs_channels=False,
)
