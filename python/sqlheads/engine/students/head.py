"""The head student: a head on the set's stored vectors, trained on a teacher's soft labels.

Cheap (seconds), and scored exactly like a head trained on gold labels (it *is* a
:class:`~sqlheads.engine.heads.HeadClassifier`); whether the teacher's soft labels lift it above
the gold-label head is measured in docs/benchmarks.md: on frozen generic vectors they mostly
cannot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sqlheads.engine.constraints import Params
from sqlheads.engine.heads import (
    HeadClassifier,
    HeadParams,
    default_hidden,
    head_network,
    network_weights,
)
from sqlheads.engine.progress import Progress
from sqlheads.engine.students.distillation import DistillParams, fit_student


@dataclass(frozen=True)
class HeadStudentParams(Params):
    """The head student's: nothing to choose (its size and learning rate are a head's
    defaults, its epochs and seed the distillation's)."""


def distill_head(
    X: np.ndarray,
    classes: Sequence[str],
    teacher_logits: np.ndarray,
    gold: np.ndarray,
    *,
    head: HeadParams | None = None,
    distill: DistillParams | None = None,
    progress: Progress | None = None,
) -> HeadClassifier:
    """A fitted head whose targets are the teacher's softened logits (and, optionally, gold);
    ``progress`` hears of each epoch."""
    import torch

    head = head or HeadParams()
    distill = (distill or DistillParams()).with_defaults(head.epochs, head.lr)
    X = np.asarray(X, dtype=np.float32)
    hidden = head.hidden or default_hidden(len(classes))
    torch.manual_seed(distill.seed)
    net = head_network(X.shape[1], hidden, len(classes), head.dropout)
    features = torch.from_numpy(X)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny MLP: see HeadClassifier.fit
    try:
        curve = fit_student(
            net,
            lambda rows: (features[torch.from_numpy(rows)],),
            teacher_logits,
            gold,
            distill,
            progress=progress,
        )
    finally:
        torch.set_num_threads(threads)
    fitted = HeadClassifier(HeadParams(hidden=hidden, dropout=head.dropout, seed=distill.seed))
    fitted.weights_ = network_weights(net)
    fitted.classes_ = [str(c) for c in classes]
    fitted.loss_curve_ = curve
    fitted.batch_size_ = distill.batch_size
    return fitted
