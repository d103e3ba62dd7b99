"""The held-out split and the metrics every training run records."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sqlheads.errors import InvalidParameterError, TooFewRowsError

# The held-out share of train, distill and the teacher job (settings.TEST_FRACTION): one split.
TEST_FRACTION = 0.2


def stratified_split(
    keys: Sequence[str],
    labels: Sequence[str],
    *,
    test_fraction: float = TEST_FRACTION,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Boolean masks (train, test) over rows, stratified by label and fixed by ``seed``.

    Rows are ordered by key before splitting, so the split does not depend on the order in
    which a query returned them: the same keys, fraction and seed give the same test rows.
    """
    if not 0 < test_fraction < 1:
        raise InvalidParameterError(
            f"test_fraction={test_fraction} must be between 0 and 1 (exclusive), e.g. 0.2"
        )
    keys = np.asarray([str(k) for k in keys])
    labels = np.asarray([str(v) for v in labels])
    classes, counts = np.unique(labels, return_counts=True)
    # A class needs a row on each side, and the test side must hold every class.
    needed = max(2, int(np.ceil(1 / test_fraction)), int(np.ceil(1 / (1 - test_fraction))))
    small = [f"'{c}' ({n})" for c, n in zip(classes.tolist(), counts, strict=True) if n < needed]
    if small:
        raise TooFewRowsError(
            f"class(es) {', '.join(small)} have fewer than {needed} labelled rows, too few for a "
            f"held-out split of {test_fraction:.0%}: label more rows of them, merge or drop them"
        )
    n_test = int(round(len(keys) * test_fraction))
    if n_test < len(classes) or len(keys) - n_test < len(classes):
        raise TooFewRowsError(
            f"{len(keys)} labelled rows cannot hold {len(classes)} classes on both sides of a "
            f"{test_fraction:.0%} split: label more rows or change --test-fraction"
        )
    # scikit-learn is imported here, not at module level: SQL Server starts a fresh Python for
    # every predict batch, which must not pay for importing it.
    from sklearn.model_selection import train_test_split

    order = np.argsort(keys, kind="stable")
    _, test_positions = train_test_split(
        order, test_size=n_test, random_state=seed, stratify=labels[order]
    )
    test = np.zeros(len(keys), dtype=bool)
    test[test_positions] = True
    return ~test, test


def held_out_keys(
    keys: Sequence[str], labels: Sequence[object], *, test_fraction: float, seed: int
) -> set[str]:
    """The keys :func:`stratified_split` holds out among the labelled ones (a label that is
    None, NaN or blank marks a row without one), as ``train`` and ``distill`` hold them out."""
    labelled = [
        (str(k), str(v))
        for k, v in zip(keys, labels, strict=True)
        if v is not None and v == v and str(v).strip()  # v == v: not NaN
    ]
    if not labelled:
        return set()
    _, test = stratified_split(
        [k for k, _ in labelled], [v for _, v in labelled], test_fraction=test_fraction, seed=seed
    )
    return {k for (k, _), held in zip(labelled, test, strict=True) if held}


def classification_metrics(
    y_true: Sequence[str], y_pred: Sequence[str], classes: Sequence[str]
) -> dict:
    """Accuracy, macro-F1, per-class precision/recall/F1/support and the confusion matrix.

    The matrix's rows are true classes and its columns predicted ones, both in ``classes``
    order.
    """
    from sklearn.metrics import accuracy_score, confusion_matrix, precision_recall_fscore_support

    classes = list(classes)
    precision, recall, f1, support = precision_recall_fscore_support(
        y_true, y_pred, labels=classes, zero_division=0
    )
    return {
        "accuracy": float(accuracy_score(y_true, y_pred)),
        "macro_f1": float(np.mean(f1)),
        "per_class": {
            c: {
                "precision": float(p),
                "recall": float(r),
                "f1": float(f),
                "support": int(s),
            }
            for c, p, r, f, s in zip(classes, precision, recall, f1, support, strict=True)
        },
        "classes": classes,
        "confusion_matrix": confusion_matrix(y_true, y_pred, labels=classes).tolist(),
    }
