"""``predict``: score a set, or the keys a query returns, with a head's deployed or named
version; a head reads the set's stored vectors, a text model the rows' text."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pandas as pd

from sqlheads.compute.columns import EMBED_INPUT
from sqlheads.compute.predict import predict as predict_rows
from sqlheads.engine.kinds import model_kind
from sqlheads.engine.progress import Progress
from sqlheads.errors import EncoderMismatchError, InvalidParameterError
from sqlheads.store.keys import required_keys
from sqlheads.store.repository import EmbeddingSet, Model, Store
from sqlheads.verbs.locks import holding
from sqlheads.verbs.rows import READ_ROWS, RowSource, text_source


@holding(("head.use", True), ("set", True))  # as heads.predict: no drop under it
def predict(
    store: Store,
    *,
    head: str,
    set_name: str,
    version: int | None = None,
    keys: str | None = None,
    source: str | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Score a set (or the keys a query returns) with the deployed or a named version.

    A head reads the set's stored vectors; a text model (a word student) reads the rows' text
    through ``source``, or the set's own last source query.
    """
    started = time.perf_counter()
    model = store.find_model(head, version)
    kind = model_kind(model.kind)
    embedding_set = store.require_set(set_name)
    if kind.reads == "vector":
        chunks, total = _vector_chunks(store, model, embedding_set, keys, source)
    else:
        chunks, total = _text_chunks(store, embedding_set, keys, source)
    blob = store.model_blob(model.model_id)
    rows = missing = read = 0
    for chunk in chunks:
        missing += int(chunk[kind.reads].isna().sum())
        output = predict_rows(chunk, model_sha256=model.sha256, model_blob=blob, kind=model.kind)
        store.write_predictions(model.model_id, embedding_set.set_id, output)
        rows += len(output)
        read += len(chunk)
        if progress is not None:
            progress(read, total, None)
    seconds = time.perf_counter() - started
    return {
        "head": head,
        "version": model.version,
        "model_id": model.model_id,
        "kind": kind.name,
        "set": set_name,
        "rows": rows,
        # Both counts, as heads.predict returns them: one is always 0.
        "keys_without_embedding": missing if kind.reads == "vector" else 0,
        "keys_without_text": missing if kind.reads == "text" else 0,
        "seconds": round(seconds, 3),
        "rows_per_second": round(rows / seconds, 1) if seconds else None,
    }


def _vector_chunks(
    store: Store,
    model: Model,
    embedding_set: EmbeddingSet,
    keys: str | None,
    source: str | None,
) -> tuple[Iterator[pd.DataFrame], int | None]:
    """A head's input: the set's vectors (of the keys ``keys`` returns), and their count."""
    if source is not None:
        raise InvalidParameterError(
            f"head {model.head!r} version {model.version} is a {model.kind} that reads the "
            "set's stored vectors, not text: drop --source"
        )
    if embedding_set.encoder_id != model.encoder_id:
        raise EncoderMismatchError(
            f"head {model.head!r} version {model.version} was trained on vectors of encoder "
            f"{store.encoder(model.encoder_id).name!r} but set {embedding_set.name!r} holds "
            f"{store.encoder(embedding_set.encoder_id).name!r}: embed the texts with the "
            "head's encoder into another set"
        )
    if keys is None:
        total = store.set_counts(embedding_set.set_id)["set_rows"]
        return store.iter_vectors(embedding_set.set_id, READ_ROWS), total
    return _keyed_vectors(store, embedding_set.set_id, keys), None


def _text_chunks(
    store: Store, embedding_set: EmbeddingSet, keys: str | None, source: str | None
) -> tuple[Iterator[pd.DataFrame], int | None]:
    """A text model's input: the source's rows (of the keys ``keys`` returns); no count. A key
    the source returns more than once is not scored, as ``heads.predict`` skips it (``embed``
    rejects it): which copy's text to score would depend on the order the query returned them
    in."""
    texts = text_source(store, embedding_set, RowSource.optional(store, source))
    duplicated = texts.duplicate_keys()
    wanted = (
        None
        if keys is None
        else {
            k
            for c in store.run_query(keys, ("item_key",), "keys")
            for k in required_keys(c["item_key"], "keys")
        }
    )

    def chunks() -> Iterator[pd.DataFrame]:
        for chunk in texts.chunks(EMBED_INPUT, "source"):
            # a NULL key was rejected by embed, a duplicated one too
            chunk = chunk[chunk["item_key"].notna() & ~chunk["item_key"].isin(duplicated)]
            yield chunk if wanted is None else chunk[chunk["item_key"].isin(wanted)]

    return chunks(), None


def _keyed_vectors(store: Store, set_id: int, keys: str) -> Iterator[pd.DataFrame]:
    for chunk in store.run_query(keys, ("item_key",), "keys", READ_ROWS):
        wanted = required_keys(chunk["item_key"], "keys")
        vectors = store.vectors_for_keys(set_id, wanted)
        yield pd.DataFrame({"item_key": wanted, "vector": [vectors.get(k) for k in wanted]})
