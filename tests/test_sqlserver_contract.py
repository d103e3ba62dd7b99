"""What a parser alone cannot see: the procedure reference (docs/reference/procedures.md)
against the procedures' parameters and defaults, the error numbers (docs/reference/errors.md),
and every table and column the T-SQL names against the one schema metadata (and the Python
contract's column tuples)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlheads_sql
from sqlserver_tsql import (
    ROOT,
    procedure_parameters,
    select_list_names,
    split_top,
    strip_comments_and_strings,
)

from sqlheads.compute.columns import DISTILL_OUTPUT, EMBED_OUTPUT, PREDICT_OUTPUT, TRAIN_OUTPUT
from sqlheads.errors import ERRORS
from sqlheads.store import (
    queue_drift,
    schema,
    server_jobs,
    server_versions,
    set_writes,
    transfer_cache,
)

# The procedures analysts and admins call, as they stand at the newest revision.
PUBLIC = sorted(
    (p for p in sqlheads_sql.object_files() if p.parent.name == "procedures"), key=lambda p: p.stem
)
PROCEDURES = (ROOT / "docs" / "reference" / "procedures.md").read_text()
ERROR_TABLE = (ROOT / "docs" / "reference" / "errors.md").read_text()


def documented_reference() -> dict[str, list[tuple[str, str, str | None]]]:
    """``{procedure: [(parameter, type, default or None)]}`` from the reference's tables."""
    found: dict[str, list[tuple[str, str, str | None]]] = {}
    for section in re.split(r"^## ", PROCEDURES, flags=re.M)[1:]:
        name = re.match(r"`heads\.(\w+)`", section)
        if not name:
            continue
        rows = re.findall(r"^\| `@(\w+)` \| `([^`]+)` \| (`[^`]*`|required) \|", section, re.M)
        found[name.group(1)] = [
            (p, t, None if d == "required" else d.strip("`")) for p, t, d in rows
        ]
    return found


def test_the_reference_documents_every_procedure_and_nothing_else() -> None:
    assert set(documented_reference()) == {p.stem for p in PUBLIC}


@pytest.mark.parametrize("path", PUBLIC, ids=lambda p: p.stem)
def test_documented_parameters_match_the_procedure(path: Path) -> None:
    actual = [(p.name, p.type, p.default) for p in procedure_parameters(path)]
    assert documented_reference()[path.stem] == actual


def test_python_decides_every_default() -> None:
    """A parameter whose default is policy is NULL in T-SQL: Python (or heads.settings, written
    from Python) decides it, so the two hosts cannot drift (issue 10, point 20)."""
    python_decided = {
        "train": {
            "deploy",
            "hidden",
            "epochs",
            "lr",
            "weight_decay",
            "batch_size",
            "dropout",
            "test_fraction",
            "seed",
            "lock_timeout_ms",
        },
        "embed": {"encoder", "long_text", "batch_rows", "batch_size", "threads", "lock_timeout_ms"},
        "predict": {"version", "keys", "source", "batch_rows", "lock_timeout_ms"},
        "distill": {
            "student",
            "soft_labels",
            "teacher",
            "source",
            "transfer",
            "deploy",
            "temperature",
            "gold_weight",
            "epochs",
            "lr",
            "batch_size",
            "test_fraction",
            "seed",
            "lock_timeout_ms",
        },
        "drop_set": {"batch_rows", "lock_timeout_ms"},
        "deploy": {"lock_timeout_ms"},
        "roll_back": {"lock_timeout_ms"},
        "drop_head": {"lock_timeout_ms"},
        "request_embed": {"encoder", "long_text", "parts", "engine"},
        "request_teacher": {
            "source",
            "model",
            "students",
            "student_model",
            "deploy",
            "epochs",
            "batch_size",
            "lr",
            "max_length",
            "warmup_ratio",
            "grad_accumulation",
            "patience",
            "compile",
            "precision",
            "seed",
            "max_steps",
        },
        "cancel_job": set(),
    }
    for path in PUBLIC:
        defaults = {p.name: p.default for p in procedure_parameters(path)}
        for name in python_decided[path.stem]:
            assert defaults[name] == "NULL", f"heads.{path.stem} @{name} = {defaults[name]}"
        literal = {n: d for n, d in defaults.items() if d not in (None, "NULL")}
        assert set(literal) <= {"progress"}, f"heads.{path.stem} restates defaults: {literal}"


def test_every_error_number_is_documented() -> None:
    documented = {int(n) for n in re.findall(r"^\| (5\d{4}) \|", ERROR_TABLE, re.M)}
    thrown = set()
    for path in [ROOT / "sql" / "setup.sql", *sqlheads_sql.object_files()]:
        thrown |= {int(n) for n in re.findall(r"THROW\s+(5\d{4})", path.read_text())}
    assert thrown <= documented
    assert 50000 not in thrown, "50000 means nothing in particular: give the error its number"
    assert {error.number for error in ERRORS} - {50000} <= documented


# -- tables and columns ----------------------------------------------------------------------

TABLES = {t.name: {c.name for c in t.columns} for t in schema.metadata.sorted_tables}
# SQL Server only (migration 0003): Python's policy, copied by every migration.
TABLES["settings"] = {"name", "default_value", "choices", "minimum", "maximum"}
# Alembic's own (the schema revision), which the roles read from revision 0008 on.
TABLES["alembic_version"] = {"version_num"}
VIEWS = {
    name: list(build().selected_columns.keys())
    for name, build in (schema.VIEWS | queue_drift.VIEWS).items()
}
OBJECTS = {sqlheads_sql.object_name(p)[1] for p in sqlheads_sql.object_files()}


def temp_tables(sql: str) -> dict[str, dict[str, str]]:
    """``{#name: {column: type}}`` of the CREATE TABLE #... statements."""
    found = {}
    pattern = r"CREATE TABLE (#\w+) \(((?:(?!CREATE TABLE).)*?)\s*\);"
    for name, body in re.findall(pattern, sql, re.S):
        columns = {}
        for line in split_top(body):
            words = line.split()
            if words and words[0].upper() not in ("PRIMARY", "CONSTRAINT"):
                columns[words[0]] = words[1]
        found[name] = columns
    return found


CALLER_TEMPS = {
    name: columns
    for path in sqlheads_sql.object_files()
    for name, columns in temp_tables(strip_comments_and_strings(path.read_text())).items()
} | {  # made by the Python that calls the procedure (heads.store_soft_labels reads it, ...)
    name: {column: kind.split()[0] for column, kind in columns.items()}
    for name, columns in (
        (server_versions.SOFT_LABELS_STAGE, server_versions.SOFT_LABELS_COLUMNS),
        (set_writes.EMBED_ROWS_STAGE, set_writes.EMBED_ROWS_COLUMNS),  # write_embeddings
        (transfer_cache.TRANSFER_ROWS_STAGE, transfer_cache.TRANSFER_ROWS_COLUMNS),
        (server_jobs.PARTS_STAGE, server_jobs.PARTS_COLUMNS),  # heads.enqueue_job
        (server_jobs.INPUTS_STAGE, server_jobs.INPUTS_COLUMNS),
    )
}


@pytest.mark.parametrize(
    "path", sqlheads_sql.object_files(), ids=lambda p: str(p.relative_to(ROOT / "sql"))
)
def test_named_tables_and_columns_exist(path: Path) -> None:
    sql = strip_comments_and_strings(path.read_text())
    # A helper may read its callers' temp tables (heads.write_version reads #version).
    temps = CALLER_TEMPS | temp_tables(sql)
    # Every heads.X is a table, a view, or an object of sql/.
    for name in set(re.findall(r"\bheads\.(\w+)", sql)):
        assert name in TABLES or name in VIEWS or f"heads.{name}" in OBJECTS, f"heads.{name}"
    # Within a file an alias names one table (so alias.column can be checked without scopes).
    aliases: dict[str, str] = {}
    for table, alias in re.findall(r"(heads\.\w+|#\w+)\s+AS\s+(\w+)", sql):
        assert aliases.setdefault(alias, table) == table, f"alias {alias} names two tables"
    for alias, column in re.findall(r"\b([A-Za-z_]\w*)\.(\w+)\b", sql):
        table = aliases.get(alias)
        if table is None:
            continue
        if table.startswith("#"):
            known = set(temps.get(table, {}))
        else:
            name = table.split(".", 1)[1]
            known = TABLES.get(name) or set(VIEWS.get(name, []))
        assert column in known, f"{alias}.{column}: no column {column} in {table}"
    for table, columns in re.findall(r"INSERT INTO (heads\.\w+|#\w+) \(([^)]*)\)", sql):
        known = set(temps[table]) if table.startswith("#") else TABLES[table.split(".", 1)[1]]
        for column in (c.strip() for c in columns.split(",")):
            assert column in known, f"INSERT INTO {table}: no column {column}"
    # Keys and labels staged in tempdb have the metadata's sizes (no silent truncation).
    sizes = {
        "item_key": schema.predictions.c.item_key.type.length,
        "label": schema.predictions.c.label.type.length,
        "text_sha256": schema.embeddings.c.text_sha256.type.length,
    }
    for columns in temps.values():
        for column, length in sizes.items():
            if column in columns:
                assert re.fullmatch(rf"n?(var)?char\({length}\)", columns[column]), (
                    column,
                    columns,
                )


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_view_columns_are_the_metadata_views(name: str) -> None:
    views = {p.stem: p for p in sqlheads_sql.object_files() if p.parent.name == "views"}
    sql = strip_comments_and_strings(views[name].read_text())
    select_list = re.search(r"AS\s+SELECT\s+(.*?)\s+FROM heads\.", sql, re.S).group(1)
    assert select_list_names(select_list) == VIEWS[name]


def test_staging_tables_carry_the_python_contract() -> None:
    sources = {p.stem: strip_comments_and_strings(p.read_text()) for p in PUBLIC}
    assert list(temp_tables(sources["embed"])["#embed_output"]) == list(EMBED_OUTPUT)
    # #version: what Python returns, plus a student's teacher_accuracy (NULL for a head)
    trained = list(temp_tables(sources["train"])["#version"])
    assert trained[: len(TRAIN_OUTPUT)] == list(TRAIN_OUTPUT)
    assert list(temp_tables(sources["distill"])["#version"]) == list(DISTILL_OUTPUT)
    assert list(temp_tables(sources["predict"])["#predict_output"]) == list(PREDICT_OUTPUT)
