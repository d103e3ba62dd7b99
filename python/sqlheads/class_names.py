"""Class names every host can name a column after.

A teacher's soft labels reach ``heads.distill`` as one column per class, named after the class,
which SQL Server turns into JSON with ``FOR JSON PATH``: a name with an inner dot nests
(``very.good``: Python joins the path back), but one that starts or ends with ``.`` or holds
``..`` cannot be a path (Msg 13603), so those soft labels could never be read. Such a class is
refused when a model is trained on it, on every host, before anything is stored.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlheads.errors import ClassNameError


def refuse_unnamable_classes(labels: Iterable[object]) -> None:
    """Refuse (50073) a class name that starts or ends with ``.`` or holds ``..``."""
    bad = sorted(
        {
            name
            for name in map(str, labels)
            if name.startswith(".") or name.endswith(".") or ".." in name
        }
    )
    if bad:
        raise ClassNameError(
            f"class name(s) {', '.join(map(repr, bad))} start or end with '.' or hold '..': "
            "SQL Server cannot name a soft-labels column after them (FOR JSON PATH, Msg "
            "13603); rename the class in the labels query (e.g. REPLACE(label, '.', '_'))"
        )
