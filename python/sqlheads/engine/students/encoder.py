"""The encoder student: a small transformer (MiniLM) distilled on a teacher's soft labels.

It fine-tunes the encoder with its classification layer through the shared loop of
:mod:`engine.training.tuner`, on the tempered KL of :mod:`engine.students.losses` (the same
loss as the word student), then ships as one ONNX graph scored from raw text by
onnxruntime. It comes in depths (``layers``: N of the model's transformer layers, the others
dropped before fine-tuning, chosen by :func:`kept_layers`; a shallower one starts from its
general stage, :mod:`engine.students.general`), and where the teacher's encoder
gave its vectors of the rows (a teacher head's, cached beside the soft labels), it learns them
too: its mean-pooled last hidden state, through a learned projection that is not shipped,
against the teacher's vector (:func:`engine.students.losses.feature_loss`, weight
``feature_weight``). Two checks guard the export: the fp32 graph against PyTorch
(:data:`engine.encoders.text_classifier.PARITY_TOLERANCE`; failing is refused, 50010), then the
int8 graph (the shared quantiser, :func:`engine.encoders.export.quantize_int8`) against the
fp32 one (:data:`INT8_TOLERANCE`): beyond it the student ships in fp32.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from sqlheads.engine.constraints import Interval, OneOf, Params, Text, allowed_of, param
from sqlheads.engine.encoders.text_classifier import (
    OnnxTextClassifier,
    export_checked,
    load_classifier,
    max_probability_difference,
    model_directory,
    with_contract,
)
from sqlheads.engine.progress import Progress
from sqlheads.engine.students.distillation import DistillParams
from sqlheads.engine.students.general import (
    RECIPE,
    default_sentences,
    general_student,
    keep_layers,
)
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
# Which of the model's layers a shallower student keeps (kept_layers).
LAYER_CHOICES = ("spread", "first", "spread_to_last")
LAYER_CHOICE = "spread"
# The feature loss's weight beside the soft labels' KL (0: soft labels alone), unless told, for
# a student of at least FEATURE_LAYERS layers (default_feature_weight). Two layers of six on
# Rotten Tomatoes after a 30,000-sentence general stage, three training seeds
# (bench.dial_probes): 81.7, 81.4 and 81.6 % without it, 81.5, 81.4 and 81.0 % with it;
# `bench dial`: 81.9 % against 81.5 %. Three layers there: 84.4 % with it, 84.2 % without; six:
# 85.6 and 85.5 %.
FEATURE_WEIGHT = 1.0
FEATURE_LAYERS = 3
# The gold labels' cross-entropy beside the soft labels' KL, unless told (issue 39: two layers
# of six on Rotten Tomatoes, three training seeds each, paired: 0.5 scored 0.7-0.9 point above
# the KL alone at every seed; bench.dial_probes).
GOLD_WEIGHT = 0.5
# The learning rate unless told (default_lr): the usual one for fine-tuning MiniLM whole; a
# student that lost layers has more to relearn (three of six, one epoch: 81.4 % of Rotten
# Tomatoes' held-out rows at 2e-4, 77.4 % at 5e-5).
LR_WHOLE, LR_SHALLOW = 5e-5, 2e-4
# What the classification layer reads: the mean of the last hidden states over the text's
# tokens (as a sentence encoder is trained to be read, and the vector the feature loss pulls
# toward the teacher's), or the model's [CLS] pooler. Three layers of six, one epoch at 2e-4:
# 81.4 % either way without the feature loss, 81.6 and 80.8 % with it, and the [CLS] student's
# int8 graph moved its probabilities past the tolerance (it shipped feed-forward fp32).
POOLINGS = ("mean", "cls")
POOLING = "mean"


def _tuner(name: str) -> tuple:
    """What :class:`TunerParams` accepts for ``name``: the knob the tuner reads, checked where
    the encoder student's parameters are built."""
    return allowed_of(TunerParams, name)


# --layers' and --feature-weight's help (constants: the API page prints a field on one line)
LAYERS_HELP = (
    "Encoder student: keep N of its model's transformer layers (MiniLM-L6: 1 to 6; default "
    "all): fewer score faster."
)
FEATURE_WEIGHT_HELP = (
    "Encoder student: weight of learning the teacher head's encoder vectors beside its soft "
    f"labels (0: soft labels alone; default {FEATURE_WEIGHT:g} where the teacher gives them, "
    f"0 under {FEATURE_LAYERS} layers)."
)


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
    # transformer layers kept of the model's (None: all of them); at most the model's (50012)
    layers: int | None = param(
        None,
        Interval(int, 1, None),
        None,
        about=LAYERS_HELP,
    )
    # the teacher-vector loss's weight beside the soft labels' KL (0: soft labels alone; None:
    # default_feature_weight by depth where the teacher gives its vectors, none where it gives none)
    feature_weight: float | None = param(
        None,
        Interval(float, 0, 100),
        None,
        about=FEATURE_WEIGHT_HELP,
    )
    # which of the model's layers it keeps (kept_layers), what its classifier reads (POOLINGS):
    # bench probes (bench.dial_probes), not a door's
    layer_choice: str = param(LAYER_CHOICE, OneOf(LAYER_CHOICES), door=False)
    pooling: str = param(POOLING, OneOf(POOLINGS), door=False)
    # IMDB sentences a shallower student's layers first learn the whole model's hidden states
    # on (engine.students.general; 0: none, the task alone; None: default_sentences, by depth);
    # built once per machine and depth
    general_sentences: int | None = param(None, Interval(int, 0, 1_000_000), None, door=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.layers is not None:  # a depth the model has not: refused where it is built
            check_layers(self.model, self.layers)

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
    layers_kept_: list[int] = field(default_factory=list, init=False)  # the model's layers kept
    feature_rows_: int = field(default=0, init=False)  # rows that taught their teacher's vector
    feature_weight_: float = field(default=0.0, init=False)  # the feature loss's weight, as used
    general_sentences_: int = field(default=0, init=False)  # its general stage's; 0: none
    general_seconds_: float = field(default=0.0, init=False)  # spent on it here (0: cached)

    def __post_init__(self) -> None:
        self._scorer: OnnxTextClassifier | None = None

    def fit(
        self,
        texts: Sequence[str],
        classes: Sequence[str],
        teacher_logits: np.ndarray,
        gold: np.ndarray,
        *,
        teacher_vectors: np.ndarray | None = None,
        distill: DistillParams | None = None,
        progress: Progress | None = None,
    ) -> EncoderStudent:
        """Distil from ``teacher_logits`` (NaN rows: no soft label) and ``gold`` (class index,
        -1 where unlabelled), as :meth:`WordStudent.fit` does; and from ``teacher_vectors``
        (the teacher encoder's vector of each row, NaN rows where it has none), if given and
        ``feature_weight`` is not 0; checkpoints go to the parameters' ``work_dir``."""
        from sqlheads.engine.devices import resolve_device
        from sqlheads.engine.training.fine_tuning import prepared
        from sqlheads.engine.training.tuner import Tuner, data_fingerprint

        p = self.params
        distill = distill or DistillParams()
        if distill.gold_weight is None:
            distill = replace(distill, gold_weight=GOLD_WEIGHT)
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
        depth = model_depth(model_dir)
        self.layers_kept_ = kept_layers(depth, p.layers or depth, p.layer_choice)
        start = self._start(model_dir, device, progress)
        net = load_classifier(start, len(self.classes_), distill.seed)
        if start == model_dir:  # a general student has only the kept layers already
            keep_layers(net, self.layers_kept_)
        if p.pooling == "mean":
            net = _mean_pooled(net)
        weight = p.feature_weight
        if weight is None:
            weight = default_feature_weight(len(self.layers_kept_))
        if weight == 0 or teacher_vectors is None:
            teacher_vectors, weight = None, 0.0
        trained, loss = _training(
            net, teacher_logits, gold, teacher_vectors, distill, weight, device
        )
        self.feature_rows_, self.feature_weight_ = _rows_with(teacher_vectors), weight
        tuner = Tuner(
            p.tuner(distill),
            device,
            pad_id=tokenizer.pad_id,
            work_dir=None if p.work_dir is None else Path(p.work_dir),
            fingerprint={
                "model": str(start),
                "data": data_fingerprint(ids, np.nan_to_num(teacher_logits)),
                "vectors": data_fingerprint([], np.nan_to_num(teacher_vectors))
                if teacher_vectors is not None
                else None,
                "distill": asdict(distill),
                "layers": self.layers_kept_,
            },
        )
        result = tuner.fit(trained, ids, loss, progress=progress)
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
            "layers": json.dumps(self.layers_kept_),
        }
        parity_texts = list(texts[:PARITY_ROWS])
        fp32, self.parity_max_abs_diff_ = export_checked(
            net, tokenizer, contract, parity_texts, "encoder student"
        )
        self.onnx_ = self._quantised(fp32, contract, parity_texts)
        self._scorer = None
        return self

    def _start(self, model_dir: Path, device, progress: Progress | None) -> Path:
        """The weights the task's distillation starts from: the model's own, or, for a
        shallower student, its kept layers after the general stage (engine.students.general)."""
        p = self.params
        self.general_sentences_, self.general_seconds_ = 0, 0.0
        sentences = p.general_sentences
        if sentences is None:
            sentences = default_sentences(len(self.layers_kept_))
        if len(self.layers_kept_) == model_depth(model_dir) or not sentences:
            return model_dir
        started = time.perf_counter()
        start = general_student(
            p.model, self.layers_kept_, sentences=sentences,
            max_length=p.max_length, device=device, max_steps=p.max_steps, progress=progress,
        )  # fmt: skip
        self.general_seconds_ = round(time.perf_counter() - started, 1)
        recipe = json.loads((start / RECIPE).read_text(encoding="utf-8"))
        self.general_sentences_ = int(recipe["sentences"])  # fewer under max_steps
        if progress is not None:
            progress(0, None, f"distilling the {len(self.layers_kept_)}-layer student")
        return start

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


def model_depth(model: str | Path) -> int:
    """The transformer layers of a catalogue model or Hugging Face directory (its config)."""
    config = json.loads((model_directory(model) / "config.json").read_text(encoding="utf-8"))
    return int(config["num_hidden_layers"])


def check_layers(model: str | Path, layers: int) -> None:
    """50012 unless a student of ``layers`` of ``model``'s layers can be made."""
    depth = model_depth(model)
    if not 1 <= layers <= depth:
        raise InvalidParameterError(
            f"layers={layers} is out of range: {model} has {depth} transformer layers, and a "
            f"student keeps from 1 to {depth} of them; pass --layers between 1 and {depth} "
            f"(fewer: faster, less accurate)"
        )


def default_lr(model: str | Path, layers: int | None) -> float:
    """The learning rate of a student of ``layers`` of ``model``'s layers (None: all)."""
    whole = layers is None or layers == model_depth(model)
    return LR_WHOLE if whole else LR_SHALLOW


def default_feature_weight(layers: int) -> float:
    """The feature loss's weight for a student of ``layers`` layers, unless told: two layers
    or fewer learn the teacher's soft labels (and the gold labels) alone, where the vectors cost
    them accuracy (the figures at :data:`FEATURE_WEIGHT`; one layer follows two, unmeasured)."""
    return FEATURE_WEIGHT if layers >= FEATURE_LAYERS else 0.0


def kept_layers(depth: int, layers: int, choice: str = LAYER_CHOICE) -> list[int]:
    """Which of a model's ``depth`` layers a student of ``layers`` keeps, bottom first:
    ``spread`` evenly from the first (every other of six for three: 0, 2, 4; 0 and 3 for two),
    ``first`` (0, 1, 2) or ``spread_to_last`` (1, 3, 5; 2 and 5), which keeps the layer whose
    output the sentence encoder was trained to pool."""
    if choice == "first":
        return list(range(layers))
    spread = [i * depth // layers for i in range(layers)]
    if choice == "spread":
        return spread
    return [index + depth - 1 - spread[-1] for index in spread]


def _rows_with(vectors: np.ndarray | None) -> int:
    return 0 if vectors is None else int((~np.isnan(vectors).any(axis=1)).sum())


def _training(net, teacher_logits, gold, teacher_vectors, distill: DistillParams, weight, device):
    """The module the tuner trains and its loss: the student alone on the soft labels' KL, or,
    given the teacher's vectors, the student with its projection (:func:`_with_projection`)
    on the KL plus ``weight`` times the feature loss."""
    import torch

    from sqlheads.engine.students.losses import distillation_loss, feature_loss

    def tensor(array: np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(array)).to(device)

    has_teacher = tensor(~np.isnan(teacher_logits).any(axis=1))
    teacher = tensor(np.nan_to_num(teacher_logits).astype(np.float32))
    gold_t = tensor(np.array(gold, dtype=np.int64))  # a copy
    n_classes = teacher_logits.shape[1]
    trained = net
    if teacher_vectors is not None:
        has_vector = tensor(~np.isnan(teacher_vectors).any(axis=1))
        vectors = tensor(np.nan_to_num(teacher_vectors).astype(np.float32))
        trained = _with_projection(net, teacher_vectors.shape[1])

    def loss(outputs, rows):
        rows = rows.to(device)
        total = distillation_loss(
            outputs[:, :n_classes],
            teacher[rows],
            has_teacher[rows],
            gold_t[rows],
            temperature=distill.temperature,
            gold_weight=distill.gold_weight,
        )
        if teacher_vectors is None:
            return total
        projected = outputs[:, n_classes:]
        return total + weight * feature_loss(projected, vectors[rows], has_vector[rows])

    return trained, loss


def _with_projection(net, teacher_dim: int):
    """``net`` with a learned projection of its mean-pooled last hidden state onto the
    teacher's vectors' space, for training only: its ``logits`` are the class logits followed
    by the projected vector (the tuner hands its loss one tensor a row); what ships is ``net``
    alone, which this wraps without copying."""
    import torch
    from transformers.modeling_outputs import SequenceClassifierOutput

    from sqlheads.engine.encoders.export import masked_mean

    class WithProjection(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.student = net
            self.projection = torch.nn.Linear(net.config.hidden_size, teacher_dim)

        def forward(self, input_ids, attention_mask):
            if hasattr(self.student, "pooled"):  # a mean-pooled student: the vector it reads
                pooled = self.student.pooled(input_ids, attention_mask)
                logits = self.student.classify(pooled)
            else:
                out = self.student(
                    input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=True
                )
                pooled, logits = masked_mean(out.hidden_states[-1], attention_mask), out.logits
            projected = self.projection(pooled).to(logits.dtype)
            return SequenceClassifierOutput(logits=torch.cat([logits, projected], dim=1))

    return WithProjection()


def _mean_pooled(net):
    """``net``'s encoder with a fresh classification layer (seeded as ``net``'s was) that reads
    the mean of the last hidden states over the text's tokens instead of the [CLS] pooler,
    which is dropped. Exported and checked as ``net`` would be: it has its ``config``, its
    ``device`` and switches its attention implementation as a Hugging Face model does."""
    import torch
    from transformers.modeling_outputs import SequenceClassifierOutput

    from sqlheads.engine.encoders.export import masked_mean

    config = net.config
    base = net.base_model
    if getattr(base, "pooler", None) is not None:
        base.pooler = None
    dropout = getattr(config, "classifier_dropout", None) or config.hidden_dropout_prob

    class MeanPooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = base
            self.config = config
            self.dropout = torch.nn.Dropout(dropout)
            self.classifier = torch.nn.Linear(config.hidden_size, config.num_labels)

        @property
        def device(self):
            return next(self.parameters()).device

        def set_attn_implementation(self, implementation: str) -> None:
            self.encoder.set_attn_implementation(implementation)

        def pooled(self, input_ids, attention_mask):
            out = self.encoder(input_ids=input_ids, attention_mask=attention_mask)
            return masked_mean(out.last_hidden_state, attention_mask)

        def classify(self, pooled):
            return self.classifier(self.dropout(pooled))

        def forward(self, input_ids, attention_mask):
            logits = self.classify(self.pooled(input_ids, attention_mask))
            return SequenceClassifierOutput(logits=logits)

    return MeanPooled()


def load(blob: bytes) -> OnnxTextClassifier:
    """A stored encoder student, ready to score (onnxruntime only)."""
    return OnnxTextClassifier.from_bytes(blob, kind=KIND)
