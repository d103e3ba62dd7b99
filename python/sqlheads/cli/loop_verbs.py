"""What an analyst asks of a deployed version next: which rows to label (``label-queue``), and
whether the rows it scores still look like its training data (``drift``)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console

from sqlheads.cli import tables as cli_tables
from sqlheads.cli.app import app, open_store, run
from sqlheads.engine.loop.active import MAX_COSINE
from sqlheads.verbs.drift import NO_SET_JUDGED
from sqlheads.verbs.drift import drift as drift_verb
from sqlheads.verbs.label_queue import EMPTY_QUEUE
from sqlheads.verbs.label_queue import label_queue as label_queue_verb

QUEUE_COLUMNS = (
    cli_tables.Column("queue_rank", "#", 0),
    cli_tables.Column("item_key", "item_key", 0),
    cli_tables.Column("margin", "margin", 1),
    cli_tables.Column("predicted_label", "predicted", 2),
    cli_tables.Column("probability", "probability", 3),
    cli_tables.Column("set", "set", 4),
)
DRIFT_COLUMNS = (
    cli_tables.Column("set", "set", 0),
    cli_tables.Column("drifted", "drifted", 0, lambda r: "yes" if r["drifted"] else "no"),
    cli_tables.Column("rows_scored", "rows", 1),
    cli_tables.Column("embedding_shift", "shift", 2),
    cli_tables.Column("top_probability_psi", "PSI", 3),
    cli_tables.Column(
        "mean_top_probability",
        "top p (held-out)",
        4,
        lambda r: (
            f"{r['mean_top_probability']:.3f}"
            + (
                f" ({r['held_out_mean_top_probability']:.3f})"
                if r["held_out_mean_top_probability"] is not None
                else ""
            )
        ),
    ),
    cli_tables.Column("largest_share_gap", "share gap", 5),
    cli_tables.Column("last_predicted_at", "last scored", 6),
    cli_tables.Column("reasons", "why", 7, lambda r: "; ".join(r["reasons"])),
)


@app.command("label-queue")
def label_queue(
    head: Annotated[str, typer.Option(help="Head whose deployed version ranks the rows.")],
    n: Annotated[int, typer.Option(help="How many rows to list (at most 100,000).")] = 100,
    set_name: Annotated[
        str | None, typer.Option("--set", help="Only rows of this set (default: every set).")
    ] = None,
    into: Annotated[
        str | None,
        typer.Option(
            help="Write the queue to this new table (label NULL until filled in; train "
            "--labels reads it back)."
        ),
    ] = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="Overwrite the --into table if it exists.")
    ] = False,
    max_cosine: Annotated[
        float,
        typer.Option(help="Pass over a row closer (cosine) to one listed; 1: margin order alone."),
    ] = MAX_COSINE,
) -> None:
    """List the rows to label next, those the deployed version is least sure of first.

    Unlabelled rows only, with no run of near-duplicates (the label_queue view, plus the
    stored vectors)."""

    def action() -> dict[str, Any]:
        return label_queue_verb(
            open_store(),
            head=head,
            n=n,
            set_name=set_name,
            into=into,
            replace=replace,
            max_cosine=max_cosine,
        )

    def render(result: dict[str, Any]) -> None:
        out = Console()
        title = f"label queue: {result['head']} v{result['version']}"
        table = cli_tables.fitted_table(title, QUEUE_COLUMNS, result["rows"], out.width)
        if result["into"]:
            written = f"written to table {result['into']} (fill in its label column)"
            table.caption = written if table.caption is None else f"{written}; {table.caption}"
        if not result["rows"]:
            table.caption = EMPTY_QUEUE
        out.print(table)

    run(action, "label-queue", render)


@app.command()
def drift(
    head: Annotated[str, typer.Option(help="Head whose deployed version to check.")],
) -> None:
    """Per set the deployed version scored: has the data drifted from its training data?"""

    def render(result: dict[str, Any]) -> None:
        out = Console()
        title = f"drift: {result['head']} v{result['version']}"
        table = cli_tables.fitted_table(
            title, DRIFT_COLUMNS, result["sets"], out.width, NO_SET_JUDGED
        )
        notes = [result[k] for k in ("reference", "sets_not_listed") if k in result]
        if notes:
            table.caption = "; ".join(notes)
        out.print(table)

    run(lambda: drift_verb(open_store(), head=head), "drift", render)
