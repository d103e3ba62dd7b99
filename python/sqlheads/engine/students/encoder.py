"""The encoder student: a small transformer (MiniLM) distilled on a teacher's soft labels.

It fine-tunes the whole encoder with its classification layer through the shared loop of
:mod:`engine.training.tuner`, on the tempered KL of :mod:`engine.students.losses` (the same
loss as the word student), then ships as one ONNX graph scored from raw text by
onnxruntime. Two checks guard the export: the fp32 graph against PyTorch
(:data:`engine.encoders.text_classifier.PARITY_TOLERANCE`; failing is refused, 50010), then the
int8 graph against the fp32 one (:data:`INT8_TOLERANCE`): beyond it the student ships in fp32.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from sqlheads.engine.constraints import Interval, Params, Text, allowed_of, param
from sqlheads.engine.encoders.text_classifier import (
    OnnxTextClassifier,
    export_checked,
    load_classifier,
    max_probability_difference,
    with_contract,
)
from sqlheads.engine.progress import Progress
from sqlheads.engine.students.distillation import DistillParams
from sqlheads.engine.students.word.student import FittedTextStudent
from sqlheads.engine.training.params import TunerParams
from sqlheads.errors import InvalidParameterError

KIND = "encoder_student"
DEFAULT_MODEL = "all-MiniLM-L6-v2"
PARITY_ROWS = 32
# int8 against fp32, largest difference of a class probability on the parity rows. Measured:
# a few thousandths for a barely trained student, 0.059 at worst on 32 rows for MiniLM distilled
# on Rotten Tomatoes (confident outputs move more); beyond this the student ships in fp32.
INT8_TOLERANCE = 0.1
MODEL = "a catalogue model name or a Hugging Face directory"


def _tuner(name: str) -> tuple:
    """What :class:`TunerParams` accepts for ``name``: the knob the tuner reads, checked where
    the encoder student's parameters are built."""
    return allowed_of(TunerParams, name)


@dataclass(frozen=True)
class EncoderStudentParams(Params):
    """What the encoder student is made of; its epochs, lr and seed come from
    :class:`DistillParams`, as for every student. At a door: ``student_model``, ``max_length``,
    ``max_steps``, ``device`` (and ``work_dir``, where a sidecar job keeps its checkpoints)."""

    # catalogue name or local Hugging Face directory
    model: str = param(DEFAULT_MODEL, Text(MODEL), flat="student_model")
    max_length: int = param(128, *_tuner("max_length"))  # tokens per text
    batch_size: int = param(32, *_tuner("batch_size"), door=False)  # distill's, when distilled
    warmup_ratio: float = param(0.1, *_tuner("warmup_ratio"), door=False)
    grad_accumulation: int = param(1, *_tuner("grad_accumulation"), door=False)
    patience: int = param(2, *_tuner("patience"), door=False)
    compile: str = param("auto", *_tuner("compile"), door=False)
    precision: str = param("auto", *_tuner("precision"), door=False)
    max_steps: int | None = param(None, *_tuner("max_steps"))  # optimiser steps at most
    device: str = param("auto", Text("auto, cpu, cuda or cuda:N"))
    # its checkpoints (a sidecar job's folder; None: none kept): where it runs, not what it is
    work_dir: str | None = param(None, Text("a folder"), None, stored=False)
    # largest probability move int8 may make vs fp32
    int8_tolerance: float = param(INT8_TOLERANCE, Interval(float, 0, 1, "left"), door=False)

    def tuner(self, distill: DistillParams) -> TunerParams:
        return TunerParams(
            epochs=distill.epochs,
            lr=distill.lr,
            batch_size=self.batch_size,
            max_length=self.max_length,
            warmup_ratio=self.warmup_ratio,
            grad_accumulation=self.grad_accumulation,
            weight_decay=distill.weight_decay,
            patience=self.patience,
            compile=self.compile,
            precision=self.precision,
            seed=distill.seed,
            max_steps=self.max_steps,
        )


@dataclass
class EncoderStudent(FittedTextStudent):
    """A fitted encoder student; ``fit`` distils, ``predict_proba`` scores raw texts (int8)."""

    params: EncoderStudentParams = field(default_factory=EncoderStudentParams)
    int8_max_abs_diff_: float | None = field(default=None, init=False)
    int8_agreement_: float | None = field(default=None, init=False)
    quantization_: str = field(default="", init=False)  # int8, int8 but feed-forward, or fp32
    steps_: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self._scorer: OnnxTextClassifier | None = None

    def fit(
        self,
        texts: Sequence[str],
        classes: Sequence[str],
        teacher_logits: np.ndarray,
        gold: np.ndarray,
        *,
        distill: DistillParams | None = None,
        progress: Progress | None = None,
    ) -> EncoderStudent:
        """Distil from ``teacher_logits`` (NaN rows: no soft label) and ``gold`` (class index,
        -1 where unlabelled), as :meth:`WordStudent.fit` does; checkpoints go to the
        parameters' ``work_dir``."""
        import torch

        from sqlheads.engine.devices import resolve_device
        from sqlheads.engine.students.losses import distillation_loss
        from sqlheads.engine.training.fine_tuning import prepared
        from sqlheads.engine.training.tuner import Tuner, data_fingerprint

        p = self.params
        distill = distill or DistillParams()
        if distill.epochs is None or distill.lr is None:
            raise InvalidParameterError(
                "the encoder student distils with given epochs and lr: pass "
                "DistillParams(epochs=..., lr=...), or distil through the kind "
                "(sqlheads.engine.kinds.KINDS['encoder_student'].distill_params)"
            )
        device = resolve_device(p.device)
        model_dir, tokenizer, tokens_json = prepared(p.model, p.max_length)
        ids = tokenizer.encode(texts, truncate=True)
        self.classes_ = [str(c) for c in classes]
        net = load_classifier(model_dir, len(self.classes_), distill.seed)
        has_teacher = ~np.isnan(teacher_logits).any(axis=1)
        teacher = torch.from_numpy(np.nan_to_num(teacher_logits).astype(np.float32)).to(device)
        has_teacher_t = torch.from_numpy(has_teacher).to(device)
        gold_t = torch.from_numpy(np.array(gold, dtype=np.int64)).to(device)  # a copy

        def loss(logits, rows):
            rows = rows.to(device)
            return distillation_loss(
                logits,
                teacher[rows],
                has_teacher_t[rows],
                gold_t[rows],
                temperature=distill.temperature,
                gold_weight=distill.gold_weight,
            )

        tuner = Tuner(
            p.tuner(distill),
            device,
            pad_id=tokenizer.pad_id,
            work_dir=None if p.work_dir is None else Path(p.work_dir),
            fingerprint={
                "model": str(model_dir),
                "data": data_fingerprint(ids, np.nan_to_num(teacher_logits)),
                "distill": asdict(distill),
            },
        )
        result = tuner.fit(net, ids, loss, progress=progress)
        self.loss_curve_, self.steps_ = result.loss_curve, result.steps
        self.n_parameters_ = int(sum(t.numel() for t in net.parameters()))
        contract = {
            "kind": KIND,
            "classes": json.dumps(self.classes_),
            "tokenizer_json": tokens_json,
            "max_length": str(p.max_length),
            "params": json.dumps(p.record()),
            "parameters": str(self.n_parameters_),
            "model_type": str(net.config.model_type),
            "source": str(model_dir),
        }
        parity_texts = list(texts[:PARITY_ROWS])
        fp32, self.parity_max_abs_diff_ = export_checked(
            net, tokenizer, contract, parity_texts, "encoder student"
        )
        self.onnx_ = self._quantised(fp32, contract, parity_texts)
        self._scorer = None
        return self

    def _quantised(self, fp32: bytes, contract: dict[str, str], texts: list[str]) -> bytes:
        """Int8 with per-row activation scales, as the encoders' graphs (a row's logits do not
        depend on its batch: :func:`~sqlheads.engine.encoders.export.quantize_int8`), checked
        against the fp32 graph; the feed-forward output projections stay fp32 when quantising
        them too moves probabilities past the tolerance, and the whole graph stays fp32 when
        that is still too far: a student that took many minutes to distil is never thrown away
        for its quantisation (``quantization_`` says which)."""
        from sqlheads.engine.encoders.export import FEED_FORWARD_OUTPUT, quantize_int8

        reference = OnnxTextClassifier(fp32).logits(texts)
        for exclude, name in ((None, "int8"), (FEED_FORWARD_OUTPUT, "int8, feed-forward fp32")):
            graph = with_contract(quantize_int8(fp32, exclude=exclude), contract)
            got = OnnxTextClassifier(graph).logits(texts)
            self.int8_max_abs_diff_ = max_probability_difference(got, reference)
            self.int8_agreement_ = float(
                np.mean(got.argmax(axis=1) == reference.argmax(axis=1)) if len(texts) else 1.0
            )
            if self.int8_max_abs_diff_ <= self.params.int8_tolerance:
                self.quantization_ = name
                return graph
        self.quantization_ = "fp32"
        return fp32  # export_checked wrote the contract into it already

    # -- scoring: the shipped graph ---------------------------------------------------------------

    def _graph(self) -> OnnxTextClassifier:
        if not self.onnx_:
            raise InvalidParameterError("this student is not fitted: call fit first")
        if self._scorer is None:
            self._scorer = OnnxTextClassifier(self.onnx_)
        return self._scorer

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """Each text's class probabilities, by the exported graph (int8 unless it was kept
        fp32: ``quantization_``)."""
        return self._graph().predict_proba(texts)

    def predict(self, texts: Sequence[str]) -> np.ndarray:
        """Each text's most probable class."""
        return self._graph().predict(texts)


def load(blob: bytes) -> OnnxTextClassifier:
    """A stored encoder student, ready to score (onnxruntime only)."""
    return OnnxTextClassifier.from_bytes(blob, kind=KIND)
