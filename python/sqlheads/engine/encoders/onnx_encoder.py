"""Sentence encoders at inference: onnxruntime, the fast tokenizer, pooled windows, a cache.

The graph (see :mod:`engine.encoders.export`) returns mean-pooled, L2-normalised vectors; this
module needs neither torch nor transformers, so scoring hosts stay light.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from sqlheads.engine.constraints import Instance, Interval, OneOf, Params, Text, param
from sqlheads.engine.progress import Progress
from sqlheads.errors import DimensionMismatchError, EncoderNotCachedError, InvalidParameterError

DEFAULT_MAX_LENGTH = 256
DEFAULT_BATCH_TOKENS = 4096
# OnnxEncoder's batches on a CPU: at most this many padded tokens (two full windows), so a
# batch's activations stay in the core's cache. Measured with the int8 graph against 4,096 (the
# budget the PyTorch path keeps for GPUs), interleaved, 2-core Intel Xeon (VNNI) at load 7-10:
# IMDB at 256 tokens 1.40x faster at 1 thread and 1.64x at 2; Rotten Tomatoes the same at 1.
CPU_BATCH_TOKENS = 512
# onnxruntime's graph optimisations that an encoder session leaves out: SkipLayerNormFusion
# would fold each residual Add + LayerNormalization back into the CPU SkipLayerNormalization
# kernel that the export avoids (see :func:`sqlheads.engine.encoders.export.fuse`).
UNFUSED = ("SkipLayerNormFusion",)
LONG_TEXT_MODES = ("window", "truncate")
# How much of a window the next one repeats, so a sentence cut by one window is whole in the
# next. A quarter: the study in `python -m bench windows` (docs/benchmarks.md) weighs it.
WINDOW_OVERLAP = 0.25


# CPU flags of the int8 dot-product instructions onnxruntime's kernels use when present: with
# them, four u8 x s8 products add straight into int32; without (AVX2, AVX-512F) pairs are summed
# in int16 first, which is why int8 weights are 7-bit (see export.quantize_int8).
VNNI_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")


def int8_kernels(cpuinfo: str | None = None) -> str:
    """``"VNNI (<flags>)"`` or ``"no VNNI"``: which int8 kernels this CPU runs, from
    ``/proc/cpuinfo`` (``"unknown"`` where there is none to read)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return "unknown"
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    found = [flag for flag in VNNI_FLAGS if flag in flags]
    return f"VNNI ({', '.join(found)})" if found else "no VNNI"


def cache_dir() -> Path:
    """Where exported encoders are cached on disk: ``SQLHEADS_CACHE`` or ``~/.cache/sqlheads``."""
    return Path(os.environ.get("SQLHEADS_CACHE", Path.home() / ".cache" / "sqlheads"))


@dataclass(frozen=True)
class EncoderArtifact:
    """Everything a host stores about an encoder; ``sha256`` identifies it."""

    name: str
    onnx: bytes
    tokenizer_json: str
    dim: int
    max_length: int
    quantization: str
    source: str
    parity_cosine: float

    @property
    def sha256(self) -> str:
        return encoder_sha256(self.onnx, self.tokenizer_json)


def encoder_sha256(onnx: bytes, tokenizer_json: str) -> str:
    digest = hashlib.sha256(onnx)
    digest.update(tokenizer_json.encode("utf-8"))
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------------
# Tokenising


class Tokenizer:
    """The fast Rust tokenizer, with windows of ``max_length`` tokens for long texts."""

    def __init__(
        self, tokenizer_json: str, max_length: int, overlap: float = WINDOW_OVERLAP
    ) -> None:
        from tokenizers import Tokenizer as RustTokenizer

        self._tokenizer = RustTokenizer.from_str(tokenizer_json)
        # The saved padding names the family's pad id (BERT [PAD] = 0, RoBERTa/MPNet <pad> = 1,
        # which is also their position padding index).
        padding = self._tokenizer.padding
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()
        self.max_length = max_length
        if not 0 <= overlap < 1:
            raise InvalidParameterError(f"overlap {overlap} must be in [0, 1), e.g. 0.25")
        self.overlap = overlap
        specials = self._tokenizer.encode("", add_special_tokens=True).ids
        # [CLS] text [SEP] (BERT) or <s> text </s> (RoBERTa, MPNet); windows reuse the frame.
        self._prefix, self._suffix = specials[:1], specials[1:]
        self._pad_id = (
            padding["pad_id"]
            if padding
            else next(
                (
                    pad
                    for pad in map(self._tokenizer.token_to_id, ("[PAD]", "<pad>"))
                    if pad is not None
                ),
                0,
            )
        )
        self.body_length = max_length - len(self._prefix) - len(self._suffix)

    def encode(self, texts: Sequence[str], *, truncate: bool) -> list[list[int]]:
        """One id list per text, cut at ``max_length`` (the first window only)."""
        return [windows[0] for windows in self.windows(texts, truncate=truncate)]

    def windows(self, texts: Sequence[str], *, truncate: bool) -> list[list[list[int]]]:
        """Each text as one or more framed windows; long texts overlap by ``overlap``."""
        stride = max(1, int(self.body_length * (1 - self.overlap)))
        # no character offsets (unused): the same ids, faster (as the word student's)
        encoded = self._tokenizer.encode_batch_fast(list(texts), add_special_tokens=False)
        result = []
        for encoding in encoded:
            body = encoding.ids
            if truncate or len(body) <= self.body_length:
                starts = [0]
            else:
                starts = list(range(0, len(body) - self.body_length + stride, stride))
            result.append(
                [self._prefix + body[s : s + self.body_length] + self._suffix for s in starts]
            )
        return result

    def share_past_window(self, texts: Sequence[str]) -> float:
        """The share of ``texts`` longer than one window of ``max_length`` tokens: the rows a
        model reading the first window sees only in part."""
        if not texts:
            return 0.0
        encoded = self._tokenizer.encode_batch_fast(list(texts), add_special_tokens=False)
        return sum(len(e.ids) > self.body_length for e in encoded) / len(encoded)

    def frame(self, body: Sequence[int]) -> list[int]:
        """Token ids framed as a text's are: ``[CLS] body [SEP]`` (BERT), ``<s> body </s>``."""
        return self._prefix + list(body) + self._suffix

    @property
    def pad_id(self) -> int:
        return int(self._pad_id)

    def pad(self, sequences: Sequence[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        return pad_ids(sequences, self._pad_id)


def pad_ids(sequences: Sequence[list[int]], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Token id lists as one padded ``input_ids`` matrix and its ``attention_mask``."""
    width = max(len(s) for s in sequences)
    ids = np.full((len(sequences), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(sequences), width), dtype=np.int64)
    for row, sequence in enumerate(sequences):
        ids[row, : len(sequence)] = sequence
        mask[row, : len(sequence)] = 1
    return ids, mask


def bucket_width(width: int, multiple: int, cap: int) -> int:
    """``width`` rounded up to a multiple of ``multiple``, at most ``cap`` (and never below
    ``width``): a GPU then sees a few padded shapes, so compiled graphs and attention plans are
    made once per bucket instead of once per length."""
    return max(width, min(-(-width // multiple) * multiple, cap))


def pad_to_width(
    ids: np.ndarray, mask: np.ndarray, width: int, pad_id: int
) -> tuple[np.ndarray, np.ndarray]:
    """A padded batch widened to ``width`` columns of padding (masked out: same outputs)."""
    extra = width - ids.shape[1]
    if extra <= 0:
        return ids, mask
    return (
        np.pad(ids, ((0, 0), (0, extra)), constant_values=pad_id),
        np.pad(mask, ((0, 0), (0, extra)), constant_values=0),
    )


# ---------------------------------------------------------------------------------------------
# Inference


@dataclass
class Encoded:
    """Vectors of a batch of texts, and how many windows each text needed."""

    vectors: np.ndarray
    windows: np.ndarray


class SessionTuning(NamedTuple):
    """How an encoder's onnxruntime session runs; the defaults are sqlheads' measured choice.

    ``spin``: onnxruntime's default lets idle pool threads spin-wait for the next operator,
    which wins a little on cores of one's own and loses badly where other work shares them (a
    database server; the 2-core build machine under load: ``python -m bench encode``).
    ``disabled_optimizers``: onnxruntime graph optimisations left out (:data:`UNFUSED`).
    ``profile_prefix``: write onnxruntime's per-operator profile under this prefix.
    """

    spin: bool = False
    disabled_optimizers: tuple[str, ...] = UNFUSED
    profile_prefix: str | None = None


DEFAULT_TUNING = SessionTuning()


def default_threads() -> int:
    """An encoder's threads unless told: ``OMP_NUM_THREADS`` where it is set (torch reads it
    too: one cap for both), else the cores this process may run on (a container's or a
    pinned process's share, not the machine's count)."""
    told = os.environ.get("OMP_NUM_THREADS", "")
    if told.isdigit() and int(told) > 0:
        return int(told)
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def encoder_session(
    model: str | Path | bytes, threads: int | None = None, tuning: SessionTuning = DEFAULT_TUNING
):
    """An onnxruntime CPU session over an exported encoder (a path, or the bytes themselves)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or default_threads()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", str(int(tuning.spin)))
    if tuning.profile_prefix:
        options.enable_profiling = True
        options.profile_file_prefix = tuning.profile_prefix
    return ort.InferenceSession(
        model if isinstance(model, bytes) else str(model),
        options,
        providers=["CPUExecutionProvider"],
        disabled_optimizers=list(tuning.disabled_optimizers),
    )


@dataclass(frozen=True)
class Batching(Params):
    """How an encoder cuts texts into batches: a text past ``max_length`` tokens as pooled
    windows or its first window (``long_text``), at most ``batch_size`` windows a batch and,
    unless ``batch_tokens`` is None, at most that many padded tokens."""

    long_text: str = param(LONG_TEXT_MODES[0], OneOf(LONG_TEXT_MODES))
    batch_size: int = param(32, Interval(int, 1))
    batch_tokens: int | None = param(DEFAULT_BATCH_TOKENS, Interval(int, 1), None)


class OnnxEncoder:
    """Embeds texts with an exported encoder: length-sorted batches, pooled windows."""

    def __init__(
        self,
        onnx_path: str | Path | bytes,
        tokenizer_json: str,
        *,
        dim: int,
        max_length: int,
        threads: int | None = None,
        overlap: float = WINDOW_OVERLAP,
        tuning: SessionTuning = DEFAULT_TUNING,
    ) -> None:
        # bytes: a model kept in memory where the cache folder is not writable
        self.session = encoder_session(onnx_path, threads, tuning)
        self._tokenizer = Tokenizer(tokenizer_json, max_length, overlap)
        self.dim = dim
        self.max_length = max_length

    def encode(
        self,
        texts: Sequence[str],
        *,
        long_text: str = "window",
        batch_size: int = 32,
        batch_tokens: int | None = CPU_BATCH_TOKENS,
        progress: Progress | None = None,
    ) -> Encoded:
        """L2-normalised vectors, one row per text.

        ``long_text="window"`` embeds a text longer than ``max_length`` tokens as overlapping
        windows and averages their vectors weighted by tokens; ``"truncate"`` keeps the first
        window. Windows of all texts are sorted by length and batched together; a batch holds
        at most ``batch_size`` windows and, unless ``batch_tokens`` is None, at most that many
        padded tokens, so long windows go in smaller batches. ``progress`` hears of the windows
        embedded after each batch: ``(windows done, windows)``.
        """

        def run(ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
            return self.session.run(None, {"input_ids": ids, "attention_mask": mask})[0]

        batching = Batching(long_text, batch_size, batch_tokens)
        return encode_windows(
            self._tokenizer, texts, run, batching, dim=self.dim, progress=progress
        )


def encode_windows(
    tokenizer: Tokenizer,
    texts: Sequence[str],
    run: Callable[[np.ndarray, np.ndarray], np.ndarray],
    batching: Batching,
    *,
    dim: int,
    progress: Progress | None,
    windows: list[list[list[int]]] | None = None,
) -> Encoded:
    """Windows, length-sorted batches and token-weighted pooling around ``run``.

    ``windows``: ``tokenizer.windows(texts, ...)`` already made (a pipeline tokenises ahead).

    ``run(input_ids, attention_mask)`` returns one L2-normalised vector per window (an array,
    or anything with ``shape`` that NumPy can convert, read only after the last batch); the ONNX
    session and PyTorch (:mod:`engine.encoders.torch_encoder`) both go through here, so their
    windows, truncation and averaging cannot drift apart.
    """
    truncate = batching.long_text == "truncate"
    per_text = tokenizer.windows(texts, truncate=truncate) if windows is None else windows
    flat = [window for windows in per_text for window in windows]
    owner = np.repeat(np.arange(len(per_text)), [len(w) for w in per_text])
    window_vectors = np.zeros((len(flat), dim), dtype=np.float32)
    # Sorting by length keeps padding, and so wasted arithmetic, to a minimum.
    lengths = np.array([len(w) for w in flat])
    order = np.argsort(lengths, kind="stable")
    # Outputs are read back after the last batch, not after each: a GPU's results (see
    # torch_encoder) then copy to the host once, and the device never waits for the host.
    pending, done = [], 0
    for chunk in length_batches(order, lengths, batching.batch_size, batching.batch_tokens):
        ids, mask = tokenizer.pad([flat[i] for i in chunk])
        out = run(ids, mask)
        if out.shape[1] != dim:
            raise DimensionMismatchError(
                f"the encoder returns {out.shape[1]} dimensions but is registered "
                f"with {dim}: register it again"
            )
        pending.append((chunk, out))
        done += len(chunk)
        if progress is not None:
            progress(done, len(flat), None)
    for chunk, out in pending:
        window_vectors[chunk] = np.asarray(out)
    weights = lengths.astype(np.float32)
    vectors = np.zeros((len(per_text), dim), dtype=np.float32)
    np.add.at(vectors, owner, window_vectors * weights[:, None])
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors /= np.maximum(norms, 1e-12)
    return Encoded(vectors=vectors, windows=np.array([len(w) for w in per_text]))


def length_batches(
    order: np.ndarray, lengths: np.ndarray, batch_size: int, batch_tokens: int | None
) -> list[np.ndarray]:
    """Consecutive runs of ``order`` (ascending length) within both limits, one row at least."""
    batches, start = [], 0
    while start < len(order):
        end = min(start + batch_size, len(order))
        if batch_tokens is not None:
            # Sorted ascending, a batch's width is its last window's length.
            while end - start > 1 and (end - start) * lengths[order[end - 1]] > batch_tokens:
                end -= 1
        batches.append(order[start:end])
        start = end
    return batches


# ---------------------------------------------------------------------------------------------
# Cache: bytes cross into a host process once, then live on disk and in memory by sha256.

_loaded: dict[tuple[str, int | None, int | None], OnnxEncoder] = {}


def write_cache_dir(folder: Path, onnx: bytes, tokenizer_json: str, meta: dict) -> None:
    """Write atomically: a reader never sees a half-written model."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder.parent) as tmp:
        staging = Path(tmp) / "staging"
        staging.mkdir()
        (staging / "model.onnx").write_bytes(onnx)
        (staging / "tokenizer.json").write_text(tokenizer_json, encoding="utf-8")
        (staging / "meta.json").write_text(json.dumps(meta))
        try:
            staging.rename(folder)
        except OSError:
            if not (folder / "meta.json").is_file():  # lost a race to another writer: fine
                raise


def cached_encoder_path(sha256: str) -> Path:
    return cache_dir() / "encoders" / sha256


def is_cached(sha256: str) -> bool:
    return (cached_encoder_path(sha256) / "meta.json").is_file()


GRAPH = Instance((bytes, bytearray), "an ONNX graph's bytes")


@dataclass(frozen=True)
class EncoderRef(Params):
    """A registered encoder as a script or a verb names it: its ``sha256`` (the cache's key),
    and, for a process whose cache lacks it, its bytes (``onnx``, ``tokenizer_json``) with its
    ``dim`` and windows (``max_length``). At a door: ``encoder_sha256``, ``encoder_onnx``,
    ``tokenizer_json``, ``dim``, ``max_length`` (the names T-SQL passes)."""

    sha256: str | None = param(None, Text("an encoder's sha256"), None, flat="encoder_sha256")
    onnx: bytes | None = param(
        None, Instance((bytes,), "an ONNX graph's bytes"), None, flat="encoder_onnx"
    )
    tokenizer_json: str | None = param(None, Text("a tokenizer's JSON"), None)
    dim: int | None = param(None, Interval(int, 1), None)
    max_length: int | None = param(None, Interval(int, 1), None)  # tokens per window


def load_encoder(encoder: EncoderRef, *, threads: int | None = None) -> OnnxEncoder:
    """The encoder ``encoder`` names, from memory, the disk cache, or the bytes it carries.

    A copy on disk is used only if it still hashes to its sha256: the folder is shared by every
    user of the server's scripts, so it is verified, not trusted. A folder the process may not
    write (SQL Server's sandbox runs scripts as another user) is not an error: the encoder is
    then built from the bytes in memory, for this process only.

    Raises :class:`EncoderNotCachedError` when no verified copy is at hand and no bytes were
    passed: the caller (a T-SQL procedure) then calls again with the blob.
    """
    sha256, max_length = encoder.sha256 or "", encoder.max_length
    for (loaded_sha, window, loaded_threads), loaded in _loaded.items():
        # A caller without a window of its own (heads.embed passes the sha256 alone) takes the
        # one this process already loaded the bytes with.
        if (loaded_sha, loaded_threads) == (sha256, threads) and max_length in (None, window):
            return loaded
    folder = cached_encoder_path(sha256)
    cached = _verified_cache(folder, sha256)
    if cached is None:
        onnx, tokenizer_json, dim = encoder.onnx, encoder.tokenizer_json, encoder.dim
        if onnx is None or tokenizer_json is None or dim is None or max_length is None:
            raise EncoderNotCachedError(
                f"encoder {sha256[:12]} is not in the cache at {folder} (or its copy there "
                "does not match its sha256): pass its bytes"
            )
        actual = encoder_sha256(onnx, tokenizer_json)
        if actual != sha256:
            raise EncoderNotCachedError(
                f"encoder bytes hash to {actual[:12]}, not {sha256[:12]}: the stored blob is "
                "corrupt; register the encoder again"
            )
        meta = {"dim": dim, "max_length": max_length}
        try:
            _replace_cache_dir(folder, onnx, tokenizer_json, meta)
            model: str | bytes | Path = folder / "model.onnx"
        except OSError:
            model = onnx  # not writable here: this process keeps it in memory
    else:
        model, tokenizer_json, meta = cached
    # The same bytes may be registered with other window lengths (two databases sharing this
    # cache, or a test's 64-token fp32 MiniLM): the caller's registration decides the windows,
    # the cache folder's note only when the caller has none to give.
    loaded = OnnxEncoder(
        model,
        tokenizer_json,
        dim=meta["dim"],
        max_length=max_length or meta["max_length"],
        threads=threads,
    )
    _loaded[(sha256, loaded.max_length, threads)] = loaded
    return loaded


def _verified_cache(folder: Path, sha256: str) -> tuple[Path, str, dict] | None:
    """``(model path, tokenizer JSON, meta)`` if the folder holds bytes hashing to ``sha256``."""
    try:
        meta = json.loads((folder / "meta.json").read_text())
        tokenizer_json = (folder / "tokenizer.json").read_text(encoding="utf-8")
        onnx = (folder / "model.onnx").read_bytes()
    except (OSError, ValueError):
        return None
    if encoder_sha256(onnx, tokenizer_json) != sha256:
        return None
    return folder / "model.onnx", tokenizer_json, meta


def _replace_cache_dir(folder: Path, onnx: bytes, tokenizer_json: str, meta: dict) -> None:
    """Write the cache folder, first moving aside a copy that failed verification."""
    if folder.exists():
        stale = folder.with_name(f"{folder.name}.stale-{os.getpid()}")
        folder.rename(stale)
        shutil.rmtree(stale, ignore_errors=True)
    write_cache_dir(folder, onnx, tokenizer_json, meta)
