"""The teacher: a transformer sequence classifier fine-tuned on gold labels.

``TeacherClassifier(model_dir, params, device).fit(texts, labels)`` fine-tunes BERT, MPNet,
RoBERTa or DeBERTa-v2/3 from a local Hugging Face directory (anything else: 50056) with the
shared loop of :mod:`sqlheads.engine.training.tuner`; ``logits(texts)`` gives the soft labels its
students learn from; ``export()`` is the fp32 ONNX graph stored as a model of kind ``teacher``
(tokenizer and classes in its metadata), which scores and gives soft labels again without
PyTorch. No SQL here.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np

from sqlheads.engine.encoders.export import max_positions
from sqlheads.engine.encoders.onnx_encoder import Tokenizer
from sqlheads.engine.encoders.text_classifier import (
    OnnxTextClassifier,
    check_family,
    export_checked,
    load_classifier,
    model_directory,
    tokenizer_json,
    torch_logits,
)
from sqlheads.engine.progress import Progress
from sqlheads.engine.training.params import TeacherParams
from sqlheads.engine.training.tuner import Tuner, TuneResult, data_fingerprint
from sqlheads.errors import InvalidParameterError, SingleClassError

KIND = "teacher"
PARITY_ROWS = 16  # training texts the exported graph must score as PyTorch does


def prepared(model: str | Path, max_length: int) -> tuple[Path, Tokenizer, str]:
    """The model directory (family checked), its fast tokenizer cut at ``max_length``."""
    model_dir = model_directory(model)
    config = check_family(model_dir)
    if max_length > max_positions(config):
        raise InvalidParameterError(
            f"max_length {max_length} is longer than {model_dir.name} can number "
            f"({max_positions(config)} positions): pass max_length {max_positions(config)} or less"
        )
    tokens_json = tokenizer_json(model_dir)
    return model_dir, Tokenizer(tokens_json, max_length), tokens_json


class TeacherClassifier:
    """Fine-tune once, then ``logits``, ``predict_proba`` and ``export``."""

    def __init__(
        self,
        model: str | Path,
        params: TeacherParams | None = None,
        *,
        device=None,
        work_dir: Path | None = None,
    ) -> None:
        import torch

        self.params = params or TeacherParams()
        self.device = device or torch.device("cpu")
        self.work_dir = work_dir
        self.model_dir, self.tokenizer, self.tokenizer_json = prepared(
            model, self.params.max_length
        )
        self.classes_: list[str] = []
        self.result_: TuneResult | None = None
        self.model_ = None

    def fit(
        self, texts: Sequence[str], labels: Sequence[str], *, progress: Progress | None = None
    ) -> TeacherClassifier:
        import torch
        import torch.nn.functional as F

        self.classes_ = sorted({str(v) for v in labels})
        if len(self.classes_) < 2:
            raise SingleClassError(
                f"the teacher's labels hold one class ({self.classes_}): label rows of another"
            )
        index = {c: i for i, c in enumerate(self.classes_)}
        targets = np.array([index[str(v)] for v in labels], dtype=np.int64)
        ids = self.tokenizer.encode(texts, truncate=True)  # tokenised once, padded per batch
        self.model_ = load_classifier(self.model_dir, len(self.classes_), self.params.seed)
        target_t = torch.from_numpy(targets).to(self.device)
        tuner = Tuner(
            self.params,
            self.device,
            pad_id=self.tokenizer.pad_id,
            work_dir=self.work_dir,
            fingerprint={"model": str(self.model_dir), "data": data_fingerprint(ids, targets)},
        )
        self.result_ = tuner.fit(
            self.model_,
            ids,
            lambda logits, rows: F.cross_entropy(logits, target_t[rows.to(self.device)]),
            progress=progress,
        )
        return self

    def logits(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """PyTorch logits on the fitting device: the teacher's soft labels."""
        self._require_fitted()
        return torch_logits(self.model_, self.tokenizer, texts, self.device, batch_size)

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        from sqlheads.engine.encoders.text_classifier import softmax

        return softmax(self.logits(texts))

    @property
    def n_parameters_(self) -> int:
        self._require_fitted()
        return int(sum(t.numel() for t in self.model_.parameters()))

    def export(self, parity_texts: Sequence[str]) -> tuple[OnnxTextClassifier, float]:
        """The fp32 ONNX graph with its contract, and its largest probability difference from
        PyTorch on ``parity_texts``. Exporting moves the model to the CPU."""
        self._require_fitted()
        contract = {
            "kind": KIND,
            "classes": json.dumps(self.classes_),
            "tokenizer_json": self.tokenizer_json,
            "max_length": str(self.params.max_length),
            "params": json.dumps(asdict(self.params)),
            "parameters": str(self.n_parameters_),
            "model_type": str(self.model_.config.model_type),
            "source": str(self.model_dir),
        }
        graph, worst = export_checked(
            self.model_, self.tokenizer, contract, list(parity_texts)[:PARITY_ROWS], "teacher"
        )
        self.model_.to(self.device)
        return OnnxTextClassifier(graph), worst

    def _require_fitted(self) -> None:
        if self.model_ is None or not self.classes_:
            raise InvalidParameterError("this teacher is not fitted: call fit first")
