"""The reference pages' generated parts, made from the code so that they cannot drift.

- the command line (``docs/reference/cli.md``): every command, argument and option of the
  Typer application, with its help and default;
- the error numbers (``docs/reference/errors.md``): ``sqlheads.errors.ERRORS``;
- the procedures (``docs/reference/procedures.md``): every public procedure at the newest
  revision under ``sql/``, the revision its text comes from, its parameters and the roles that
  may run it (its role files' grants, through role membership);
- the settings (``docs/reference/settings.md``): ``sqlheads.settings.SETTINGS``.

The pages are committed (readable on GitHub and in a checkout without a build); each holds its
generated part between two markers. ``python docs/hooks/references.py`` rewrites those parts;
as an MkDocs hook this module refuses to build a site whose committed parts differ from the
code, so ``mkdocs build --strict`` (run by the tests) fails on drift and names the command.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1]
FIX = "python docs/hooks/references.py"
BEGIN = "<!-- generated: {name} (from the code: edit it, then run " + FIX + ") -->"
END = "<!-- end of generated: {name} -->"


def _cell(text: object) -> str:
    """One Markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(columns: list[str], rows: list[list[object]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# -- the command line ------------------------------------------------------------------------


def _rows(command, context) -> list[list[str]]:
    """(option, meaning) of each parameter as ``--help`` prints it, required and default too."""
    rows = []
    for parameter in command.params:
        record = parameter.get_help_record(context)
        if record is not None and parameter.name != "help":
            rows.append(
                [
                    f"`{record[0]}`",
                    record[1].replace("  [", " ["),
                ]
            )
    return rows


def cli_reference() -> str:
    import typer.main

    from sqlheads.cli import app

    group = typer.main.get_command(app)
    context = group.make_context("sqlheads", ["init"], resilient_parsing=True)
    columns = ["option", "meaning"]
    out = ["## Global options", "", _table(columns, _rows(group, context))]
    for name, command in group.commands.items():
        verb = command.make_context(name, [], parent=context, resilient_parsing=True)
        required = [
            record[0]
            for p in command.params
            if p.required and (record := p.get_help_record(verb)) is not None
        ]
        usage = " ".join(["sqlheads [GLOBAL OPTIONS]", name, *required, "[OPTIONS]"])
        out += ["", f"## `sqlheads {name}`", "", " ".join((command.help or "").split()), ""]
        out += ["```text", usage, "```"]
        if rows := _rows(command, verb):
            out += ["", _table(columns, rows)]
    return "\n".join(out)


# -- the error numbers ---------------------------------------------------------------------


def errors_reference() -> str:
    from sqlheads.errors import ERRORS

    rows = [
        [error.number, f"`{error.__name__}`", " ".join((error.__doc__ or "").split())]
        for error in sorted(ERRORS, key=lambda e: e.number)
        if error.number != 50000
    ]
    return _table(["number", "Python class (`sqlheads.errors`)", "meaning"], rows)


# -- the procedures ------------------------------------------------------------------------

_GRANT = re.compile(r"GRANT\s+EXECUTE\s+ON\s+OBJECT::heads\.(\w+)\s+TO\s+(\w+)", re.I)
_MEMBER = re.compile(r"ALTER\s+ROLE\s+(\w+)\s+ADD\s+MEMBER\s+(\w+)", re.I)
_PARAMETER = re.compile(r"^\s*(@\w+)\s+([\w]+(?:\([^)]*\))?)(?:\s*=\s*([^,\s]+))?", re.M)


def _header(text: str) -> str:
    """The first sentence of a T-SQL file's leading comment, after ``heads.name:``."""
    comment = []
    for line in text.splitlines():
        if not line.startswith("--"):
            break
        comment.append(line[2:].strip())
    words = " ".join(comment).split(":", 1)[-1].strip()
    words = re.sub(r" \(issue \d+[^)]*\)", "", words)  # the reader cannot open an issue
    first = re.split(r"(?<=[a-z)])\. ", words, maxsplit=1)[0].rstrip(".")
    return first.replace("<", "&lt;").replace(">", "&gt;")  # `head:<head>` is text, not HTML


def _parameters(text: str) -> list[str]:
    """The parameter list between ``CREATE OR ALTER PROCEDURE name`` and ``AS``."""
    head = re.search(r"CREATE\s+OR\s+ALTER\s+PROCEDURE\s+\S+(.*?)^AS\b", text, re.S | re.M | re.I)
    found = []
    for name, sql_type, default in _PARAMETER.findall(head.group(1) if head else ""):
        found.append(f"`{name} {sql_type}`" + (f" = `{default}`" if default else ""))
    return found


def _executors(role_texts: dict[str, str]) -> dict[str, set[str]]:
    """{procedure: roles that may run it}, a role's members inheriting its grants."""
    granted: dict[str, set[str]] = {}
    members: dict[str, set[str]] = {}
    for text in role_texts.values():
        for procedure, role in _GRANT.findall(text):
            granted.setdefault(procedure, set()).add(role)
        for role, member in _MEMBER.findall(text):
            members.setdefault(role, set()).add(member)

    def with_members(roles: set[str]) -> set[str]:
        found = set(roles)
        while True:
            more = {m for r in found for m in members.get(r, ())} - found
            if not more:
                return found
            found |= more

    return {procedure: with_members(roles) for procedure, roles in granted.items()}


def procedures_reference() -> str:
    import sqlheads_sql

    files = sqlheads_sql.object_files()
    newest = sqlheads_sql.revisions()[-1]
    roles = {p.stem: p.read_text() for p in files if p.parent.name == "roles"}
    executors = _executors(roles)
    rows = []
    for path in sorted((p for p in files if p.parent.name == "procedures"), key=lambda p: p.stem):
        text = path.read_text()
        rows.append(
            [
                f"[`heads.{path.stem}`](#heads{path.stem})",
                path.parent.parent.name,
                ", ".join(sorted(executors.get(path.stem, ()))) or "(none)",
                ", ".join(_parameters(text)),
                _header(text),
            ]
        )
    intro = (
        f"The public procedures as revision {newest} (the newest under `sql/`) leaves them: the "
        "revision whose folder holds each one's current text, the roles that may run it (its "
        "grants in the role files, a role's members included), and its parameters with their "
        "T-SQL defaults (`NULL`: Python's default, from `heads.settings`)."
    )
    return intro + "\n\n" + _table(["procedure", "text from", "run by", "parameters", "does"], rows)


# -- the settings --------------------------------------------------------------------------


def settings_reference() -> str:
    from sqlheads.settings import SETTINGS

    rows = []
    for name, setting in SETTINGS.items():
        allowed = ", ".join(f"`{c}`" for c in setting.choices)
        if setting.minimum is not None or setting.maximum is not None:
            allowed = f"{setting.minimum:,} to {setting.maximum:,}"
        default = "" if setting.default is None else f"`{setting.default}`"
        rows.append([f"`{name}`", default, allowed, setting.about])
    return _table(["setting", "default", "allowed", "meaning"], rows)


PAGES: dict[str, tuple[str, Callable[[], str]]] = {
    "cli": ("reference/cli.md", cli_reference),
    "errors": ("reference/errors.md", errors_reference),
    "procedures": ("reference/procedures.md", procedures_reference),
    "settings": ("reference/settings.md", settings_reference),
}


def regenerated(name: str) -> tuple[Path, str, str]:
    """(page, its committed text, its text with the generated part made afresh)."""
    page, render = PAGES[name]
    path = DOCS / page
    text = path.read_text(encoding="utf-8")
    begin, end = BEGIN.format(name=name), END.format(name=name)
    if begin not in text or end not in text:
        raise ValueError(f"{path} lacks the markers of its generated part:\n{begin}\n{end}")
    before, rest = text.split(begin, 1)
    after = rest.split(end, 1)[1]
    return path, text, f"{before}{begin}\n\n{render()}\n\n{end}{after}"


def stale() -> list[str]:
    """The pages whose committed generated part differs from what the code makes now."""
    return [
        str(path.relative_to(DOCS.parent))
        for path, old, new in map(regenerated, PAGES)
        if old != new
    ]


def on_pre_build(config) -> None:  # an MkDocs hook (mkdocs.yml: hooks)
    from mkdocs.exceptions import PluginError

    if found := stale():
        raise PluginError(f"generated reference out of date: {', '.join(found)}: run {FIX}")


if __name__ == "__main__":
    sys.path.insert(0, str(DOCS.parent))
    for name in PAGES:
        path, old, new = regenerated(name)
        if old != new:
            path.write_text(new, encoding="utf-8")
            print(f"rewrote {path.relative_to(DOCS.parent)}")
