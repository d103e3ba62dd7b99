"""Temporary tables a procedure reads its rows from (SQL Server): the caller's session makes
them, fills them with bound rows, and the procedure reads them (``#embed_rows``,
``#transfer_rows``, ``#job_parts``, ``#job_inputs``). A table left by a failed call on a pooled
connection is made again."""

from __future__ import annotations

from sqlalchemy import TextClause, text


def create(name: str, columns: dict[str, str]) -> TextClause:
    """``CREATE TABLE #name (column type, ...)``, dropping one of that name first."""
    return text(
        f"IF OBJECT_ID(N'tempdb..{name}') IS NOT NULL DROP TABLE {name}; "
        f"CREATE TABLE {name} (" + ", ".join(f"{c} {kind}" for c, kind in columns.items()) + ")"
    )


def insert(name: str, columns: list[str] | dict[str, str]) -> TextClause:
    """``INSERT INTO #name (columns) VALUES (:column, ...)``, one bound value a column."""
    listed = list(columns)
    return text(
        f"INSERT INTO {name} ({', '.join(listed)}) VALUES ({', '.join(':' + c for c in listed)})"
    )
