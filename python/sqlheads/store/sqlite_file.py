"""A SQLite file's folder checked before SQLite opens it, so an error names the fix.

SQLite says only "unable to open database file" for a missing folder or a read-only one; the
checks here name the path and the fix instead. The folder must be writable even to read: in WAL
mode SQLite writes FILE-wal and FILE-shm beside the file, and sqlheads its .FILE.locks folder.
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
    if path.is_dir():
        raise DatabaseError(
            f"cannot open the SQLite file {path}: it is a folder; name a file in it instead, "
            f"e.g. --url sqlite:///{path / 'sqlheads.db'}"
        )
    if path.is_file() and not _holds_sqlite(path):
        raise DatabaseError(
            f"{path} is not a SQLite database (it does not start with SQLite's header), and "
            "sqlheads leaves it as it is: check the path in --url, or name a new file for the "
            f"store, e.g. --url sqlite:///{folder / 'sqlheads.db'}"
        )
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


SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file


def _holds_sqlite(path: Path) -> bool:
    """Whether ``path`` is a SQLite database: its header, or empty (SQLite makes an empty file
    a new database, as ``touch my.db`` then ``init`` expects)."""
    try:
        with path.open("rb") as file:
            start = file.read(len(SQLITE_HEADER))
    except OSError:
        return True  # unreadable: SQLite's own message (and the read-only check) says why
    return start in (b"", SQLITE_HEADER)


def lock_folder(database: str) -> Path:
    """The folder of a SQLite store's lock files, made on first use: ``.FILE.locks`` beside the
    file, where the processes that share the file all find it (a cache folder elsewhere would
    be another folder in another container or under another user). Hidden, and holding a
    ``.gitignore`` of ``*`` (as pytest's cache does), so that ``ls`` and ``git status`` in the
    user's folder show the store, not its locks."""
    path = Path(database).resolve()
    folder = path.parent / f".{path.name}.locks"
    folder.mkdir(exist_ok=True)
    ignore = folder / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# made by sqlheads: its lock files, never to be committed\n*\n")
    return folder
