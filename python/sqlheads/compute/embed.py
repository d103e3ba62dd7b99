"""``embed``: vectors for the rows whose text changed, rejects for the rows that cannot be."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sqlheads import settings
from sqlheads.compute.columns import (
    DUPLICATE_KEY,
    EMBED_INPUT,
    EMBED_OUTPUT,
    require_columns,
    text_sha256,
)
from sqlheads.engine.constraints import Interval, Params, Text, param
from sqlheads.engine.encoders.onnx_encoder import EncoderRef, load_encoder
from sqlheads.store.keys import KEYLESS, check_key_lengths, item_key_text, key_problem
from sqlheads.store.vectors import pack_rows


@dataclass(frozen=True)
class EmbedParams(Params):
    """One ``embed``'s parameters, as a door builds them, its defaults and bounds
    :data:`settings.SETTINGS`' (which T-SQL reads too): the encoder of a new set (None: the
    set's, or the default), its long-text mode (None: the set's, or ``window``), rows per
    committed batch, texts per encoder call, and onnxruntime's threads (None: its own)."""

    encoder: str | None = param(None, Text("an encoder's name"), None)
    long_text: str | None = param(None, settings.option("long_text"), None)
    batch_rows: int = param(
        settings.default("embed.batch_rows"), settings.bounds("embed.batch_rows")
    )
    batch_size: int = param(
        settings.default("embed.batch_size"), settings.bounds("embed.batch_size")
    )
    threads: int | None = param(None, Interval(int, 1, 1024), None)


def embed(
    input_data: pd.DataFrame,
    *,
    params: EmbedParams,
    set_encoder: EncoderRef,
    model: Any | None = None,
) -> pd.DataFrame:
    """Vectors for the rows whose text changed; rejects for rows that cannot be embedded.

    Input: ``item_key``, ``text`` and, optionally, ``stored_sha256`` (the hash of the text
    already embedded for that key, NULL if none). A row whose text hashes to its
    ``stored_sha256`` is skipped. A key that appears more than once is rejected as a whole
    (the caller sends every copy of a key in one call). Output: one row per embedded or
    rejected key; a rejected row has a NULL ``vector`` and a ``reject_reason``. The encoder
    is found in the cache by its sha256; its bytes need passing only when the cache lacks it.
    ``model`` (the sidecar's PyTorch encoder of the same model, with ``OnnxEncoder.encode``'s
    signature) replaces the cached ONNX graph when given.
    """
    require_columns(input_data, EMBED_INPUT, "source")
    rejects, to_embed = _sort_rows(input_data)
    if not to_embed:
        return pd.DataFrame(rejects, columns=list(EMBED_OUTPUT))
    encoder = model or load_encoder(set_encoder, threads=params.threads)
    encoded = encoder.encode(
        [text for _, text, _ in to_embed],
        long_text=params.long_text or settings.default("long_text"),
        batch_size=params.batch_size,
    )
    embedded = [
        (key, sha, vector, int(windows), None)
        for (key, _, sha), vector, windows in zip(
            to_embed, pack_rows(encoded.vectors), encoded.windows, strict=True
        )
    ]
    return pd.DataFrame(rejects + embedded, columns=list(EMBED_OUTPUT))


def _sort_rows(input_data: pd.DataFrame) -> tuple[list[tuple], list[tuple[str, str, str]]]:
    """The rows refused (as output rows) and those whose text changed: ``(key, text, sha)``."""
    keys = [item_key_text(k) for k in input_data["item_key"]]
    texts = input_data["text"].tolist()
    stored = (
        input_data["stored_sha256"].tolist()
        if "stored_sha256" in input_data.columns
        else [None] * len(keys)
    )
    rejects: list[tuple] = []
    to_embed: list[tuple[str, str, str]] = []
    # A NULL or empty key has no row of its own to be stored under: every such row is one
    # reject under the KEYLESS key (as heads.embed does), and takes no part in duplicates.
    keyless = sorted({p for p in map(key_problem, keys) if p is not None})
    if keyless:
        rejects.append((KEYLESS, None, None, None, keyless[0]))
    check_key_lengths(keys, "source")
    # A key given more than once is rejected whole, every copy, on every run: which copy is
    # "first" is not defined in SQL, and keeping any one of them flips between runs.
    duplicated = {key for key, n in Counter(keys).items() if n > 1 and not key_problem(key)}
    rejects += [(key, None, None, None, DUPLICATE_KEY) for key in sorted(duplicated)]
    for key, text, old_sha in zip(keys, texts, stored, strict=True):
        if key in duplicated or key_problem(key):
            continue
        if text is None or (isinstance(text, float) and np.isnan(text)):
            rejects.append((key, None, None, None, "text is NULL"))
            continue
        text = str(text)
        if not text.strip():
            rejects.append((key, None, None, None, "text is empty"))
            continue
        sha = text_sha256(text)
        if sha != old_sha:
            to_embed.append((key, text, sha))
    return rejects, to_embed
