"""The T-SQL surface of sqlheads on SQL Server, one file per object, shipped as ``sqlheads_sql``.

The migration ``0002`` runs these files, in :data:`ORDER`, on SQL Server; a DBA can read or run
them by hand (``sqlcmd -i``). Tables are not here: they come from the migrations, which are
generated from the one schema metadata (``sqlheads.store.schema``).
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parent

# Folders in the order their objects can be created: functions and helpers before the
# procedures that call them, everything before the roles that are granted on it.
ORDER = ("views", "internal", "procedures", "roles")
# Within a folder, these first and in this order: helpers before the procedures that run
# Python; a role before the role that joins it.
_FIRST = (
    "cache_dir.sql",
    "assert_name.sql",
    "assert_query_columns.sql",
    "report_progress.sql",
    "heads_reader.sql",
    "heads_analyst.sql",
    "heads_admin.sql",
)

_GO = re.compile(r"^[ \t]*GO[ \t]*;?[ \t]*$", re.IGNORECASE | re.MULTILINE)


def object_files() -> list[Path]:
    """Every object file (views, helpers, procedures, roles) in creation order."""
    files: list[Path] = []
    for folder in ORDER:
        found = sorted((ROOT / folder).glob("*.sql"))
        found.sort(key=lambda p: _FIRST.index(p.name) if p.name in _FIRST else len(_FIRST))
        files.extend(found)
    return files


def all_files() -> list[Path]:
    """Every .sql file, the server setup script included."""
    return [ROOT / "setup.sql", *object_files()]


def batches(path: Path) -> list[str]:
    """The batches of a file, split on ``GO`` lines as sqlcmd and SSMS do."""
    text = path.read_text(encoding="utf-8")
    return [b.strip() for b in _GO.split(text) if _strip_comments(b).strip()]


def _strip_comments(text: str) -> str:
    return re.sub(r"--[^\n]*", "", text)


def object_name(path: Path) -> tuple[str, str]:
    """``(kind, name)`` of a file's object: ("procedure", "heads.embed"), ("role", ...)."""
    kind = {"views": "view", "procedures": "procedure", "roles": "role"}.get(path.parent.name)
    if path.parent.name == "internal":
        kind = "function" if path.stem == "cache_dir" else "procedure"
    if kind is None:
        raise ValueError(f"{path} is not an object file")
    return kind, path.stem if kind == "role" else f"heads.{path.stem}"
