"""The ``sqlheads`` command line: one command per T-SQL procedure, plus ``demo``.

``app`` holds the application and its global options, ``render`` the progress display; the
commands are grouped by what they act on: ``data_verbs``, ``model_verbs``, ``sidecar_verbs``,
and ``loop_verbs`` (what to label next, and drift). They register themselves on import.
"""

from sqlheads.cli import data_verbs, loop_verbs, model_verbs, sidecar_verbs  # noqa: F401
from sqlheads.cli.app import app

__all__ = ["app"]
