"""Tables that fit the terminal, at 80 columns as at 200.

Rich squeezes every column of a table too wide for the terminal until headers read ``jo…`` and
names ``all-Mini…``. Instead, each listing names its columns from the most to the least
wanted; the table keeps, in that order, the columns whose full width still fits, shows them in
their listing order, and says in its caption which were left out (``--json`` has them all).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rich.table import Table

# What rich's default box adds to a table: a border and two spaces of padding per column, and
# the closing border.
COLUMN_FRAME = 3
TABLE_FRAME = 1


def plain(value: Any) -> str:
    if value is None:
        return ""
    return f"{value:.4f}" if isinstance(value, float) else str(value)


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    rank: int  # 0 is shown first of all; the highest rank is left out first
    show: Callable[[dict[str, Any]], str] | None = None  # default: the record's ``key``

    def cell(self, record: dict[str, Any]) -> str:
        return self.show(record) if self.show else plain(record.get(self.key))


def fitted_table(
    title: str,
    columns: Sequence[Column],
    records: Sequence[dict[str, Any]],
    width: int,
    empty: str = "none yet",
) -> Table:
    """The records as a table of the columns that fit ``width``, most wanted first; with no
    records, the headers and ``empty`` under them."""
    cells = {c.key: [c.cell(r) for r in records] for c in columns}
    needed = {c.key: max([len(c.header), *map(len, cells[c.key])]) for c in columns}
    kept: set[str] = set()
    used = TABLE_FRAME
    for column in sorted(columns, key=lambda c: c.rank):
        if used + needed[column.key] + COLUMN_FRAME <= width or not kept:
            kept.add(column.key)
            used += needed[column.key] + COLUMN_FRAME
    shown = [c for c in columns if c.key in kept]
    left_out = [c.header for c in columns if c.key not in kept]
    caption = f"not shown at {width} columns: {', '.join(left_out)} (--json has every field)"
    if not records:
        caption = empty
    table = Table(title=title, caption=caption if left_out or not records else None)
    for column in shown:
        table.add_column(column.header, no_wrap=True, overflow="ellipsis")
    for index in range(len(records)):
        table.add_row(*[cells[c.key][index] for c in shown])
    return table


def _of(done: str, total: str) -> Callable[[dict[str, Any]], str]:
    def show(record: dict[str, Any]) -> str:
        if record.get(done) is None:
            return ""
        return f"{record[done]}/{'?' if record.get(total) is None else record[total]}"

    return show


JOBS = (
    Column("job_id", "job", 0),
    Column("kind", "kind", 1),
    Column("state", "state", 2),
    Column("head", "head", 3),
    Column("progress", "progress", 4, _of("progress_done", "progress_total")),
    Column("set_name", "set", 5),
    Column("stage", "stage", 6),
    Column("part", "part", 7, _of("part", "parts")),
    Column("error_number", "error", 8),
    Column("attempts", "attempts", 9),
    Column("claimed_by", "claimed by", 10),
    Column("requested_at", "requested", 11),
)
CATALOGUE = (
    Column("model", "model", 0),
    Column("installed", "installed", 1, lambda r: "yes" if r["installed"] else "no"),
    Column("registered_as", "registered as", 2, lambda r: ", ".join(r["registered_as"])),
    Column("dim", "dim", 3),
    Column("rows_per_second", "rows/s", 4),
    Column("mb", "MB int8/fp32", 5, lambda r: f"{r['int8_mb']}/{r['fp32_mb']}"),
    Column("accuracy", "accuracy", 6),
)
REGISTERED = (
    Column("name", "name", 0),
    Column("quantization", "quantization", 1),
    Column("dim", "dim", 2),
    Column("mb", "MB", 3, lambda r: str(r["mb"])),
    Column("max_length", "max length", 4),
    Column("parity_cosine", "parity cosine", 5),
)
_DEPLOYED = Column("is_deployed", "deployed", 2, lambda r: "yes" if r["is_deployed"] else "")
BELOW_BASELINE = " ▼"  # after the accuracy of a version below its TF-IDF baseline: worth a look
_ACCURACY = Column(
    "accuracy",
    "accuracy",
    3,
    lambda r: plain(r.get("accuracy")) + (BELOW_BASELINE if r.get("below_baseline") else ""),
)
_MACRO_F1 = Column("macro_f1", "macro_f1", 5)
_SET = Column("set_name", "set", 6)
MODELS = (
    Column("head", "head", 0),
    Column("version", "version", 1),
    Column("kind", "kind", 4),
    _DEPLOYED,
    _ACCURACY,
    _MACRO_F1,
    _SET,
)
# model_summary's columns that --wide shows under their own names, after those below, in this
# order of rank
_WIDE_REST = (
    "rows_train",
    "teacher_accuracy",
    "parameters",
    "seconds",
    "encoder_name",
    "model_id",
    "rows_test",
    "teacher",
    "baseline_macro_f1",
    "baseline_seconds",
    "baseline_skipped",
    "created_at",
    "below_baseline",
)
# --wide adds model_summary's other columns, the baseline's accuracy first: it outranks
# macro-F1 and the set, so that at 80 columns --wide shows what a version is worth against a
# bag of words (--json has every field under its full name).
MODELS_WIDE = (
    *MODELS[:5],
    Column("baseline_accuracy", "baseline", 5),
    replace(_MACRO_F1, rank=6),
    replace(_SET, rank=7),
    *(Column(key, key, rank) for rank, key in enumerate(_WIDE_REST, start=8)),
)
