"""The ``sqlheads`` application: its global options (``--url``, ``--json``), the store it
opens, and how a command's result or error is printed.

Every command takes ``--json`` and then prints one JSON object on stdout; errors print
``{"error": ..., "number": ...}`` (or a sentence on stderr) and exit with status 2.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from sqlalchemy.exc import DBAPIError

from sqlheads import host
from sqlheads.cli import help as cli_help
from sqlheads.errors import DatabaseError, SqlheadsError
from sqlheads.store import migrations
from sqlheads.store.repository import Store

app = typer.Typer(
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


def open_store() -> Store:
    """The store at --url; an embedded SQLite file is initialised on first use and upgraded
    on the first use by a newer sqlheads; a server's database must be migrated first."""
    store = Store.from_url(options.url)
    migrations.ensure_current(store)
    return store


def emit(result: dict[str, Any], title: str) -> None:
    if options.json:
        typer.echo(json.dumps(result, default=str))
        return
    table = Table(title=title, show_header=False)
    for key, value in result.items():
        table.add_row(key, json.dumps(value) if isinstance(value, dict | list) else str(value))
    Console().print(table)


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


def run(
    action: Callable[[], dict[str, Any]],
    title: str,
    render: Callable[[dict[str, Any]], None] | None = None,
) -> None:
    """Run a command's action; print its result (``render`` for tables) or its error."""
    try:
        result = action()
    except SqlheadsError as error:
        fail(error)
    except DBAPIError as error:  # the database refused: say what it said, without a traceback
        fail(DatabaseError(f"the database refused the operation: {error.orig}"))
    else:
        if render is not None and not options.json:
            render(result)
        else:
            emit(result, title)
