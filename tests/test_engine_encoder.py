"""The ONNX encoder: export parity with PyTorch, pooling, windows for long texts, the cache."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from sentence_transformers import SentenceTransformer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: bench/

from bench.batchings import BATCH_OF_32, batchings  # noqa: E402
from bench.emulated import cosine, embed_emulated  # noqa: E402
from sqlheads import datasets  # noqa: E402
from sqlheads.engine.encoders import export  # noqa: E402
from sqlheads.engine.encoders import onnx_encoder as encoder_module  # noqa: E402
from sqlheads.engine.encoders.int8 import MIN_COSINE_FLOOR  # noqa: E402
from sqlheads.engine.encoders.onnx_encoder import (  # noqa: E402
    WINDOW_OVERLAP,
    EncoderRef,
    OnnxEncoder,
    Tokenizer,
    int8_kernels,
    length_batches,
    load_encoder,
)
from sqlheads.errors import (  # noqa: E402
    EncoderNotCachedError,
    ExportParityError,
    InvalidParameterError,
    QuantizationError,
)

MIXED = [
    "Fine.",
    "An ambitious mess of a movie that is never boring.",
    "Two hours of my life I will not get back, and the popcorn was stale too.",
    "A quiet, devastating film about grief, memory and the small kindnesses of strangers "
    "that make a life bearable; the lead performance is extraordinary.",
]


@pytest.fixture(scope="module")
def fp32_artifact():
    return export.export_encoder(quantization="none")


@pytest.fixture(scope="module")
def peer() -> SentenceTransformer:
    return SentenceTransformer(str(export.default_model_dir()), device="cpu")


def _session(artifact, tmp_path, **kwargs) -> OnnxEncoder:
    path = tmp_path / "model.onnx"
    path.write_bytes(artifact.onnx)
    return OnnxEncoder(
        path, artifact.tokenizer_json, dim=artifact.dim, max_length=artifact.max_length, **kwargs
    )


def test_fp32_export_matches_sentence_transformers_on_padded_batches(fp32_artifact, peer, tmp_path):
    assert fp32_artifact.parity_cosine >= export.PARITY_THRESHOLD
    ours = _session(fp32_artifact, tmp_path).encode(MIXED, batch_size=4).vectors
    theirs = peer.encode(MIXED, normalize_embeddings=True)
    cosine = np.sum(ours * theirs, axis=1)
    assert cosine.min() >= 0.9999, cosine
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


@pytest.fixture(scope="module")
def int8_artifact():
    return export.export_encoder(quantization="int8")


def test_int8_default_stays_close_to_fp32(fp32_artifact, int8_artifact, tmp_path):
    assert len(int8_artifact.onnx) < len(fp32_artifact.onnx) / 3
    a = _session(fp32_artifact, tmp_path).encode(MIXED).vectors
    (tmp_path / "q").mkdir()
    b = _session(int8_artifact, tmp_path / "q").encode(MIXED).vectors
    # The floor below which a graph is broken, far under what either CPU kind gives (0.96-0.99).
    assert np.sum(a * b, axis=1).min() > MIN_COSINE_FLOOR


def test_int8_vectors_do_not_depend_on_the_batch(int8_artifact, tmp_path):
    """Issue 35: a row's int8 vector depends on its text alone, not on the rows, their number or
    the padding that share its batch. Per-tensor activation scales (onnxruntime's dynamic
    quantisation) failed this: cosine 0.98 between batchings of the same text. Each row's scale
    of its own makes the vectors bit-identical here; the issue asks for cosine 0.99999 at least."""
    texts = MIXED + datasets.rotten_tomatoes()["text"].head(16).tolist()
    reviews = datasets.imdb()["text"]
    long = reviews[reviews.str.len() > 3000].iloc[0]  # past 256 tokens: the batch's width
    found = batchings(_session(int8_artifact, tmp_path), texts, long)
    alone = found.pop("alone")
    for name, vectors in found.items():
        assert cosine(vectors, alone).min() >= 0.99999, name
        assert np.array_equal(vectors, alone), name


def test_int8_default_quantises_every_weight_matmul_whatever_the_cpu(fp32_artifact, int8_artifact):
    """The catalogue decides, not a parity measured on this CPU: the same graph on every kind."""
    # 6 x (Q, K, V projections + 3 MatMuls) int8; fp32's fused Attention holds Q, K and V.
    assert export.weight_matmuls(int8_artifact.onnx) == (36, 0)
    assert export.weight_matmuls(fp32_artifact.onnx) == (0, 24)
    # No operator that takes an activation scale from the whole batch (issue 35).
    ops = {n.op_type for n in onnx.load_from_string(int8_artifact.onnx).graph.node}
    assert not ops & {"DynamicQuantizeLinear", "DynamicQuantizeMatMul", "QAttention"}
    assert {"MatMulIntegerToFloat", "MultiHeadAttention"} <= ops
    assert int8_artifact.quantization == "int8"
    decision = export.int8_decision(int8_artifact.onnx)
    assert decision.choice == "int8" and decision.decided_by == "catalogue: all-MiniLM-L6-v2"
    assert "head accuracy" in decision.reason and decision.figures == []
    # Residual Add + LayerNormalization stay apart (the CPU's fused kernel is the slow one).
    for artifact in (fp32_artifact, int8_artifact):
        ops = {n.op_type for n in onnx.load_from_string(artifact.onnx).graph.node}
        assert "SkipLayerNormalization" not in ops and "LayerNormalization" in ops


def test_int8_weights_cannot_saturate_the_kernels_of_a_cpu_without_vnni(int8_artifact):
    """Without VNNI (AVX2, AVX-512F) onnxruntime sums u8 x s8 products in pairs in int16
    (VPMADDUBSW): 255 x (|w1| + |w2|) must stay under 32,768. Weights within +-64 keep it
    there, so the int8 products this graph computes are exact, and the same, on both kinds;
    this reads the graph, so it holds whichever kind runs it."""
    graph = onnx.load_from_string(int8_artifact.onnx).graph
    weights = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    int8_weights = [
        weights[node.input[1]]
        for node in graph.node
        if node.op_type in export.INT8_MATMULS and node.input[1] in weights
    ]
    assert len(int8_weights) == 36 and all(w.dtype == np.int8 for w in int8_weights)
    assert max(int(np.abs(w.astype(np.int16)).max()) for w in int8_weights) <= 64
    # what the kernel sums: two neighbours along the inner dimension, each times at most 255
    for w in int8_weights:
        magnitudes = np.abs(w.astype(np.int32))
        assert 255 * int((magnitudes[0::2] + magnitudes[1::2]).max()) < 2**15


@pytest.mark.skipif(
    shutil.which("qemu-x86_64") is None,
    reason="qemu-x86_64 (Debian's qemu-user, which .ci/run installs) is needed to run the int8 "
    "graph as a CPU without VNNI",
)
def test_a_cpu_without_vnni_computes_the_same_vectors_emulated(fp32_artifact, int8_artifact):
    """onnxruntime under QEMU's Haswell model (AVX2 and FMA; no AVX-512, no VNNI) runs its
    int8 kernels for such a CPU: the graph gives there what it gives here, whichever kind this
    machine is; and there too a text's vector does not depend on its batch. Measured on all
    1,706 held-out RT rows (``python -m bench.emulated``, on a VNNI host): mean cosine 0.99994
    (min 0.9974) to the host's vectors, head accuracy 77.78 % on both."""
    # a dozen texts: every one is embedded several times, at emulation's hundredth of the speed
    texts = MIXED + datasets.rotten_tomatoes()["text"].head(8).tolist()
    texts = [" ".join(t.split()) for t in texts]  # one line each for the emulated process
    here = OnnxEncoder(
        int8_artifact.onnx, int8_artifact.tokenizer_json, dim=int8_artifact.dim,
        max_length=int8_artifact.max_length,
    ).encode(texts).vectors  # fmt: skip
    found = embed_emulated(int8_artifact, texts, batched=True)
    emulated = found[BATCH_OF_32]
    # There too a text's vector is the same bits whatever shares its batch (issue 35).
    for name, vectors in found.items():
        assert np.array_equal(vectors, emulated), name
    fp32 = OnnxEncoder(
        fp32_artifact.onnx, fp32_artifact.tokenizer_json, dim=fp32_artifact.dim,
        max_length=fp32_artifact.max_length,
    ).encode(texts).vectors  # fmt: skip
    # Other kernels ran (AVX2's fp32 operators round otherwise), or this would prove nothing.
    assert not np.array_equal(emulated, here)
    assert cosine(emulated, here).min() > 0.99
    assert cosine(emulated, fp32).min() > MIN_COSINE_FLOOR
    assert abs(cosine(emulated, fp32).mean() - cosine(here, fp32).mean()) < 1e-3


def test_an_encoders_threads_follow_omp_num_threads_else_the_cores_it_may_use(
    int8_artifact, monkeypatch
):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    session = encoder_module.encoder_session(int8_artifact.onnx)
    assert session.get_session_options().intra_op_num_threads == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "not a number")
    assert encoder_module.default_threads() == len(os.sched_getaffinity(0))
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert encoder_module.default_threads() == len(os.sched_getaffinity(0))
    told = encoder_module.encoder_session(int8_artifact.onnx, threads=3)
    assert told.get_session_options().intra_op_num_threads == 3


def test_the_cpu_kind_is_read_from_its_flags():
    assert int8_kernels("flags\t: fpu avx2 avx512f avx512_vnni\n") == "VNNI (avx512_vnni)"
    assert int8_kernels("flags\t: fpu avx2 fma avx512f avx512bw\n") == "no VNNI"
    assert int8_kernels("flags\t: avx2 avx_vnni amx_int8\n") == "VNNI (avx_vnni, amx_int8)"


def test_partial_int8_keeps_only_the_feed_forward_outputs_float_and_says_so(fp32_artifact):
    partial = export.quantize_int8(fp32_artifact.onnx, exclude=export.FEED_FORWARD_OUTPUT)
    left_float = [
        n.name for n in onnx.load_from_string(partial).graph.node if n.op_type == "MatMul"
    ]
    assert len(left_float) == 6 and not any("/attention/" in name for name in left_float)
    assert export.int8_kind(partial, export.default_model_dir()) == export.INT8_PARTIAL


def test_int8_graph_without_int8_matmuls_is_refused(fp32_artifact):
    with pytest.raises(QuantizationError, match="left all .* weight MatMuls in float") as refused:
        export.int8_kind(fp32_artifact.onnx, export.default_model_dir())
    assert refused.value.number == 50044


def test_batch_composition_does_not_change_fp32_vectors(fp32_artifact, tmp_path):
    """The pooling sums a text's tokens in order whatever follows them (padding adds exact
    zeros): a sum over the padded axis rounded differently by batch shape (ReduceSum, up to
    5e-8 before)."""
    found = batchings(_session(fp32_artifact, tmp_path), MIXED, MIXED[-1] * 40)
    alone = found.pop("alone")
    for name, vectors in found.items():
        assert np.array_equal(vectors, alone), name


def test_export_is_refused_when_parity_fails(monkeypatch):
    # An impossible threshold proves the gate is live: the real export is compared and refused.
    monkeypatch.setattr(export, "PARITY_THRESHOLD", 1.000001)
    with pytest.raises(ExportParityError, match="differs from PyTorch"):
        export.export_encoder(quantization="none", use_cache=False)


def test_long_text_is_windowed_not_cut(fp32_artifact, tmp_path):
    encoder = _session(fp32_artifact, tmp_path)
    opening = "The first act is a delight, sharp and funny. "
    ending = "But the ending is a catastrophe that ruins everything before it. "
    long_text = opening * 5 + "Filler about the scenery and the music. " * 60 + ending * 5
    windowed = encoder.encode([long_text], long_text="window")
    truncated = encoder.encode([long_text], long_text="truncate")
    assert windowed.windows[0] > 1
    assert truncated.windows[0] == 1
    # The ending lies past the first window: only the windowed vector can see it.
    end_vector = encoder.encode([ending * 5]).vectors[0]
    assert windowed.vectors[0] @ end_vector > truncated.vectors[0] @ end_vector


def test_windows_repeat_the_overlap_asked_for(fp32_artifact):
    body = " ".join(f"word{i}" for i in range(2_000))

    def windows(overlap: float) -> list[list[int]]:
        tokenizer = Tokenizer(fp32_artifact.tokenizer_json, 66, overlap)
        return [w[1:-1] for w in tokenizer.windows([body], truncate=False)[0]]  # unframed

    whole = Tokenizer(fp32_artifact.tokenizer_json, 100_000).encode([body], truncate=True)[0]
    plain, default, half = windows(0.0), windows(WINDOW_OVERLAP), windows(0.5)
    assert [token for window in plain for token in window] == whole[1:-1]  # each token once
    assert default[1][: 64 // 4] == default[0][-(64 // 4) :]  # a quarter of 64 repeated
    assert half[1][:32] == half[0][-32:]
    assert len(plain) < len(default) < len(half)
    with pytest.raises(InvalidParameterError, match="overlap"):
        Tokenizer(fp32_artifact.tokenizer_json, 66, 1.0)


def test_rejects_unknown_long_text_mode(fp32_artifact, tmp_path):
    with pytest.raises(InvalidParameterError, match="window"):
        _session(fp32_artifact, tmp_path).encode(["x"], long_text="cut")


def test_cache_needs_bytes_once_then_loads_by_sha(fp32_artifact, tmp_path, monkeypatch):
    monkeypatch.setenv("SQLHEADS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(encoder_module, "_loaded", {})
    sha = fp32_artifact.sha256
    with pytest.raises(EncoderNotCachedError, match="pass its bytes"):
        load_encoder(EncoderRef(sha))
    with pytest.raises(EncoderNotCachedError, match="corrupt"):
        load_encoder(
            EncoderRef(sha, onnx=b"not a model", tokenizer_json="{}", dim=384, max_length=256)
        )
    first = load_encoder(
        EncoderRef(
            sha,
            onnx=fp32_artifact.onnx,
            tokenizer_json=fp32_artifact.tokenizer_json,
            dim=fp32_artifact.dim,
            max_length=fp32_artifact.max_length,
        )
    )
    monkeypatch.setattr(encoder_module, "_loaded", {})  # a new process: only the disk remains
    second = load_encoder(EncoderRef(sha))
    assert np.allclose(first.encode(MIXED).vectors, second.encode(MIXED).vectors)


def test_the_same_bytes_registered_with_two_window_lengths_keep_their_own(
    fp32_artifact, tmp_path, monkeypatch
):
    """The cache folder is keyed by the bytes' sha256, which does not cover the window length:
    a second registration of the same graph with 64-token windows (another database on the same
    server cache) must not get the first one's 256."""
    monkeypatch.setenv("SQLHEADS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(encoder_module, "_loaded", {})
    arguments = {
        "onnx": fp32_artifact.onnx,
        "tokenizer_json": fp32_artifact.tokenizer_json,
        "dim": fp32_artifact.dim,
    }
    long_text = " ".join(MIXED * 8)  # about 300 tokens
    wide = load_encoder(EncoderRef(fp32_artifact.sha256, max_length=256, **arguments))
    narrow = load_encoder(EncoderRef(fp32_artifact.sha256, max_length=64, **arguments))
    assert (wide.max_length, narrow.max_length) == (256, 64)
    assert narrow.encode([long_text]).windows[0] > wide.encode([long_text]).windows[0]
    # no window asked: the one loaded first
    assert load_encoder(EncoderRef(fp32_artifact.sha256)) is wide


def test_batches_fill_to_a_token_budget_not_a_row_count():
    lengths = np.array([250, 12, 256, 40, 9, 256, 30, 200])
    order = np.argsort(lengths, kind="stable")
    batches = length_batches(order, lengths, batch_size=4, batch_tokens=512)
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(lengths)))
    for batch in batches:
        # Padded to its longest window; a window alone may exceed the budget, two may not.
        assert len(batch) <= 4
        assert len(batch) == 1 or len(batch) * lengths[batch].max() <= 512
    assert [len(b) for b in batches] == [4, 2, 2]  # 4 x 40, 2 x 250, 2 x 256
    assert [len(b) for b in length_batches(order, lengths, 4, None)] == [4, 4]
