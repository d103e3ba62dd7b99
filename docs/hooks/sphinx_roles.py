"""A griffe extension for the Python API reference (docs/reference/python.md): the package's
docstrings name other objects with Sphinx roles (:class:`~sqlheads.x.Y`), which Markdown would
print as they are written; each becomes the code span Sphinx would show (``Y``, a function
``f()``), before mkdocstrings renders the docstring."""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(class|func|meth|mod|data|attr|exc|obj|const):`(~?)([^`]+)`")


def shown(match: re.Match[str]) -> str:
    """A role as Sphinx shows it: ``~`` keeps the last dotted name, a callable gets ``()``."""
    role, short, target = match.groups()
    name = target.rsplit(".", 1)[-1] if short else target
    return f"`{name}()`" if role in ("func", "meth") else f"`{name}`"


class SphinxRoles(griffe.Extension):
    """Rewrites each object's docstring as it is read."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = ROLE.sub(shown, obj.docstring.value)
