"""``python -m sqlheads.cli``: the ``sqlheads`` command."""

from sqlheads.cli import app

app()
