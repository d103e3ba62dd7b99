"""How the command line's help reads (issue 20, point 4).

Typer 0.29 shows a value type beside every option, ``<bool>`` too, which reads as if a flag
took a value (``--json <bool>``); a flag takes none, so none is shown.
"""

from __future__ import annotations

import click
from typer.core import TyperOption

_display_type_rich = TyperOption.display_type_rich


def _no_type_for_flags(self: TyperOption, ctx: click.Context) -> str | None:
    return None if self.is_flag else _display_type_rich(self, ctx)


def hide_flag_types() -> None:
    """Show no value type beside flags in every command's help."""
    TyperOption.display_type_rich = _no_type_for_flags  # type: ignore[method-assign]
