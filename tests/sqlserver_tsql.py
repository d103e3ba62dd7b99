"""Small readers of the T-SQL under sql/, shared by the tests/test_sqlserver_*.py files."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import sqlheads_sql

ROOT = Path(__file__).resolve().parents[1]
LITERAL = r"N'((?:[^']|'')*)'"


def unquote(text: str) -> str:
    return text.replace("''", "'")


def strip_comments_and_strings(sql: str) -> str:
    """The T-SQL with string literals emptied and comments removed (for regex scans)."""
    return re.sub(
        r"--[^\n]*|N?'(?:[^']|'')*'",
        lambda m: "" if m.group(0).startswith("--") else "''",
        sql,
    )


@dataclass
class ExternalCall:
    """One ``sp_execute_external_script`` call, as written in a procedure."""

    path: Path
    script: str
    input_query: str
    params: dict[str, str]  # name -> declared type (OUTPUT ones included)
    outputs: set[str]
    result_columns: list[tuple[str, str]]  # WITH RESULT SETS (name, type)


def external_calls() -> list[ExternalCall]:
    calls = []
    for path in sqlheads_sql.object_files():
        text = path.read_text()
        if (
            "EXEC sys.sp_execute_external_script" not in text
        ):  # what heads.sign_external_scripts signs
            continue
        script = re.search(r"@script\s*=\s*" + LITERAL, text)
        query = re.search(r"@input_data_1\s*=\s*" + LITERAL, text)
        params = re.search(r"@params\s*=\s*" + LITERAL, text)
        result = re.search(r"WITH RESULT SETS \(\((.*?)\)\);", text, re.S)
        assert script and query and params and result, f"{path}: cannot read its external call"
        declared: dict[str, str] = {}
        outputs: set[str] = set()
        for part in split_top(unquote(params.group(1))):
            words = part.split()
            declared[words[0].lstrip("@")] = words[1]
            if words[-1].upper() == "OUTPUT":
                outputs.add(words[0].lstrip("@"))
        columns = []
        for part in split_top(result.group(1)):
            name, kind = part.split()[:2]
            columns.append((name, kind))
        calls.append(
            ExternalCall(
                path=path,
                script=unquote(script.group(1)),
                input_query=unquote(query.group(1)),
                params=declared,
                outputs=outputs,
                result_columns=columns,
            )
        )
    return calls


def split_top(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current.strip())
    return parts


def select_list_names(select_list: str) -> list[str]:
    """Output column names of a select list: the alias, else the column after the last dot."""
    names = []
    for item in split_top(select_list):
        alias = re.search(r"\bAS\s+\[?(\w+)\]?\s*$", item, re.I)
        names.append(alias.group(1) if alias else item.split(".")[-1].strip("[] \n"))
    return names


def input_columns(query: str) -> tuple[list[str], str]:
    """``SELECT a, b FROM #t``: (["a", "b"], "#t")."""
    match = re.fullmatch(r"\s*SELECT\s+(.*?)\s+FROM\s+(#\w+)\s*", query, re.S | re.I)
    assert match, f"the input query must be a plain SELECT from a temp table: {query!r}"
    return select_list_names(match.group(1)), match.group(2)


@dataclass
class Parameter:
    name: str
    type: str
    default: str | None  # None: required


def procedure_parameters(path: Path) -> list[Parameter]:
    """Parameters of ``CREATE OR ALTER PROCEDURE name <params> AS``."""
    text = path.read_text()
    header = re.search(r"CREATE OR ALTER PROCEDURE\s+[\w.]+\s*(.*?)\nAS\n", text, re.S)
    assert header, f"{path}: no procedure header"
    found = []
    for part in split_top(strip_comments_and_strings_keep(header.group(1))):
        match = re.fullmatch(
            r"@(\w+)\s+(\w+(?:\([\w, ]+\))?)(?:\s*=\s*(.+?))?(?:\s+OUTPUT)?", part.strip(), re.S
        )
        assert match, f"{path}: cannot read parameter {part!r}"
        found.append(Parameter(match.group(1), match.group(2), match.group(3)))
    return found


def strip_comments_and_strings_keep(sql: str) -> str:
    return re.sub(r"--[^\n]*", "", sql)
