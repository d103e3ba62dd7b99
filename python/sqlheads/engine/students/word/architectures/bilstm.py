"""``bilstm``: Tang et al. (2019), a bidirectional LSTM max-pooled over the text. Each
direction reads only the text's own tokens, so padding never changes a row's result."""

from __future__ import annotations

from sqlheads.engine.students.word.network import WordArchitecture


def pooling(dim: int, channels: int, buckets: int):
    import torch

    class BiLstm(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.forward_lstm = torch.nn.LSTM(dim, channels, batch_first=True)
            self.backward_lstm = torch.nn.LSTM(dim, channels, batch_first=True)
            self.features = 2 * channels

        def forward(self, ids, attention_mask, tokens, mask):
            lengths = attention_mask.sum(dim=1, keepdim=True)
            positions = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
            # each text reversed within its own length; padding stays at the end
            flipped = torch.where(positions < lengths, lengths - 1 - positions, positions)
            backward_tokens = tokens.gather(1, flipped.unsqueeze(-1).expand_as(tokens))
            ahead, _ = self.forward_lstm(tokens)
            behind, _ = self.backward_lstm(backward_tokens)
            # LSTM outputs lie in (-1, 1): padding at -2 never wins the max
            return torch.cat(
                [(h * mask - 2.0 * (1.0 - mask)).max(dim=1).values for h in (ahead, behind)], 1
            )

    return BiLstm()


ARCHITECTURE = WordArchitecture(
    pooling, size={"dim": 64, "channels": 128, "hidden": 64, "max_vocabulary": 12_000}
)
