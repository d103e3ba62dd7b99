"""How the command line's help reads: what a flag takes, and nothing it does not.

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


# request-teacher's fine-tuning knobs: what each does and the default the job uses when it is
# left out (TeacherParams' and the teacher job's; a test checks they agree, since importing
# them here would load PyTorch for every command's start).
TEACHER_OPTIONS = {
    "no_students": ("Fine-tune the teacher and store its soft labels, distil no student.", None),
    "student_model": ("Encoder the encoder student starts from.", "all-MiniLM-L6-v2"),
    "student_layers": (
        "Transformer layers the encoder student keeps of its model's (fewer: faster).",
        "all",
    ),
    "epochs": ("Passes over the labelled rows.", 3),
    "batch_size": ("Rows per optimiser step (times --grad-accumulation).", 32),
    "lr": ("Peak learning rate.", 3e-5),
    "max_length": ("Tokens read per row; longer texts are cut.", 128),
    "warmup_ratio": ("Share of the steps spent warming the learning rate up.", 0.1),
    "grad_accumulation": ("Batches summed before each optimiser step.", 1),
    "patience": ("Evaluations without improvement before stopping; 0: never stop early.", 2),
    "seed": ("Random seed of the fine-tuning.", 0),
    "max_steps": ("Stop after this many optimiser steps (smoke runs).", "none"),
    "transfer_rows": (
        "Rows the teacher labels beyond the set's, for the text students (cached).",
        12_000,
    ),
}


def teacher_help(name: str) -> str:
    """The help of a request-teacher option, ending with the default the job uses."""
    text, default = TEACHER_OPTIONS[name]
    # Parentheses: Typer's rich help would read square brackets as markup.
    return text if default is None else f"{text} (default {default})"
