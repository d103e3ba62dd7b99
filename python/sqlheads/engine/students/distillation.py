"""Training a student on a teacher's soft labels (the engine's side of ``distill``).

One loop serves every student kind: the kind supplies a PyTorch module and a function that
turns row indices into the module's inputs; this module owns the optimiser, the schedule, the
batching and the loss (:func:`sqlheads.engine.students.losses.distillation_loss`). No SQL here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from sqlheads.engine.constraints import SEED, Interval, Params, param
from sqlheads.engine.progress import Progress
from sqlheads.engine.training.batches import batch_order
from sqlheads.errors import InvalidParameterError


@dataclass(frozen=True)
class DistillParams(Params):
    """How a student learns from its teacher; the defaults were measured on Rotten Tomatoes
    with the mpnet-rt teacher (see docs/benchmarks.md, "students")."""

    temperature: float = param(4.0, Interval(float, 0, 100, "right"))
    # weight of cross-entropy on gold labels; 0: the teacher's KL only; None: the kind's
    gold_weight: float | None = param(None, Interval(float, 0, 1), None)
    epochs: int | None = param(None, Interval(int, 1, 1000), None)  # None: the student kind's
    lr: float | None = param(None, Interval(float, 0, 1, "right"), None)  # None: the kind's
    weight_decay: float = param(0.0, Interval(float, 0, 1, "left"))
    batch_size: int = param(64, Interval(int, 1, 65_536))
    seed: int = param(0, SEED)

    def with_defaults(self, epochs: int, lr: float, gold_weight: float = 0.0) -> DistillParams:
        """These parameters with a student's own epochs, learning rate and gold weight where
        they give none (these themselves when they give all three: nothing to check again)."""
        if None not in (self.epochs, self.lr, self.gold_weight):
            return self
        return replace(
            self,
            epochs=self.epochs or epochs,
            lr=self.lr or lr,
            gold_weight=gold_weight if self.gold_weight is None else self.gold_weight,
        )


def fit_student(
    net,
    inputs: Callable[[np.ndarray], Sequence],
    teacher_logits: np.ndarray,
    gold: np.ndarray,
    params: DistillParams,
    *,
    lengths: np.ndarray | None = None,
    progress: Progress | None = None,
) -> list[float]:
    """Fit ``net`` in place for ``params.epochs`` at ``params.lr`` (the kind's, given when the
    caller gave none); returns the mean loss of each epoch.

    ``teacher_logits`` is (rows, classes) with NaN rows where a row has no soft label; ``gold``
    holds class indices, -1 where a row has no gold label. Adam with amsgrad and a linear decay
    to zero, as for heads. ``progress`` hears of each epoch: ``(epochs done, epochs)``.
    """
    import torch

    from sqlheads.engine.students.losses import distillation_loss

    epochs, lr = params.epochs, params.lr
    if epochs is None or lr is None or params.gold_weight is None:
        raise InvalidParameterError(
            "a student distils with given epochs, lr and gold weight: pass "
            "DistillParams(epochs=..., lr=..., gold_weight=...), or take the kind's "
            "(DistillParams.with_defaults)"
        )
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
