"""A SQLite file's folder checked before SQLite opens it, so an error names the fix.

SQLite says only "unable to open database file" for a missing folder or a read-only one; the
checks here name the path and the fix instead. The folder must be writable even to read: in WAL
mode SQLite writes FILE-wal and FILE-shm beside the file, and sqlheads its FILE.locks folder.
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlheads.errors import DatabaseError


def check_sqlite_file(database: str | None) -> None:
    """Refuse a file SQLite could not open or write, naming it and the fix (50013)."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return
    path = Path(database).expanduser().absolute()
    folder = path.parent
    if not folder.is_dir():
        raise DatabaseError(
            f"cannot open the SQLite file {path}: its folder {folder} does not exist; create "
            f"it (mkdir -p {folder}) or pass another --url sqlite:///PATH"
        )
    read_only = folder if not os.access(folder, os.W_OK) else None
    if read_only is None and path.exists() and not os.access(path, os.W_OK):
        read_only = path
    if read_only is not None:
        raise DatabaseError(
            f"cannot write the SQLite file {path}: {read_only} is read-only (SQLite writes "
            f"{path.name}-wal and {path.name}-shm beside the file, even to read); copy the "
            "file to a writable folder, or mount it read-write, and pass --url sqlite:///PATH"
        )
