"""Any fitted model as a teacher: its class probabilities on texts become soft labels.

A head reads vectors, so its texts are embedded first with the encoder it was trained on; a
text model (a fine-tuned teacher, a student) reads the texts themselves. Either way the
teacher's probabilities are turned into logits by their logarithm (the softmax of log p is p
again, so a tempered softmax in the distillation loss sees the teacher's own distribution).
No SQL here: the caller loads the model and its encoder.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sqlheads.engine.progress import Progress

SCORE_CHUNK = 256  # texts scored between two progress reports
SMALLEST_PROBABILITY = 1e-7  # log(0) would be -inf: a certain teacher is clipped here


@dataclass
class Teacher:
    """A fitted model that teaches: ``model`` scores ``reads`` (``vector`` or ``text``); a
    vector model's texts go through ``encoder`` (an ``encoders.onnx_encoder.OnnxEncoder``)."""

    model: Any
    reads: str
    encoder: Any = None
    long_text: str = "window"

    @property
    def classes(self) -> list[str]:
        return [str(c) for c in self.model.classes_]

    def probabilities(
        self,
        texts: Sequence[str],
        progress: Progress | None = None,
        chunk: int = SCORE_CHUNK,
    ) -> np.ndarray:
        """(texts, classes) probabilities, scored ``chunk`` texts at a time; ``progress``
        hears of each chunk done: ``(texts scored, texts)``."""
        return self.scored(texts, progress, chunk)[0]

    def scored(
        self,
        texts: Sequence[str],
        progress: Progress | None = None,
        chunk: int = SCORE_CHUNK,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """The probabilities, and the vectors the teacher's encoder made of the texts on the
        way (None for a teacher that reads text): what an encoder student's feature loss
        learns, kept so that no text is embedded twice."""
        out = np.zeros((len(texts), len(self.classes)), dtype=np.float32)
        vectors = None
        for start in range(0, len(texts), chunk):
            part = list(texts[start : start + chunk])
            if self.reads == "vector":
                encoded = self.encoder.encode(part, long_text=self.long_text).vectors
                if vectors is None:
                    vectors = np.zeros((len(texts), encoded.shape[1]), dtype=np.float32)
                vectors[start : start + len(part)] = encoded
                out[start : start + len(part)] = self.probabilities_of_vectors(encoded)
            else:
                out[start : start + len(part)] = self.model.predict_proba(part)
            if progress is not None:
                progress(start + len(part), len(texts), None)
        return out, vectors

    def probabilities_of_vectors(self, vectors: np.ndarray) -> np.ndarray:
        return np.asarray(self.model.predict_proba(vectors), dtype=np.float32)


def as_logits(probabilities: np.ndarray) -> np.ndarray:
    """Log-probabilities, float32: what distillation takes as a teacher's logits."""
    return np.log(np.clip(probabilities, SMALLEST_PROBABILITY, 1.0)).astype(np.float32)
