"""The distillation loss: one KL term on the teacher's soft labels, optional gold cross-entropy.

As in the seed (``distillation-tiny-student.txt``): the student matches the teacher's softened
distribution over every row the teacher labelled, labelled or not; gold labels, where a row has
one, may add a weighted cross-entropy term.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def distillation_loss(
    student_logits: torch.Tensor,
    teacher_logits: torch.Tensor,
    has_teacher: torch.Tensor,
    gold: torch.Tensor,
    *,
    temperature: float,
    gold_weight: float,
) -> torch.Tensor:
    """Mean over the batch of ``(1 - w) T² KL(teacher_T || student_T) + w CE(gold)``.

    ``has_teacher`` (bool) marks rows with soft labels; ``gold`` holds class indices, -1 where a
    row has no gold label. A row contributes only the terms it has data for. The T² factor keeps
    the gradient's size independent of the temperature (Hinton et al., 2015).
    """
    rows = student_logits.shape[0]
    loss = student_logits.new_zeros(())
    if gold_weight < 1 and bool(has_teacher.any()):
        log_student = F.log_softmax(student_logits[has_teacher] / temperature, dim=1)
        soft_teacher = F.log_softmax(teacher_logits[has_teacher] / temperature, dim=1)
        kl = F.kl_div(log_student, soft_teacher, log_target=True, reduction="sum")
        loss = loss + (1 - gold_weight) * temperature**2 * kl / rows
    labelled = gold >= 0
    if gold_weight > 0 and bool(labelled.any()):
        ce = F.cross_entropy(student_logits[labelled], gold[labelled], reduction="sum")
        loss = loss + gold_weight * ce / rows
    return loss
