"""``embed``: the rows of a source embedded into a set, incrementally.

The rows are read in batches (:class:`~sqlheads.verbs.rows.RowSource`: a caller's query, or a
sidecar part's captured rows); each batch is embedded by :func:`sqlheads.compute.embed.embed`
and written in a transaction of its own, so that a process killed half-way loses at most the
batch in flight and a run again embeds only what is missing or changed.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import pandas as pd
from sqlalchemy.exc import IntegrityError

from sqlheads import settings
from sqlheads.compute.columns import EMBED_INPUT
from sqlheads.compute.embed import EmbedParams
from sqlheads.compute.embed import embed as embed_batch
from sqlheads.engine.progress import Progress
from sqlheads.errors import (
    EncoderMismatchError,
    InvalidParameterError,
    NotFoundError,
    QueryShapeError,
)
from sqlheads.store.keys import key_problem
from sqlheads.store.repository import SET_BUSY, EmbeddingSet, Encoder, Store, validate_name
from sqlheads.verbs.encoders import encoder_ref, resolve_encoder
from sqlheads.verbs.locks import LOCK_TIMEOUT_MS, holding
from sqlheads.verbs.rows import RowSource


@holding(("embed", False), ("set", True))
def embed(
    store: Store,
    *,
    set_name: str,
    source: str,
    params: EmbedParams,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Embed the rows of ``source`` (``item_key``, ``text``) into a set, incrementally, as
    ``params`` says.

    One embedding of a set at a time, as ``heads.embed``: ``embed`` Exclusive (another
    embedding of the set fails at once, 50016) and ``set`` Shared (trainings and predictions of
    the set go on beside it; a drop_set waits for it, or it for a drop_set). ``progress``
    hears of the default encoder's registration on first use (a stage: exported, or read from
    this machine's cached export) and of the rows read, in stage ``embedding SET``.
    """
    return embed_rows(
        store,
        set_name=set_name,
        rows=RowSource(store, source),
        params=params,
        progress=progress,
        lock_batches=False,  # this whole run holds the set's lock (Shared) already
    )


def embed_rows(
    store: Store,
    *,
    set_name: str,
    rows: RowSource,
    params: EmbedParams,
    progress: Progress | None = None,
    model: Any | None = None,
    lock_batches: bool = True,
) -> dict[str, Any]:
    """:func:`embed` without the set's lock, for the sidecar's embed parts: each embeds the
    rows its request captured for it (the request decided which part holds a row; parts hold
    disjoint keys, so their batches never write the same rows), with ``model`` (an object with
    the ``OnnxEncoder.encode`` signature, e.g. a PyTorch encoder) instead of the set's ONNX
    graph when given. ``rows.query`` is recorded as the set's source query. Each batch is
    written holding the set's lock Shared (the name heads.embed and heads.drop_set lock), so a
    drop of the set waits for the batch, and a set dropped between two batches is not written
    to or made again (50001). Everything else, hashing, rejects and writes, is
    :func:`embed`'s own."""
    started = time.perf_counter()
    validate_name("set", set_name)
    embedding_set = check_embedding_set(store, set_name, params)
    # The source's first rows come before anything is written: a query that fails or lacks a
    # column is refused with no set created and no encoder registered.
    chunks = rows.chunks(EMBED_INPUT, "source", params.batch_rows)
    # The query runs as written first: a refused or failing query is reported by its own
    # error, not by the duplicate-key subquery built around it.
    first = next(chunks, None)
    duplicated = rows.duplicate_keys()
    if first is None and embedding_set is None:
        # An empty new set would be created silently and trained on later to no avail.
        raise QueryShapeError(
            f"the source query returned no rows: set {set_name!r} was not created; check the "
            "query's FROM and WHERE clauses (embed an existing set again with an empty source "
            "to change nothing)"
        )
    chosen = _set_encoder(store, embedding_set, params.encoder, progress)
    total = None
    if progress is not None:
        total = rows.count()
        progress(0, total, f"embedding {set_name}")
    rows_started = time.perf_counter()  # the rate counts from here, as the progress's does
    # A set's own mode, else the one asked for (the default where none was)
    long_text = embedding_set.long_text if embedding_set else params.long_text
    batches = _SetBatches(
        store,
        set_name,
        chosen,
        embedding_set,
        params=replace(params, long_text=long_text or settings.default("long_text")),
        model=model,
        lock_each=lock_batches,
    )
    _embed_all(
        batches,
        itertools.chain([first] if first is not None else [], chunks),
        duplicated,
        progress,
        total,
    )
    embedding = time.perf_counter() - rows_started
    embedding_set = batches.the_set()
    store.set_source_query(embedding_set.set_id, rows.query)
    seconds = time.perf_counter() - started
    embedded = batches.counts["embedded"]
    return {
        "set": set_name,
        "encoder": chosen.name,
        "long_text": embedding_set.long_text,
        **batches.counts,
        **store.set_counts(embedding_set.set_id),
        "seconds": round(seconds, 3),
        # rows embedded per second of embedding, as the progress counts them: from the first
        # batch read (an encoder's export and the source's count before it are not embedding)
        "rows_per_second": round(embedded / embedding, 1) if embedded and embedding else None,
    }


def check_embedding_set(store: Store, set_name: str, params: EmbedParams) -> EmbeddingSet | None:
    """The set, if it exists, once the encoder and long-text mode asked for agree with it."""
    embedding_set = store.find_set(set_name)
    encoder, long_text = params.encoder, params.long_text
    if embedding_set is not None:
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
    return embedding_set


def _set_encoder(
    store: Store,
    embedding_set: EmbeddingSet | None,
    encoder: str | None,
    progress: Progress | None,
) -> Encoder:
    """The set's encoder; for a new set, the one asked for (the default registered now)."""
    if embedding_set is not None:
        return store.encoder(embedding_set.encoder_id)
    # Only the default encoder is registered on first use; another name must be registered.
    # The progress hears, as a stage, whether its export is made or read from this machine's
    # cache.
    return resolve_encoder(store, encoder, progress)


def _embed_all(
    batches: _SetBatches,
    chunks: Iterable[pd.DataFrame],
    duplicated: set[str],
    progress: Progress | None,
    total: int | None,
) -> None:
    """Embed each chunk of rows, holding back every copy of a
    duplicated key for one last batch, which rejects the key whole: the outcome cannot
    depend on which batch each copy fell into.

    ``progress`` hears of the rows embedded out of those that need it, after each committed
    batch: ``total`` less the rows found unchanged or rejected so far (a re-run of an embedded
    source ends at 0 of 0, not at every row in a blink as if embedded)."""
    duplicate_rows: list[pd.DataFrame] = []
    for chunk in chunks:
        copies = chunk["item_key"].isin(duplicated)
        duplicate_rows.append(chunk[copies])
        if not copies.all():
            batches.write(chunk[~copies])
        batches.report(progress, total)
    if duplicated and duplicate_rows:
        batches.write(pd.concat(duplicate_rows, ignore_index=True))
        batches.report(progress, total)


class _SetBatches:
    """Writes embedded batches into one set, which it creates with its first batch (a set
    whose every batch failed never exists), and counts what became of the rows."""

    def __init__(
        self,
        store: Store,
        set_name: str,
        chosen: Encoder,
        embedding_set: EmbeddingSet | None,
        *,
        params: EmbedParams,
        model: Any | None,
        lock_each: bool,
    ) -> None:
        self.store, self.set_name, self.chosen = store, set_name, chosen
        self.embedding_set, self.params, self.model = embedding_set, params, model
        self.lock_each = lock_each  # each batch holds the set's lock (a sidecar's part)
        self.encoder = encoder_ref(store, chosen)
        self.counts = {"rows_read": 0, "embedded": 0, "unchanged": 0, "rejected": 0, "windowed": 0}
        # "rejected" counts keys, as the set's rejects do (set_rejects): a key given twice is
        # one reject, and every row without a key is the one reject under the empty key
        self.rejected_keys: set[str] = set()
        self.rejected_rows = 0  # the rows behind them, for the rows left to embed

    def write(self, rows: pd.DataFrame) -> None:
        stored = (
            self.store.stored_hashes(self.embedding_set.set_id, rows["item_key"].tolist())
            if self.embedding_set
            else {}
        )
        rows = rows.assign(stored_sha256=[stored.get(k) for k in rows["item_key"]])
        output = embed_batch(rows, params=self.params, set_encoder=self.encoder, model=self.model)
        self.encoder = replace(self.encoder, onnx=None, tokenizer_json=None)  # cached from now on
        with self._lock():
            if self.embedding_set is None:
                self.embedding_set = self._find_or_add_set()
            else:
                self._refuse_a_dropped_set()
            self.store.write_embed_batch(self.embedding_set.set_id, output)
        self._count(rows, output)

    def the_set(self) -> EmbeddingSet:
        """The set written to; after an empty source, the set made now, with nothing in it."""
        if self.embedding_set is None:
            self.embedding_set = self._find_or_add_set()
        return self.embedding_set

    def _lock(self) -> contextlib.AbstractContextManager[Any]:
        if not self.lock_each:
            return contextlib.nullcontext()
        return self.store.lock("set", self.set_name, LOCK_TIMEOUT_MS, SET_BUSY, shared=True)

    def _count(self, rows: pd.DataFrame, output: pd.DataFrame) -> None:
        rejected = output.loc[output["reject_reason"].notna(), "item_key"]
        rejected_keys = set(rejected)
        rejected_rows = sum(
            key_problem(k) is not None or k in rejected_keys for k in rows["item_key"]
        )
        embedded = len(output) - len(rejected)
        self.rejected_keys |= rejected_keys
        self.rejected_rows += rejected_rows
        self.counts["rows_read"] += len(rows)
        self.counts["embedded"] += embedded
        self.counts["rejected"] = len(self.rejected_keys)
        self.counts["unchanged"] += len(rows) - embedded - rejected_rows
        self.counts["windowed"] += int((output["windows"].fillna(1) > 1).sum())

    def report(self, progress: Progress | None, total: int | None) -> None:
        """The rows embedded, of those that need it (see :func:`_embed_all`)."""
        if progress is not None:
            left = None if total is None else total - self.counts["unchanged"] - self.rejected_rows
            progress(self.counts["embedded"], left, None)

    def _find_or_add_set(self) -> EmbeddingSet:
        """The set, created now unless another embed part created it a moment ago."""
        try:
            return self.store.add_set(
                self.set_name, self.chosen.encoder_id, str(self.params.long_text)
            )
        except IntegrityError:  # a part of the same request won the race: same encoder, same mode
            found = self.store.require_set(self.set_name)
            if found.encoder_id != self.chosen.encoder_id:
                raise EncoderMismatchError(
                    f"set {self.set_name!r} was just created with another encoder than "
                    f"{self.chosen.name!r}: embed into a new set name"
                ) from None
            return found

    def _refuse_a_dropped_set(self) -> None:
        found = self.store.find_set(self.set_name)
        if found is None or found.set_id != self.embedding_set.set_id:
            raise NotFoundError(
                f"set {self.set_name!r} was dropped while this embed ran: nothing more is "
                "written to it; embed again to make it anew"
            )
