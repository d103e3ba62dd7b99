"""The distillation loss: one KL term on the teacher's soft labels, optional gold cross-entropy;
the feature loss an encoder student adds when its teacher's encoder gave vectors; and the
hidden-state loss of a shallower encoder student's general stage (``students.general``).

As in the seed (``distillation-tiny-student.txt``): the student matches the teacher's softened
distribution over every row the teacher labelled, labelled or not; gold labels, where a row has
one, may add a weighted cross-entropy term. The feature loss (as TinyBERT and MiniLM distil
hidden states, not only logits) pulls the student's pooled vector, through a learned
projection, toward the teacher encoder's vector of the same row.
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


def feature_loss(
    projected: torch.Tensor, teacher_vectors: torch.Tensor, has_vector: torch.Tensor
) -> torch.Tensor:
    """Mean over the batch of ``1 - cos(projected, teacher vector)``; a row without a teacher
    vector (``has_vector`` False) contributes nothing. Cosine, not a squared distance: the
    teacher's vectors are unit length, and only their direction carries what its head reads."""
    rows = projected.shape[0]
    if not bool(has_vector.any()):
        return projected.new_zeros(())
    similarity = F.cosine_similarity(projected[has_vector], teacher_vectors[has_vector], dim=1)
    return (1 - similarity).sum() / rows


def hidden_state_loss(
    student_states: tuple[torch.Tensor, ...],
    whole_states: tuple[torch.Tensor, ...],
    attention_mask: torch.Tensor,
) -> torch.Tensor:
    """Each row's mean over a shallower student's layers and its unmasked tokens of
    ``1 - cos(student state, whole model's state)``: the student's layer ``m`` of ``M`` (its
    hidden states after the embeddings) against the whole model's layer ``m * N // M`` of ``N``
    (TinyBERT's uniform map; the last against the last). Cosine, as DistilBERT's hidden-state
    loss: the same width, and no scale to learn."""
    student, whole = student_states[1:], whole_states[1:]
    mask = attention_mask.to(student[0].dtype)
    tokens = mask.sum(dim=1).clamp(min=1.0)
    total = student[0].new_zeros(student[0].shape[0])
    for m, state in enumerate(student, start=1):
        target = whole[m * len(whole) // len(student) - 1]
        distance = 1 - F.cosine_similarity(state, target, dim=-1)
        total = total + (distance * mask).sum(dim=1) / tokens
    return total / len(student)
