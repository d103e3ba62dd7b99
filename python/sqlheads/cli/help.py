"""How the command line's help reads: what a flag takes, and nothing it does not.

Typer 0.29 shows a value type beside every option, ``<bool>`` too, which reads as if a flag
took a value (``--json <bool>``); a flag takes none, so none is shown.
"""

from __future__ import annotations

from dataclasses import fields

import click
from typer.core import TyperOption

from sqlheads.engine.constraints import about
from sqlheads.engine.training.params import TeacherParams
from sqlheads.sidecar.requests import TeacherRequest

_display_type_rich = TyperOption.display_type_rich


def _no_type_for_flags(self: TyperOption, ctx: click.Context) -> str | None:
    return None if self.is_flag else _display_type_rich(self, ctx)


def hide_flag_types() -> None:
    """Show no value type beside flags in every command's help."""
    TyperOption.display_type_rich = _no_type_for_flags  # type: ignore[method-assign]


# request-teacher's options whose help is their field's: what it does and the default the job
# uses when it is left out, read from the request (TeacherRequest) and its fine-tuning
# (TeacherParams, free of PyTorch), not copied.
TEACHER_OPTIONS = (
    "student_model",
    "student_layers",
    "epochs",
    "batch_size",
    "lr",
    "max_length",
    "warmup_ratio",
    "grad_accumulation",
    "patience",
    "seed",
    "max_steps",
    "transfer_rows",
)


def teacher_help(name: str) -> str:
    """The help of a request-teacher option (:data:`TEACHER_OPTIONS`), ending with the default
    the job uses."""
    cls = TeacherRequest if name in {f.name for f in fields(TeacherRequest)} else TeacherParams
    text, default = about(cls, name)
    # Parentheses: Typer's rich help would read square brackets as markup.
    return f"{text} (default {'none' if default is None else default})"
