"""Where a verb's rows come from: a caller's query, or the rows a sidecar job captured.

A :class:`RowSource` is one of a verb's inputs (its source of texts, its labels). A caller's
query runs now, read-only, through :meth:`~sqlheads.store.repository.Store.run_query`, with the
caller's own permissions. A sidecar job never runs a caller's query: its request ran them once,
when it was queued, and captured their rows with the job (:mod:`sqlheads.store.job_inputs`);
the job reads those back, and keeps the query text only as the record of what was asked. The
embedded host's verbs and the sidecar's jobs read through the same source, so both read the
same rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from sqlheads.compute.columns import EMBED_INPUT, present, refuse_duplicate_keys
from sqlheads.errors import MissingTextError, StoredQueryOwnerError
from sqlheads.store import job_inputs
from sqlheads.store.keys import key_problem, required_keys
from sqlheads.store.repository import EmbeddingSet, Store

READ_ROWS = 10_000  # rows per chunk where a verb reads a whole input


@dataclass(frozen=True)
class RowSource:
    """A caller's query (``job_id`` None), or the rows job ``job_id`` captured from it."""

    store: Store
    query: str
    job_id: int | None = None

    @classmethod
    def of(cls, store: Store, given: str | RowSource) -> RowSource:
        """A query given by a caller as its text, or a source made already."""
        return given if isinstance(given, RowSource) else cls(store, given)

    @classmethod
    def optional(cls, store: Store, given: str | RowSource | None) -> RowSource | None:
        """:meth:`of`, or None where no query was given (None or empty: the set's own then)."""
        return cls.of(store, given) if given else None

    def chunks(
        self, columns: Sequence[str], what: str, batch_rows: int = READ_ROWS
    ) -> Iterator[pd.DataFrame]:
        """The rows' ``columns``, ``batch_rows`` at a time (a job's in key order)."""
        if self.job_id is None:
            return self.store.run_query(self.query, tuple(columns), what, batch_rows)
        return job_inputs.read_chunks(self.store, self.job_id, batch_rows, columns=columns)

    def count(self) -> int | None:
        """How many rows there are, for a progress bar (None if a query cannot be counted)."""
        if self.job_id is None:
            return self.store.count_query(self.query)
        return job_inputs.count(self.store, self.job_id)

    def duplicate_keys(self) -> set[str]:
        """The keys that come more than once (an embed rejects each of them whole)."""
        if self.job_id is None:
            return self.store.duplicate_keys(self.query)
        return job_inputs.duplicate_keys(self.store, self.job_id)

    def labels(self) -> pd.DataFrame:
        """``item_key`` and ``label``: every row of a labels query (a NULL key refused, 50003;
        a key given twice refused, 50012, before any work: which of its labels to keep would
        depend on the order the query returned them in), or the captured rows that hold a
        label (a teacher job captures its unlabelled source rows too; a NULL or blank label
        marks one)."""
        frames = list(self.chunks(("item_key", "label"), "labels"))
        labelled = (
            pd.concat(frames, ignore_index=True)
            if frames
            else pd.DataFrame(columns=["item_key", "label"])
        )
        if self.job_id is not None:
            return labelled[present(labelled["label"], "text")].reset_index(drop=True)
        labelled["item_key"] = required_keys(labelled["item_key"], "labels")
        refuse_duplicate_keys(labelled["item_key"].tolist())
        return labelled

    def texts(self, keys: set[str] | None = None) -> dict[str, Any]:
        """Each row's text by key, in key order; only those of ``keys`` when given, so that a
        large source is not held whole for the few rows wanted. A key the source returns more
        than once has no text (None), as ``embed`` rejects it and SQL Server's verbs read it:
        which copy to keep would depend on the order the query returned them in. A row
        without a key (NULL or empty) has none to be read by."""
        texts: dict[str, Any] = {}
        copies: set[str] = set()
        for chunk in self.chunks(EMBED_INPUT, "source"):
            for key, text in zip(chunk["item_key"], chunk["text"], strict=True):
                if key_problem(key) is not None or (keys is not None and key not in keys):
                    continue
                if key in texts:
                    copies.add(key)
                texts[key] = text
        return {key: None if key in copies else texts[key] for key in sorted(texts)}


def stored_source(store: Store, embedding_set: EmbeddingSet) -> str | None:
    """The set's stored source query (its last ``embed --source``), for the user who stored it
    alone; None when it stored none. A stored query runs with the rights of whoever runs it,
    so anyone else, and everyone for a query stored before its author was recorded, is refused
    (50071) before it runs: they pass a source of their own (``heads.set_source``). The author
    is compared by SID on SQL Server (:meth:`Store.is_author`); a sidecar never is one."""
    if embedding_set.source_query is None:
        return None
    if not store.is_author(embedding_set):
        raise StoredQueryOwnerError(
            f"set {embedding_set.name!r} has a source query stored by another user (or before "
            "authors were recorded), and a stored query runs only for its author: pass your "
            'own --source "SELECT ... AS item_key, ... AS text FROM ...", or embed the set '
            "yourself to store yours"
        )
    return embedding_set.source_query


def set_texts(
    store: Store, embedding_set: EmbeddingSet, source: RowSource | None
) -> RowSource | None:
    """The rows' texts: ``source``, else the set's last ``embed --source`` when the caller
    stored it (:func:`stored_source`, 50071 for another user's); None for neither."""
    if source is not None:
        return source
    stored = stored_source(store, embedding_set)
    return None if stored is None else RowSource(store, stored)


def text_source(store: Store, embedding_set: EmbeddingSet, source: RowSource | None) -> RowSource:
    """What a text model reads the rows' text through (:func:`set_texts`); a set with neither
    is refused (50024)."""
    found = set_texts(store, embedding_set, source)
    if found is None:
        raise MissingTextError(
            f"set {embedding_set.name!r} has no source query to read text through: pass "
            '--source "SELECT ... AS item_key, ... AS text FROM ..."'
        )
    return found
