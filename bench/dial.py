"""dial: the encoder student's depths, taught by a frozen MPNet head on the CPU.

``bench students`` at the dial's size, in a section of its own: all of Rotten Tomatoes on a
fresh SQLite file, the frozen all-mpnet-base-v2 int8 head as teacher, and MiniLM-L6 cut to 6,
3 and 2 layers (spread from the first), each distilled at the encoder kind's defaults with and
without the feature loss (learning the teacher's vectors beside its soft labels; on by default
from three layers up), on the same cached transfer rows, the shallower ones after their general
stage (their layers learning the whole MiniLM's hidden states on 30,000 IMDB sentences, 60,000
for two layers, once per machine: its seconds a column of their own, and part of the first
distill's seconds);
beside them the teacher, the frozen MiniLM head, the default word student and the TF-IDF
students, with every model's rows/s alone and each step's wall time.
The word students' curve over transfer rows is ``bench students``' (full scale). This module
also holds the dial's table and headline, which ``bench students`` shows at every size.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import Section, Table, fmt, pct
from sqlheads.engine.students.encoder import FEATURE_WEIGHT, default_feature_weight

# the students run's size at each of this benchmark's scales
SIZE = {"full": "dial", "quick": "quick", "tiny": "tiny"}


def run(out_dir: Path, scale: str = "full") -> Section:
    """``bench students`` at the dial's size, under this section's name, title and intro."""
    from bench import students

    section = students.run(out_dir, scale, size=SIZE[scale], section="dial")
    section.title = "dial: the encoder student's depths, taught on the CPU"
    section.intro = __doc__.split("\n", 2)[2].strip()
    return section


FEATURE = {True: "labels + vectors", False: "labels only"}


def name(layers: int, feature: bool) -> str:
    """The dial student's row name in every table of the section (and its plot's label)."""
    return f"encoder student L{layers}, {FEATURE[feature]}"


def distill_dial(
    distill: Callable[..., dict[str, Any]], options: dict[str, Any], layers: tuple[int, ...]
) -> dict[str, dict[str, Any]]:
    """Each depth of ``layers``, feature loss on (at :data:`FEATURE_WEIGHT`, whatever the
    depth's default) then off, distilled with ``options`` (transfer rows, epochs, ... as
    ``host.distill`` takes them) on the CPU; by :func:`name`."""
    return {
        name(n, feature): distill(
            f"distill the {name(n, feature)}",
            student="encoder",
            layers=n,
            feature_weight=FEATURE_WEIGHT if feature else 0.0,
            device="cpu",
            **options,
        )
        for n in layers
        for feature in (True, False)
    }


def dial_table(
    dialled: dict[str, dict[str, Any]],
    steps: dict[str, float],
    alone: dict[str, float],
    reference: tuple[str, float],
    rows: int,
    epochs: int,
) -> Table:
    """Accuracy, distill seconds and rows/s of each dial student, beside MiniLM + head."""
    minilm_name, minilm = reference
    lines = []
    for label, result in dialled.items():
        rate = alone[label]
        depth, learnt = label.removeprefix("encoder student L").split(", ")
        lines.append(
            [depth, _feature_cell(int(depth), learnt == FEATURE[True]), fmt(rows), str(epochs),
             pct(result["accuracy"]), pct(result["teacher_accuracy"]),
             f"{result['metrics'].get('general_seconds', 0):.0f}",
             f"{steps[f'distill the {label}']:.0f}", fmt(round(rate)), f"{rate / minilm:.2f}x"]
        )  # fmt: skip
    return Table(
        "The encoder student's dial: MiniLM-L6 cut to N layers (spread from the first), with "
        "and without the feature loss (its pooled vector, through a learned projection, against "
        "the teacher encoder's), the same teacher and cached transfer rows; distill seconds "
        "wall, on the CPU, the general stage's included (a shallower depth's, once per "
        "machine: 0 where the cache had it); rows/s of the models alone, against "
        f"{minilm_name}'s {fmt(round(minilm))}",
        ["depth", "feature loss", "transfer rows", "epochs", "accuracy", "teacher, same rows",
         "general stage s", "distill s", "rows/s", "x MiniLM + head"],
        lines,
    )  # fmt: skip


def dial_headline(
    section: str, dialled: dict[str, dict[str, Any]], alone: dict[str, float], minilm: float
) -> list[str]:
    """One headline row: each depth's accuracy and speed against MiniLM + head, at its
    defaults (the feature loss on or off as :func:`default_feature_weight` says)."""
    shown = [
        (label, r)
        for label, r in dialled.items()
        if label.endswith(FEATURE[default_feature_weight(_depth(label)) > 0])
    ]
    return [
        section,
        "RT encoder student by depth, at its defaults: layers "
        + " / ".join(str(_depth(label)) for label, _ in shown),
        " / ".join(
            f"{pct(r['accuracy'])} at {alone[label] / minilm:.1f}x MiniLM + head"
            for label, r in shown
        ),
    ]


def _depth(label: str) -> int:
    return int(label.removeprefix("encoder student L").split(",")[0])


def _feature_cell(depth: int, on: bool) -> str:
    """The feature loss on or off, and whether that is the depth's default."""
    default = (default_feature_weight(depth) > 0) == on
    return ("on" if on else "off") + (" (default)" if default else "")
