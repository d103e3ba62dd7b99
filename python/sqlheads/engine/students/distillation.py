"""Training a student on a teacher's soft labels (the engine's side of ``distill``).

One loop serves every student kind: the kind supplies a PyTorch module and a function that
turns row indices into the module's inputs; this module owns the optimiser, the schedule, the
batching and the loss (:func:`sqlheads.engine.students.losses.distillation_loss`). No SQL here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from sqlheads.engine.progress import Progress
from sqlheads.engine.training.batches import batch_order
from sqlheads.errors import check_ranges


@dataclass
class DistillParams:
    """How a student learns from its teacher; the defaults were measured on Rotten Tomatoes
    with the mpnet-rt teacher (see docs/benchmarks.md, "students")."""

    temperature: float = 4.0
    gold_weight: float = 0.0  # weight of cross-entropy on gold labels; 0: the seed's KL only
    epochs: int | None = None  # None: the student kind's default
    lr: float | None = None  # None: the student kind's default
    weight_decay: float = 0.0
    batch_size: int = 64
    seed: int = 0

    def validate(self) -> DistillParams:
        checks = [
            (0 < self.temperature <= 100, "temperature", "in (0, 100], e.g. 2"),
            (0 <= self.gold_weight <= 1, "gold_weight", "in [0, 1]; 0 distils on KL alone"),
            (self.epochs is None or 1 <= self.epochs <= 1000, "epochs", "between 1 and 1000"),
            (self.lr is None or 0 < self.lr <= 1, "lr", "in (0, 1], e.g. 1e-3"),
            (0 <= self.weight_decay < 1, "weight_decay", "in [0, 1)"),
            (1 <= self.batch_size <= 65_536, "batch_size", "between 1 and 65536"),
        ]
        check_ranges(self, checks)
        return self


def fit_student(
    net,
    inputs: Callable[[np.ndarray], Sequence],
    teacher_logits: np.ndarray,
    gold: np.ndarray,
    params: DistillParams,
    *,
    epochs: int,
    lr: float,
    lengths: np.ndarray | None = None,
    progress: Progress | None = None,
) -> list[float]:
    """Fit ``net`` in place; returns the mean loss of each epoch.

    ``teacher_logits`` is (rows, classes) with NaN rows where a row has no soft label; ``gold``
    holds class indices, -1 where a row has no gold label. Adam with amsgrad and a linear decay
    to zero, as for heads. ``progress`` hears of each epoch: ``(epochs done, epochs)``.
    """
    import torch

    from sqlheads.engine.students.losses import distillation_loss

    torch.manual_seed(params.seed)
    generator = np.random.default_rng(params.seed)
    has_teacher = ~np.isnan(teacher_logits).any(axis=1)
    teacher = torch.from_numpy(np.nan_to_num(teacher_logits).astype(np.float32))
    has_teacher_t = torch.from_numpy(has_teacher)
    gold_t = torch.from_numpy(gold.astype(np.int64))
    n_rows = len(gold)
    optimizer = torch.optim.Adam(
        net.parameters(), lr=lr, weight_decay=params.weight_decay, amsgrad=True
    )
    total_steps = epochs * -(-n_rows // params.batch_size)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: max(0.0, 1.0 - step / total_steps)
    )
    curve: list[float] = []
    net.train()
    for epoch in range(epochs):
        epoch_loss = 0.0
        for batch in batch_order(n_rows, params.batch_size, generator, lengths):
            index = torch.from_numpy(batch)
            optimizer.zero_grad()
            loss = distillation_loss(
                net(*inputs(batch)),
                teacher[index],
                has_teacher_t[index],
                gold_t[index],
                temperature=params.temperature,
                gold_weight=params.gold_weight,
            )
            loss.backward()
            optimizer.step()
            schedule.step()
            epoch_loss += loss.item() * len(batch)
        curve.append(epoch_loss / n_rows)
        if progress is not None:
            progress(epoch + 1, epochs, None)
    net.eval()
    return curve
