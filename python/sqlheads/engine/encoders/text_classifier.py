"""Transformer sequence classifiers as one ONNX blob: loading, export, parity, scoring.

The teacher and the encoder student are both a Hugging Face encoder with a classification
layer. Fitted, each is exported to one ONNX graph (``input_ids``, ``attention_mask`` ->
``logits``) that carries its own contract in its metadata (kind, classes, the tokenizer JSON
and the token limit), as the word student's graph does: one blob scores raw text with
onnxruntime anywhere, and a teacher's blob gives soft labels again without PyTorch.
"""

from __future__ import annotations

import io
import json
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sqlheads.engine.encoders.onnx_encoder import (
    CPU_BATCH_TOKENS,
    Tokenizer,
    encoder_session,
)
from sqlheads.errors import (
    DimensionMismatchError,
    ExportParityError,
    InvalidParameterError,
    UnsupportedTeacherError,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # weights come from disk; the hub is unreachable

# model_type values whose sequence classifiers fine-tune and export with one recipe (DeBERTa
# v2 and v3 share "deberta-v2").
FAMILIES = ("bert", "mpnet", "roberta", "deberta-v2")
# fp32 ONNX against PyTorch, largest difference of any class probability on a padded batch.
PARITY_TOLERANCE = 1e-3
# Rows a scoring batch holds at most, as an encoder's (OnnxEncoder.encode): on 2 CPU cores a
# six-layer MiniLM student scored 325 rows/s in batches of at most 32 rows and 512 padded tokens,
# against 106 in batches of 64 rows and 145 of 64 rows and 1,024 tokens (Rotten Tomatoes'
# 1,706 held-out reviews, load 6 to 7).
SCORE_BATCH = 32


def model_directory(model: str | Path) -> Path:
    """A catalogue name (``all-mpnet-base-v2``) or a local Hugging Face directory."""
    from sqlheads.engine.encoders.catalog import CATALOG, catalog_encoder

    if str(model) in CATALOG:
        return catalog_encoder(str(model)).model_dir()
    path = Path(model)
    if not (path / "config.json").is_file():
        raise InvalidParameterError(
            f"{model} is neither a catalogue model ({', '.join(CATALOG)}) nor a Hugging Face "
            "directory with config.json: save the model with save_pretrained, or name one of those"
        )
    return path


def check_family(model_dir: Path):
    """The directory's config, refusing families this recipe was not written for (50056)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(model_dir))
    if config.model_type not in FAMILIES:
        raise UnsupportedTeacherError(
            f"{model_dir} is a {config.model_type!r} model; teachers and encoder students are "
            f"fine-tuned from {', '.join(FAMILIES)} encoders: pick a model of one of those families"
        )
    return config


def tokenizer_json(model_dir: Path) -> str:
    """The fast tokenizer's JSON; a directory without one (DeBERTa-v3's spm.model) is
    converted once by transformers."""
    saved = model_dir / "tokenizer.json"
    if saved.is_file():
        return saved.read_text(encoding="utf-8")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(model_dir), use_fast=True).backend_tokenizer.to_str()


def load_classifier(model_dir: Path, n_classes: int, seed: int):
    """A sequence classifier with a fresh ``n_classes`` layer on the directory's encoder,
    initialised from ``seed`` (the same request gives the same model)."""
    import torch
    from transformers import AutoModelForSequenceClassification
    from transformers.utils import logging as transformers_logging

    check_family(model_dir)
    transformers_logging.set_verbosity_error()  # the new classifier layer is expected
    transformers_logging.disable_progress_bar()
    torch.manual_seed(seed)
    return AutoModelForSequenceClassification.from_pretrained(str(model_dir), num_labels=n_classes)


def same_length_batches(
    lengths: np.ndarray, batch_size: int, batch_tokens: int
) -> list[np.ndarray]:
    """Row indices in batches of one token length each, shortest first, at most ``batch_size``
    rows and ``batch_tokens`` tokens (one row at least)."""
    order = np.argsort(lengths, kind="stable")
    batches = []
    for length in np.unique(lengths):
        rows = order[lengths[order] == length]
        size = max(1, min(batch_size, batch_tokens // max(int(length), 1)))
        batches += [rows[start : start + size] for start in range(0, len(rows), size)]
    return batches


def torch_logits(model, tokenizer: Tokenizer, texts: Sequence[str], device, batch_size: int):
    """PyTorch logits, in batches of similar length (rows back in the caller's order)."""
    import torch

    from sqlheads.engine.devices import supports_bf16

    ids = tokenizer.encode(texts, truncate=True)
    out = np.zeros((len(ids), model.config.num_labels), dtype=np.float32)
    order = np.argsort([len(s) for s in ids], kind="stable")
    model.eval()
    with torch.no_grad(), torch.autocast(device.type, torch.bfloat16, supports_bf16(device)):
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            padded, mask = tokenizer.pad([ids[i] for i in rows])
            logits = model(
                input_ids=torch.from_numpy(padded).to(device),
                attention_mask=torch.from_numpy(mask).to(device),
            ).logits
            out[rows] = logits.float().cpu().numpy()
    return out


def export_checked(
    model, tokenizer: Tokenizer, contract: dict[str, str], texts: Sequence[str], what: str
) -> tuple[bytes, float]:
    """The fp32 graph of ``model`` with ``contract`` in its metadata, checked against PyTorch
    on ``texts`` (a padded batch of mixed lengths): onnxruntime's fusions where they keep the
    result, the plain graph otherwise; refused (50010) when neither matches."""
    from sqlheads.engine.encoders.export import fuse

    model = model.to("cpu").float().eval()
    expected = torch_logits(model, tokenizer, texts, model.device, len(texts) or 1)
    plain = with_contract(_trace(model, tokenizer), contract)
    try:
        candidates = [with_contract(fuse(plain, model.config), contract), plain]
    except Exception:  # noqa: BLE001 - a family the fusions do not know stays unfused
        candidates = [plain]
    for graph in candidates:
        worst = max_probability_difference(OnnxTextClassifier(graph).logits(texts), expected)
        if worst <= PARITY_TOLERANCE:
            return graph, worst
    raise ExportParityError(
        f"the {what}'s ONNX export differs from PyTorch by {worst:.2e} in probability "
        f"(> {PARITY_TOLERANCE}): fine-tune it again, or report the transformers and "
        "onnxruntime versions"
    )


def _trace(model, tokenizer: Tokenizer) -> bytes:
    import torch

    previous = model.config._attn_implementation
    # Eager attention exports the pattern onnxruntime fuses; SDPA's masked one it leaves apart.
    model.set_attn_implementation("eager")

    class Logits(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            return self.model(input_ids=input_ids, attention_mask=attention_mask).logits

    sample = tokenizer.pad(
        tokenizer.encode(["A short one.", "A longer text, to pad."], truncate=True)
    )
    try:
        return trace_text_model(Logits().eval(), sample, "logits")
    finally:
        model.set_attn_implementation(previous)


def trace_text_model(module, sample: tuple[np.ndarray, np.ndarray], output: str) -> bytes:
    """A module of ``(input_ids, attention_mask)`` as one self-contained ONNX graph, dynamic in
    batch and length. The TorchScript exporter, as for encoders (encoders/export.py): it warns
    that it is the legacy path, and the tracer warns about constants; the callers' parity
    checks decide whether the graph is right."""
    import torch

    buffer = io.BytesIO()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            (torch.from_numpy(sample[0]), torch.from_numpy(sample[1])),
            buffer,
            input_names=["input_ids", "attention_mask"],
            output_names=[output],
            dynamic_axes={
                "input_ids": {0: "batch", 1: "tokens"},
                "attention_mask": {0: "batch", 1: "tokens"},
                output: {0: "batch"},
            },
            opset_version=17,
            dynamo=False,
        )
    return buffer.getvalue()


def with_contract(onnx_bytes: bytes, contract: dict[str, str]) -> bytes:
    import onnx

    model = onnx.load_from_string(onnx_bytes)
    del model.metadata_props[:]
    for key, value in contract.items():
        model.metadata_props.add(key=key, value=value)
    return model.SerializeToString()


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def max_probability_difference(a_logits: np.ndarray, b_logits: np.ndarray) -> float:
    return float(np.abs(softmax(a_logits) - softmax(b_logits)).max()) if len(a_logits) else 0.0


@dataclass
class OnnxTextClassifier:
    """A fitted classifier's graph, scored from raw text by onnxruntime."""

    onnx_: bytes = field(repr=False)
    kind: str = ""
    classes_: list[str] = field(default_factory=list)
    n_parameters_: int = 0
    metadata: dict[str, str] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        # The encoders' session: fused by export.fuse, run without re-fusing LayerNormalization.
        self._session = encoder_session(self.onnx_)
        self.metadata = dict(self._session.get_modelmeta().custom_metadata_map)
        self.kind = self.metadata.get("kind", "")
        self.classes_ = json.loads(self.metadata.get("classes", "[]"))
        self.n_parameters_ = int(self.metadata.get("parameters", 0))
        self._tokenizer = Tokenizer(
            self.metadata["tokenizer_json"], int(self.metadata["max_length"])
        )

    @classmethod
    def from_bytes(cls, blob: bytes, kind: str | None = None) -> OnnxTextClassifier:
        if kind is not None:
            found = cls(blob)
            if found.kind != kind:
                raise InvalidParameterError(
                    f"this blob is a {found.kind or 'non-sqlheads'!r} model, not a {kind}"
                )
            return found
        return cls(blob)

    def logits(self, texts: Sequence[str], batch_size: int = SCORE_BATCH) -> np.ndarray:
        """Batched by token length, one length a batch, at most ``batch_size`` rows and
        :data:`CPU_BATCH_TOKENS` tokens: no row is padded, so a row's logits do not depend on
        the rows beside it (a padded width did, in a float's last bit: issue 39)."""
        ids = self._tokenizer.encode(texts, truncate=True)
        out = np.zeros((len(ids), len(self.classes_)), dtype=np.float32)
        lengths = np.array([len(s) for s in ids])
        for rows in same_length_batches(lengths, batch_size, CPU_BATCH_TOKENS):
            padded, mask = self._tokenizer.pad([ids[i] for i in rows])
            got = self._session.run(None, {"input_ids": padded, "attention_mask": mask})[0]
            if got.shape[1] != len(self.classes_):
                raise DimensionMismatchError(
                    f"the {self.kind} graph returns {got.shape[1]} classes but lists "
                    f"{len(self.classes_)}: fit it again"
                )
            out[rows] = got
        return out

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        return softmax(self.logits(texts))

    def predict(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.classes_)[self.predict_proba(texts).argmax(axis=1)]

    def to_bytes(self) -> bytes:
        return self.onnx_

    def to_onnx(self) -> bytes:
        return self.onnx_

    def contract(self) -> dict[str, Any]:
        return dict(self.metadata)
