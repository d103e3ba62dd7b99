"""The host's side of the TF-IDF baseline: the text it reads, the columns it fills, the verdict.

``train`` and ``distill`` hand the rows' text to their :mod:`sqlheads.compute` half when it is
reachable (the call's ``--source``, else the set's last ``embed --source``); the compute half
fits the baseline on the version's own rows and records it in ``metrics_json``; the version's
row in ``models`` keeps its accuracy, macro-F1 and seconds, or why it was skipped.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlheads.errors import StoredQueryOwnerError
from sqlheads.store.repository import EmbeddingSet, Store
from sqlheads.verbs.rows import RowSource, set_texts

# Texts longer than this (median, in characters: ~256 tokens) are "long": a model that reads
# the first 256 tokens of them is the one most likely to fall below a bag of words.
LONG_TEXT_CHARS = 1_200
LONG_TEXT_ADVICE = (
    "long texts: distil a TF-IDF student, which reads every word (`sqlheads distill "
    "--student tfidf ...`, README: Long texts)"
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


def summary(stored: dict[str, Any], accuracy: float, texts: Sequence[Any] | None) -> dict[str, Any]:
    """What ``train`` and ``distill`` report of the baseline, with a plain verdict."""
    baseline_accuracy = stored["baseline_accuracy"]
    below = is_below(accuracy, baseline_accuracy)
    if baseline_accuracy is None:
        verdict = f"no baseline: {stored['baseline_skipped']}"
    else:
        verdict = (
            f"{'BELOW' if below else 'at or above'} its baseline: accuracy "
            f"{100 * accuracy:.1f} % vs TF-IDF + LR {100 * baseline_accuracy:.1f} %"
        )
        if below and _long(texts):
            verdict += f"; {LONG_TEXT_ADVICE}"
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


def _long(texts: Sequence[Any] | None) -> bool:
    lengths = sorted(len(str(t)) for t in texts or () if t is not None)
    return bool(lengths) and lengths[len(lengths) // 2] > LONG_TEXT_CHARS


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(float(value), digits)
