"""The rows a verb reads through a caller's query, and the checks that they belong to its set.

Labels, texts and soft labels come through the caller's labels, source and soft-labels queries
(:meth:`~sqlheads.store.repository.Store.run_query`); ``predict`` reads a set's vectors or its
rows' text in chunks. The embedded host's verbs and the sidecar's teacher job read through the
same functions, so both read the same rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pandas as pd

from sqlheads import procedures
from sqlheads.errors import (
    EncoderMismatchError,
    ForeignSoftLabelsError,
    InvalidParameterError,
    MissingTextError,
    QueryShapeError,
    StoredQueryOwnerError,
)
from sqlheads.store.keys import required_keys
from sqlheads.store.repository import EmbeddingSet, Model, Store
from sqlheads.store.soft_labels import Teacher


def read_labels(store: Store, labels: str) -> pd.DataFrame:
    frames = list(store.run_query(labels, ("item_key", "label"), "labels", 10_000))
    labelled = (
        pd.concat(frames, ignore_index=True)
        if frames
        else pd.DataFrame(columns=["item_key", "label"])
    )
    labelled["item_key"] = required_keys(labelled["item_key"], "labels")
    return labelled


def refuse_foreign_teacher(found: Teacher | None, embedding_set: EmbeddingSet) -> None:
    if found is not None and found.set_id != embedding_set.set_id:
        raise ForeignSoftLabelsError(
            f"teacher {found.name!r} holds soft labels of another set, not of "
            f"{embedding_set.name!r}: distil on that set, or store this set's soft labels under "
            "another --teacher name"
        )


def read_soft_labels_query(store: Store, sql: str) -> tuple[pd.DataFrame, list[str]]:
    """A caller's soft-labels query: ``item_key`` and one numeric column per class."""
    frames = list(store.run_query(sql, ("item_key",), "soft labels", 10_000, all_columns=True))
    if not frames:
        raise QueryShapeError("the soft labels query returned no rows: check its WHERE clause")
    soft = procedures.soft_labels_frame(pd.concat(frames, ignore_index=True))
    return soft[["item_key", "logits"]], json.loads(soft["classes_json"].iloc[0])


def stored_source(store: Store, embedding_set: EmbeddingSet) -> str | None:
    """The set's stored source query (its last ``embed --source``), for the user who stored it
    alone; None when it stored none. A stored query runs with the rights of whoever runs it,
    so anyone else, and everyone for a query stored before its author was recorded, is refused
    (50071) before it runs: they pass a source of their own (``heads.set_source``)."""
    if embedding_set.source_query is None:
        return None
    if embedding_set.source_user is None or embedding_set.source_user != store.database_user():
        raise StoredQueryOwnerError(
            f"set {embedding_set.name!r} has a source query stored by another user (or before "
            "authors were recorded), and a stored query runs only for its author: pass your "
            'own --source "SELECT ... AS item_key, ... AS text FROM ...", or embed the set '
            "yourself to store yours"
        )
    return embedding_set.source_query


def text_source(store: Store, embedding_set: EmbeddingSet, source: str | None) -> str:
    """The query a text model reads the rows' text through: ``source``, else the set's last
    ``embed --source`` when the caller stored it (:func:`stored_source`); a set with neither
    is refused (50024)."""
    sql = source or stored_source(store, embedding_set)
    if sql is None:
        raise MissingTextError(
            f"set {embedding_set.name!r} has no source query to read text through: pass "
            '--source "SELECT ... AS item_key, ... AS text FROM ..."'
        )
    return sql


def read_texts(store: Store, sql: str, keys: set[str] | None = None) -> dict[str, Any]:
    """Each row's text by key through ``sql``; only those of ``keys`` when given, so that a
    large source is not held whole for the few rows wanted."""
    texts: dict[str, Any] = {}
    for chunk in store.run_query(sql, procedures.EMBED_INPUT, "source", 10_000):
        rows = zip(chunk["item_key"], chunk["text"], strict=True)
        texts.update(rows if keys is None else ((k, t) for k, t in rows if k in keys))
    return texts


def refuse_foreign_keys(
    store: Store, embedding_set: EmbeddingSet, keys: pd.Series, known: set[str]
) -> None:
    """Soft labels must be of rows the set holds: rows of its text source or its vectors."""
    candidates = [k for k in keys if k not in known]
    embedded = store.stored_hashes(embedding_set.set_id, candidates)
    outside = [k for k in candidates if k not in embedded]
    if outside:
        raise ForeignSoftLabelsError(
            f"{len(outside)} of {len(keys)} soft-labelled key(s) are not in set "
            f"{embedding_set.name!r} "
            f"(e.g. {outside[0]!r}): they belong to another set; filter the soft labels query, "
            "or pass --source returning their text"
        )


def vector_chunks(
    store: Store,
    model: Model,
    embedding_set: EmbeddingSet,
    keys: str | None,
    source: str | None,
    batch_rows: int,
) -> tuple[Iterator[pd.DataFrame], int | None]:
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
        return store.iter_vectors(embedding_set.set_id, batch_rows), total
    return keyed_vectors(store, embedding_set.set_id, keys, batch_rows), None


def text_chunks(
    store: Store,
    embedding_set: EmbeddingSet,
    keys: str | None,
    source: str | None,
    batch_rows: int,
) -> tuple[Iterator[pd.DataFrame], int | None]:
    sql = text_source(store, embedding_set, source)
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
        for chunk in store.run_query(sql, procedures.EMBED_INPUT, "source", batch_rows):
            chunk = chunk[chunk["item_key"].notna()]  # a NULL key was rejected by embed
            yield chunk if wanted is None else chunk[chunk["item_key"].isin(wanted)]

    return chunks(), None


def keyed_vectors(store: Store, set_id: int, keys: str, batch_rows: int):
    for chunk in store.run_query(keys, ("item_key",), "keys", batch_rows):
        wanted = required_keys(chunk["item_key"], "keys")
        vectors = store.vectors_for_keys(set_id, wanted)
        yield pd.DataFrame({"item_key": wanted, "vector": [vectors.get(k) for k in wanted]})
