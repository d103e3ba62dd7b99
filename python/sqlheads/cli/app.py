"""The ``sqlheads`` application: its global options (``--url``, ``--json``), the store it
opens, and how a command's result or error is printed.

Every command takes ``--json`` and then prints one JSON object on stdout; errors print
``{"error": ..., "number": ...}`` (or a sentence on stderr) and exit with status 2.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from typer.core import TyperGroup

from sqlheads import host
from sqlheads.cli import help as cli_help
from sqlheads.cli.interrupts import remembered
from sqlheads.errors import DatabaseError, NotInitialisedError, SqlheadsError
from sqlheads.store import migrations
from sqlheads.store.repository import Store


class _GlobalOptionsAnywhere(TyperGroup):
    """``sqlheads jobs --json`` reads as ``sqlheads --json jobs``: the global options (``--json``,
    ``--url URL``, ``--url=URL``) are accepted after the command too, and moved before it.

    A word that is the value of one of the command's own options (``--head --json``) stays
    where it is; so does everything after ``--``.
    """

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, self._hoisted(ctx, list(args)))

    def _hoisted(self, ctx: Any, args: list[str]) -> list[str]:
        position = 0
        while position < len(args) and args[position].startswith("-"):  # options before it
            position += 2 if args[position] == "--url" else 1
        command = self.get_command(ctx, args[position]) if position < len(args) else None
        if command is None:
            return args
        takes_value = {
            name
            for parameter in command.params
            if parameter.param_type_name == "option" and not parameter.is_flag
            for name in parameter.opts + parameter.secondary_opts
        }
        before, after = args[: position + 1], []
        rest = iter(args[position + 1 :])
        for word in rest:
            if word == "--":
                after += [word, *rest]
            elif word == "--json" or word.startswith("--url="):
                before.insert(0, word)
            elif word == "--url":
                before[:0] = [word, next(rest, "")]
            elif word in takes_value:
                after += [word, next(rest, "")]
            else:
                after.append(word)
        return before + after


app = typer.Typer(
    cls=_GlobalOptionsAnywhere,
    help="Text classification inside your database: embed rows, train tiny heads, predict.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


console = Console(stderr=True)
cli_help.hide_flag_types()


class _Options:
    url: str = host.DEFAULT_URL
    url_given: bool = False
    json: bool = False


options = _Options()


LockTimeout = Annotated[
    int,
    typer.Option(
        help="How long to wait for another process using the head (ms); then error 50016."
    ),
]


@app.callback()
def main(
    url: Annotated[
        str | None,
        typer.Option(help="Database URL. Default: $SQLHEADS_URL, then sqlite:///sqlheads.db."),
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print one JSON object instead of tables.")
    ] = False,
) -> None:
    chosen = url or os.environ.get("SQLHEADS_URL")
    options.url_given = chosen is not None
    options.url = chosen or host.DEFAULT_URL
    options.json = json_output


def open_store(*, must_exist: bool = False) -> Store:
    """The store at --url; an embedded SQLite file is initialised on first use and upgraded
    on the first use by a newer sqlheads; a server's database must be migrated first.

    ``must_exist``: a verb that only reads (``models``, ``jobs``, ``encoders``) refuses a SQLite
    file that does not exist rather than create an empty one at a mistyped path.
    """
    if must_exist:
        _refuse_a_missing_sqlite_file(options.url)
    store = Store.from_url(options.url)
    migrations.ensure_current(store)
    return store


def _refuse_a_missing_sqlite_file(url: str) -> None:
    try:
        parsed = make_url(url)
    except ArgumentError:
        return  # Store.from_url names what is wrong with the URL
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or database in (None, "", ":memory:"):
        return
    if database.startswith("file:") or Path(database).exists():
        return
    path = os.path.abspath(database)
    raise NotInitialisedError(
        f"the SQLite file {path} does not exist: check the path in --url (or $SQLHEADS_URL), "
        f"or create the store there with `sqlheads --url sqlite:///{path} init`"
    )


def emit(result: dict[str, Any], title: str) -> None:
    if options.json:
        typer.echo(json.dumps(result, default=str))
        return
    table = Table(title=title, show_header=False)
    for key, value in result.items():
        table.add_row(key, in_words(value))
    Console().print(table)


def in_words(value: Any) -> str:
    """A result's value as a table cell: ``load 2.58, embed 7.87`` for a mapping, the items of a
    list, ``-`` for nothing (JSON keeps ``null``, ``{}`` and ``[]`` under --json)."""
    if value is None:
        return "-"
    if isinstance(value, dict):
        return ", ".join(f"{k} {in_words(v)}" for k, v in value.items()) or "-"
    if isinstance(value, list):
        return ", ".join(in_words(v) for v in value) or "-"
    return str(value)


def fail(error: SqlheadsError) -> None:
    if options.json:
        typer.echo(json.dumps({"error": error.message, "number": error.number}))
    else:
        # escape: messages quote SQL and extras such as [mssql], which are not markup
        # A log file or a pipe gets the message on one line, not wrapped at 80 columns.
        console.print(
            f"[bold red]error {error.number}:[/] {escape(error.message)}",
            soft_wrap=not console.is_terminal,
        )
    raise typer.Exit(2)


def _said_after_interrupt(kept: Callable[[], str] | None, title: str) -> str:
    if kept is None:
        return f"interrupted: {title} stopped before it finished"
    try:
        return kept()
    except (SqlheadsError, DBAPIError) as error:  # the store could not be read after it
        return f"interrupted: {title} stopped; what it kept could not be read ({error})"


def interrupted(message: str) -> NoReturn:
    """Ctrl-C: say what was kept and how to go on, and exit 130 as an interrupted shell does."""
    console.print(escape(message), soft_wrap=not console.is_terminal)
    raise typer.Exit(130)


def run(
    action: Callable[[], dict[str, Any]],
    title: str,
    render: Callable[[dict[str, Any]], None] | None = None,
    kept: Callable[[], str] | None = None,
) -> None:
    """Run a command's action; print its result (``render`` for tables) or its error. Ctrl-C:
    ``kept()`` says what the command kept and what to run to go on (:mod:`.interrupts`), once
    the interrupt has closed the progress display."""
    try:
        with remembered():
            result = action()
    except KeyboardInterrupt:
        interrupted(_said_after_interrupt(kept, title))
    except SqlheadsError as error:
        fail(error)
    except DBAPIError as error:  # the database refused: say what it said, without a traceback
        fail(DatabaseError(f"the database refused the operation: {error.orig}"))
    else:
        if render is not None and not options.json:
            render(result)
        else:
            emit(result, title)
