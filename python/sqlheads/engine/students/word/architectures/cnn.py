"""``cnn``: Kim (2014), convolutions of widths 3, 4 and 5 over the tokens, each max-pooled."""

from __future__ import annotations

from sqlheads.engine.students.word.network import WordArchitecture, max_over

WIDTHS = (3, 4, 5)


def pooling(dim: int, channels: int, buckets: int):
    import torch

    class Cnn(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.convs = torch.nn.ModuleList(
                torch.nn.Conv1d(dim, channels, width, padding=width - 1) for width in WIDTHS
            )
            self.features = len(WIDTHS) * channels

        def forward(self, ids, attention_mask, tokens, mask):
            return torch.cat(
                [max_over(conv(tokens.transpose(1, 2)), mask) for conv in self.convs], 1
            )

    return Cnn()


ARCHITECTURE = WordArchitecture(
    pooling, size={"dim": 64, "channels": 100, "hidden": 64, "max_vocabulary": 14_000}
)
