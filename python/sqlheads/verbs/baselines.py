"""The host's side of the TF-IDF baseline: the text it reads, the columns it fills, the verdict.

``train`` and ``distill`` hand the rows' text to their :mod:`sqlheads.compute` half when it is
reachable (the call's ``--source``, else the set's last ``embed --source``); the compute half
fits the baseline on the version's own rows and records it in ``metrics_json``; the version's
row in ``models`` keeps its accuracy, macro-F1 and seconds, or why it was skipped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from sqlheads.engine.encoders.onnx_encoder import Tokenizer
from sqlheads.errors import StoredQueryOwnerError
from sqlheads.store.repository import EmbeddingSet, Encoder, Store
from sqlheads.verbs.rows import RowSource, set_texts

# Texts are "long" when at least this share of them runs past the encoder's max_length
# tokens: a model reading the first window sees those rows only in part, and is the one most
# likely to fall below a bag of words. IMDB: 44 % past MiniLM's 256 tokens; Rotten Tomatoes: 0.
LONG_TEXT_SHARE = 0.2
LONG_TEXT_ADVICE = (
    "long texts ({share:.0%} of the rows run past the encoder's {limit} tokens): distil a "
    "TF-IDF student, which reads every word (`sqlheads distill --student tfidf ...`; "
    "docs/guides/data-scientist.md, Long texts)"
)


def read_texts(
    store: Store, embedding_set: EmbeddingSet, source: RowSource | None, keys: Sequence[str]
) -> tuple[list[Any] | None, str]:
    """The text of each of ``keys`` (None where the source has none) through ``source`` or the
    set's stored source query (its author's alone); (None, why) when neither can be read."""
    try:
        rows = set_texts(store, embedding_set, source)
    except StoredQueryOwnerError:
        return None, (
            f"set {embedding_set.name!r} has a source query stored by another user, which runs "
            "for its author alone: pass --source to fit the baseline"
        )
    if rows is None:
        return None, (
            f"set {embedding_set.name!r} has no source query and no --source was given: the "
            "baseline reads the rows' text"
        )
    texts = rows.texts(set(keys))
    return [texts.get(k) for k in keys], ""


def columns(metrics_json: str) -> dict[str, Any]:
    """The baseline's columns of a version's row in ``models``."""
    found = json.loads(metrics_json).get("baseline", {})
    return {
        "baseline_accuracy": found.get("accuracy"),
        "baseline_macro_f1": found.get("macro_f1"),
        "baseline_seconds": found.get("seconds"),
        "baseline_skipped": found.get("skipped"),
    }


def is_below(accuracy: float, baseline_accuracy: float | None) -> bool | None:
    """Below its baseline (held-out accuracy); None when there is no baseline to compare."""
    return None if baseline_accuracy is None else accuracy < baseline_accuracy


def tokenizer_of(store: Store, encoder: Encoder) -> Callable[[], Tokenizer]:
    """The encoder's tokenizer, read from the store when :func:`summary` needs it."""

    def made() -> Tokenizer:
        return Tokenizer(store.encoder_source(encoder.name).tokenizer_json, encoder.max_length)

    return made


def summary(
    stored: dict[str, Any],
    accuracy: float,
    texts: Sequence[Any] | None,
    tokenizer: Callable[[], Tokenizer] | None = None,
) -> dict[str, Any]:
    """What ``train`` and ``distill`` report of the baseline, with a plain verdict; below the
    baseline on long texts (by ``tokenizer``: the set's encoder), the long-text advice."""
    baseline_accuracy = stored["baseline_accuracy"]
    below = is_below(accuracy, baseline_accuracy)
    if baseline_accuracy is None:
        verdict = f"no baseline: {stored['baseline_skipped']}"
    else:
        verdict = (
            f"{'BELOW' if below else 'at or above'} its baseline: accuracy "
            f"{100 * accuracy:.1f} % vs TF-IDF + LR {100 * baseline_accuracy:.1f} %"
        )
        written = [str(t) for t in texts or () if t is not None]
        if below and tokenizer is not None and written:
            cut = tokenizer()
            share = cut.share_past_window(written)
            if share >= LONG_TEXT_SHARE:
                verdict += "; " + LONG_TEXT_ADVICE.format(share=share, limit=cut.max_length)
    return {
        "baseline": {
            "accuracy": _rounded(baseline_accuracy, 4),
            "macro_f1": _rounded(stored["baseline_macro_f1"], 4),
            "seconds": _rounded(stored["baseline_seconds"], 3),
            "skipped": stored["baseline_skipped"],
        },
        "below_baseline": below,
        "versus_baseline": verdict,
    }


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(float(value), digits)
