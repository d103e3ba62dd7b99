"""The ``sqlheads`` command line: one command per T-SQL procedure, plus ``demo``.

Every command takes ``--json`` and then prints one JSON object on stdout; errors print
``{"error": ..., "number": ...}`` (or a sentence on stderr) and exit with status 2.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn
from rich.table import Table
from sqlalchemy.exc import DBAPIError

from sqlheads import cli_help, cli_tables, host
from sqlheads.engine.distillation import DistillParams
from sqlheads.engine.heads import FAST_FROM_ROWS, HeadParams
from sqlheads.errors import DatabaseError, SqlheadsError
from sqlheads.host import LOCK_TIMEOUT_MS
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


def _store() -> Store:
    """The store at --url; an embedded SQLite file is initialised on first use and upgraded
    on the first use by a newer sqlheads; a server's database must be migrated first."""
    store = Store.from_url(options.url)
    migrations.ensure_current(store)
    return store


def _emit(result: dict[str, Any], title: str) -> None:
    if options.json:
        typer.echo(json.dumps(result, default=str))
        return
    table = Table(title=title, show_header=False)
    for key, value in result.items():
        table.add_row(key, json.dumps(value) if isinstance(value, dict | list) else str(value))
    Console().print(table)


def _fail(error: SqlheadsError) -> None:
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


def _run(
    action: Callable[[], dict[str, Any]],
    title: str,
    render: Callable[[dict[str, Any]], None] | None = None,
) -> None:
    """Run a command's action; print its result (``render`` for tables) or its error."""
    try:
        result = action()
    except SqlheadsError as error:
        _fail(error)
    except DBAPIError as error:  # the database refused: say what it said, without a traceback
        _fail(DatabaseError(f"the database refused the operation: {error.orig}"))
    else:
        if render is not None and not options.json:
            render(result)
        else:
            _emit(result, title)


class _Lines:
    """Progress as plain lines on stderr at a steady pace, for logs, pipes and schedulers."""

    PACE_S = 10.0  # a line at least this far apart, plus the first and the last

    def __init__(self, label: str, unit: str) -> None:
        self.label, self.unit = label, unit
        self.done = 0
        self.started = time.monotonic()
        self.printed: float | None = None

    def __call__(self, done: int, total: int | None) -> None:
        now = time.monotonic()
        if done == 0 and self.done == 0:  # "starting now": the rate counts from here
            self.started = now
        self.done += done
        finished = total is not None and self.done >= total
        if self.printed is not None and now - self.printed < self.PACE_S and not finished:
            return
        self.printed = now
        rate = self.done / max(now - self.started, 1e-9)
        line = f"{self.label}: {self.done:,}"
        if total:
            line += f" of {total:,} {self.unit} ({100 * self.done / total:.0f} %)"
            if rate and not finished:
                line += f", about {timedelta(seconds=round((total - self.done) / rate))} left"
        else:
            line += f" {self.unit}"
        print(f"{line}, {rate:,.1f} {self.unit}/s", file=sys.stderr, flush=True)

    def stage(self, label: str) -> None:
        self.label = label
        print(f"{label} ...", file=sys.stderr, flush=True)

    def task(self, label: str, unit: str) -> _Lines:
        """Another step of the same command, counted on its own."""
        return _Lines(label, unit)


class _Bar:
    """A Rich progress bar on a terminal; Python warnings print above it, not into it."""

    def __init__(self, bar: Progress, label: str) -> None:
        self.bar = bar
        self.task_id = bar.add_task(label, total=None)

    def __call__(self, done: int, total: int | None) -> None:
        self.bar.update(self.task_id, advance=done, total=total)

    def stage(self, label: str) -> None:
        self.bar.update(self.task_id, description=label)

    def task(self, label: str, unit: str) -> _Bar:
        """Another step of the same command: a second bar under the first."""
        return _Bar(self.bar, label)


@contextmanager
def _progress(label: str, unit: str = "rows") -> Iterator[_Lines | _Bar | None]:
    """A bar on a terminal; plain lines on stderr when it is not one (under --json too, since
    stdout keeps the one JSON object); nothing under --json on a terminal."""
    if not sys.stderr.isatty():
        yield _Lines(label, unit)
        return
    if options.json:
        yield None
        return
    # onnxruntime's quantiser warns through the root logger while the bar is drawn
    handler = RichHandler(console=console, show_time=False, show_path=False)
    logging.getLogger().addHandler(handler)
    try:
        with Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=console,
        ) as bar:
            yield _Bar(bar, label)
    finally:
        logging.getLogger().removeHandler(handler)


# -- commands ---------------------------------------------------------------------------------


@app.command()
def init() -> None:
    """Create or upgrade the tables and views (safe to run again)."""
    _run(lambda: host.init(Store.from_url(options.url)), "init")


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

    def action() -> dict[str, Any]:
        store = _store()
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

    _run(action, "encoder")


@app.command()
def encoders() -> None:
    """The encoder catalogue (installed, registered, size, speed, accuracy) and this store's."""

    def render(result: dict[str, Any]) -> None:
        out = Console()
        out.print(
            cli_tables.fitted_table(
                "catalogue (rows/s: int8 on 2 cores; accuracy: a head on frozen vectors)",
                cli_tables.CATALOGUE, result["catalogue"], out.width,
            )
        )  # fmt: skip
        for e in result["catalogue"]:
            if not e["installed"]:
                out.print(f"to install {e['model']}: {e['install']}")
        out.print(
            cli_tables.fitted_table(
                "registered in this store", cli_tables.REGISTERED, result["registered"], out.width
            )
        )

    _run(lambda: host.encoders(_store()), "encoders", render)


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
    batch_rows: Annotated[int, typer.Option(help="Rows per committed batch.")] = 1000,
    batch_size: Annotated[int, typer.Option(help="Texts per encoder call.")] = 32,
) -> None:
    """Embed the rows of a query into a set; unchanged rows are skipped."""

    def action() -> dict[str, Any]:
        with _progress(f"embedding {set_name}") as progress:
            return host.embed(
                _store(),
                set_name=set_name,
                source=source,
                encoder=encoder,
                long_text=long_text,
                batch_rows=batch_rows,
                batch_size=batch_size,
                progress=progress,
                stage=progress.stage if progress else None,
            )

    _run(action, "embed")


@app.command()
def train(
    head: Annotated[str, typer.Option(help="Head to train a new version of.")],
    set_name: Annotated[str, typer.Option("--set", help="Embedding set with the vectors.")],
    labels: Annotated[str, typer.Option(help="SELECT returning item_key and label.")],
    hidden: Annotated[
        int | None, typer.Option(help="Hidden units (default max(64, 4 x classes), <= 512).")
    ] = None,
    recipe: Annotated[
        str,
        typer.Option(
            help=f"auto: fast from {FAST_FROM_ROWS:,} training rows on, seed below; fast "
            "(early stopping) or seed (Adam amsgrad, linear decay)."
        ),
    ] = HeadParams.recipe,
    epochs: Annotated[int, typer.Option(help="At most (fast) or exactly (seed).")] = (
        HeadParams.epochs
    ),
    lr: Annotated[float, typer.Option(help="Adam learning rate.")] = HeadParams.lr,
    weight_decay: Annotated[float, typer.Option()] = HeadParams.weight_decay,
    batch_size: Annotated[
        int | None,
        typer.Option(help="Rows per step (fast 512; seed 64, or rows/100 if larger)."),
    ] = HeadParams.batch_size,
    dropout: Annotated[float, typer.Option()] = HeadParams.dropout,
    test_fraction: Annotated[float, typer.Option(help="Held-out share, stratified.")] = 0.2,
    seed: Annotated[int, typer.Option(help="Fixes the split and the initialisation.")] = 0,
    deploy: Annotated[str, typer.Option(help="if-better, always or never.")] = "if-better",
    encoder: Annotated[
        str | None, typer.Option(help="Refuse unless the set uses this encoder.")
    ] = None,
    lock_timeout_ms: LockTimeout = LOCK_TIMEOUT_MS,
    source: Annotated[
        str | None,
        typer.Option(help="TF-IDF baseline: SELECT item_key, text (default: the set's source)."),
    ] = None,
) -> None:
    """Train a new version of a head on stored vectors, with metrics on a held-out split."""

    def action() -> dict[str, Any]:
        with _progress(f"training {head}", unit="epochs") as progress:
            return host.train(
                _store(),
                head=head,
                set_name=set_name,
                labels=labels,
                encoder=encoder,
                deploy=deploy,
                lock_timeout_ms=lock_timeout_ms,
                progress=progress,
                source=source,
                recipe=recipe,
                hidden=hidden,
                epochs=epochs,
                lr=lr,
                weight_decay=weight_decay,
                batch_size=batch_size,
                dropout=dropout,
                test_fraction=test_fraction,
                seed=seed,
            )

    _run(action, "train")


@app.command()
def distill(
    head: Annotated[str, typer.Option(help="Head to add a student version to.")],
    set_name: Annotated[str, typer.Option("--set", help="Embedding set the rows belong to.")],
    labels: Annotated[str, typer.Option(help="SELECT returning item_key and label (gold).")],
    student: Annotated[
        str,
        typer.Option(
            help="word (raw text, no encoder at scoring), head (stored vectors), encoder "
            "(MiniLM fine-tuned on the soft labels, int8 ONNX on raw text) or tfidf (TF-IDF "
            "of the whole text: long texts)."
        ),
    ] = "word",
    soft_labels: Annotated[
        str | None,
        typer.Option(help="SELECT returning item_key and one logit column per class (by name)."),
    ] = None,
    teacher: Annotated[
        str | None,
        typer.Option(help="Name the soft labels are stored under, or reused from (HEAD_teacher)."),
    ] = None,
    source: Annotated[
        str | None,
        typer.Option(
            help="Text students and the baseline: SELECT item_key, text (default: the set's "
            "source)."
        ),
    ] = None,
    transfer: Annotated[
        str | None,
        typer.Option(
            help="SELECT item_key: distil only on these rows (default: all but held out)."
        ),
    ] = None,
    temperature: Annotated[float, typer.Option()] = DistillParams.temperature,
    gold_weight: Annotated[
        float, typer.Option(help="Weight of cross-entropy on gold labels (0: KL only).")
    ] = DistillParams.gold_weight,
    epochs: Annotated[int | None, typer.Option(help="Default: the student kind's.")] = None,
    lr: Annotated[float | None, typer.Option(help="Default: the student kind's.")] = None,
    batch_size: Annotated[int, typer.Option()] = DistillParams.batch_size,
    test_fraction: Annotated[float, typer.Option(help="Held-out share, as train's.")] = 0.2,
    seed: Annotated[int, typer.Option(help="Fixes the split, as train's.")] = 0,
    deploy: Annotated[str, typer.Option(help="if-better, always or never.")] = "if-better",
    student_model: Annotated[
        str | None,
        typer.Option(help="Encoder student: catalogue model or HF directory (all-MiniLM-L6-v2)."),
    ] = None,
    max_length: Annotated[
        int | None, typer.Option(help="Encoder student: tokens per text (128).")
    ] = None,
    max_steps: Annotated[
        int | None, typer.Option(help="Encoder student: stop after this many steps.")
    ] = None,
    device: Annotated[
        str, typer.Option(help="Encoder student: auto, cpu, cuda or cuda:N.")
    ] = "auto",
) -> None:
    """Distil a teacher's soft labels into a student version of a head."""

    def action() -> dict[str, Any]:
        with _progress(f"distilling {head}", unit="epochs") as progress:
            return distill_with(progress)

    def distill_with(progress: Any) -> dict[str, Any]:
        return host.distill(
            _store(),
            progress=progress,
            head=head,
            set_name=set_name,
            labels=labels,
            student=student,
            soft_labels=soft_labels,
            teacher=teacher,
            source=source,
            transfer=transfer,
            deploy=deploy,
            temperature=temperature,
            gold_weight=gold_weight,
            epochs=epochs,
            lr=lr,
            batch_size=batch_size,
            test_fraction=test_fraction,
            seed=seed,
            student_model=student_model,
            max_length=max_length,
            max_steps=max_steps,
            device=device,
        )

    _run(action, "distill")


@app.command()
def predict(
    head: Annotated[str, typer.Option(help="Head to score with.")],
    set_name: Annotated[str, typer.Option("--set", help="Embedding set to score.")],
    version: Annotated[int | None, typer.Option(help="Version (default: deployed).")] = None,
    keys: Annotated[
        str | None, typer.Option(help="SELECT returning item_key: score only these.")
    ] = None,
    source: Annotated[
        str | None,
        typer.Option(
            help="Text models: SELECT returning item_key and text (default: the set's source)."
        ),
    ] = None,
) -> None:
    """Score a set into the predictions table with a version of any kind (re-running replaces)."""

    def action() -> dict[str, Any]:
        with _progress(f"scoring {set_name}") as progress:
            return host.predict(
                _store(),
                head=head,
                set_name=set_name,
                version=version,
                keys=keys,
                source=source,
                progress=progress,
            )

    _run(action, "predict")


@app.command()
def deploy(
    head: Annotated[str, typer.Option(help="The head whose version to deploy.")],
    version: Annotated[int, typer.Option(help="Version to deploy.")],
    lock_timeout_ms: LockTimeout = LOCK_TIMEOUT_MS,
) -> None:
    """Deploy a version of a head (predict and latest_predictions use it)."""
    _run(
        lambda: host.deploy(_store(), head=head, version=version, lock_timeout_ms=lock_timeout_ms),
        "deploy",
    )


@app.command("roll-back")
def roll_back(
    head: Annotated[str, typer.Option(help="The head to deploy the previous version of.")],
    lock_timeout_ms: LockTimeout = LOCK_TIMEOUT_MS,
) -> None:
    """Deploy again the version deployed before the current one (heads.roll_back)."""
    _run(
        lambda: host.roll_back(_store(), head=head, lock_timeout_ms=lock_timeout_ms),
        "roll-back",
    )


@app.command()
def models(
    head: Annotated[str | None, typer.Option(help="Only this head.")] = None,
    wide: Annotated[
        bool, typer.Option("--wide", help="Every column of model_summary (needs a wide terminal).")
    ] = False,
) -> None:
    """List every version with its metrics (the model_summary view)."""

    def action() -> dict[str, Any]:
        frame = host.models(_store(), head=head)
        return {"models": json.loads(frame.to_json(orient="records", date_format="iso"))}

    def render(result: dict[str, Any]) -> None:
        out = Console()
        columns = cli_tables.MODELS_WIDE if wide else cli_tables.MODELS
        table = cli_tables.fitted_table("model_summary", columns, result["models"], out.width)
        if not wide and any(record.get("below_baseline") for record in result["models"]):
            below = f"{cli_tables.BELOW_BASELINE.strip()} below its TF-IDF + LR baseline (--wide)"
            table.caption = below if table.caption is None else f"{below}; {table.caption}"
        out.print(table)

    _run(action, "models", render)


@app.command("drop-head")
def drop_head(
    head: Annotated[str, typer.Option(help="The head to delete, with every version.")],
    lock_timeout_ms: LockTimeout = LOCK_TIMEOUT_MS,
) -> None:
    """Delete a head: its versions, deployments and predictions."""
    _run(
        lambda: {"head": head, "versions_dropped": _store().drop_head(head, lock_timeout_ms)},
        "drop-head",
    )


@app.command("drop-set")
def drop_set(
    set_name: Annotated[str, typer.Option("--set", help="The embedding set to delete.")],
) -> None:
    """Delete a set's vectors, rejects and predictions (refused while heads use it)."""

    def action() -> dict[str, Any]:
        _store().drop_set(set_name)
        return {"set": set_name, "dropped": True}

    _run(action, "drop-set")


# -- the sidecar's queue (sidecar/requests.py, sidecar/worker.py) ----------------------------


@app.command()
def sidecar(
    once: Annotated[
        bool, typer.Option("--once", help="Stop when no job is left to claim.")
    ] = False,
    device: Annotated[
        str, typer.Option(help="auto (a GPU if there is one), cpu, cuda or cuda:N.")
    ] = "auto",
    max_jobs: Annotated[int | None, typer.Option(help="Stop after this many jobs.")] = None,
    poll_seconds: Annotated[
        float | None, typer.Option(help="Wait between claims when idle (default: setting).")
    ] = None,
    heartbeat_seconds: Annotated[
        float | None, typer.Option(help="Beat for a running job this often (default: setting).")
    ] = None,
    stale_after_seconds: Annotated[
        int | None,
        typer.Option(help="Take over running jobs whose beat is this old (default: setting)."),
    ] = None,
    kind: Annotated[
        list[str] | None, typer.Option(help="Only jobs of this kind (teacher, embed); repeatable.")
    ] = None,
) -> None:
    """Claim and run queued jobs (teacher fine-tuning, embed parts): the container's entrypoint."""
    from sqlheads.sidecar.worker import Sidecar, SidecarOptions

    def action() -> dict[str, Any]:
        chosen = SidecarOptions(
            device=device,
            once=once,
            max_jobs=max_jobs,
            poll_seconds=poll_seconds,
            heartbeat_seconds=heartbeat_seconds,
            stale_after_seconds=stale_after_seconds,
            kinds=tuple(kind or ()),
        )
        return Sidecar(_store(), chosen, console=console).run()

    _run(action, "sidecar")


@app.command("request-embed")
def request_embed(
    set_name: Annotated[str, typer.Option("--set", help="Embedding set to fill.")],
    source: Annotated[str, typer.Option(help="SELECT returning item_key and text.")],
    encoder: Annotated[
        str | None, typer.Option(help=f"Encoder name (default {host.DEFAULT_ENCODER}).")
    ] = None,
    long_text: Annotated[str | None, typer.Option(help="window (default) or truncate.")] = None,
    parts: Annotated[
        int | None, typer.Option(help="Jobs to split the rows into by key range (one a sidecar).")
    ] = None,
    engine: Annotated[
        str | None, typer.Option(help="auto (torch on a GPU, onnx on a CPU), onnx or torch.")
    ] = None,
) -> None:
    """Queue the embedding of a query's rows for the sidecars, in parts by key range."""
    from sqlheads.sidecar.requests import request_embed as request

    _run(
        lambda: request(
            _store(),
            set_name=set_name,
            source=source,
            encoder=encoder,
            long_text=long_text,
            parts=parts,
            engine=engine,
        ),
        "request-embed",
    )


@app.command("request-teacher")
def request_teacher(
    head: Annotated[str, typer.Option(help="Head whose labels the teacher learns.")],
    set_name: Annotated[str, typer.Option("--set", help="Embedding set the rows belong to.")],
    labels: Annotated[str, typer.Option(help="SELECT returning item_key and label.")],
    source: Annotated[
        str | None, typer.Option(help="SELECT item_key, text (default: the set's source).")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Catalogue name or local Hugging Face directory.")
    ] = None,
    student: Annotated[
        list[str] | None,
        typer.Option(help="encoder and/or word (repeatable); none: pass --no-students."),
    ] = None,
    no_students: Annotated[
        bool, typer.Option("--no-students", help=cli_help.teacher_help("no_students"))
    ] = False,
    student_model: Annotated[
        str | None, typer.Option(help=cli_help.teacher_help("student_model"))
    ] = None,
    deploy: Annotated[str | None, typer.Option(help="if-better, always or never.")] = None,
    epochs: Annotated[int | None, typer.Option(help=cli_help.teacher_help("epochs"))] = None,
    batch_size: Annotated[
        int | None, typer.Option(help=cli_help.teacher_help("batch_size"))
    ] = None,
    lr: Annotated[float | None, typer.Option(help=cli_help.teacher_help("lr"))] = None,
    max_length: Annotated[
        int | None, typer.Option(help=cli_help.teacher_help("max_length"))
    ] = None,
    warmup_ratio: Annotated[
        float | None, typer.Option(help=cli_help.teacher_help("warmup_ratio"))
    ] = None,
    grad_accumulation: Annotated[
        int | None, typer.Option(help=cli_help.teacher_help("grad_accumulation"))
    ] = None,
    patience: Annotated[int | None, typer.Option(help=cli_help.teacher_help("patience"))] = None,
    compile: Annotated[str | None, typer.Option(help="auto, on or off.")] = None,
    precision: Annotated[str | None, typer.Option(help="auto, bf16 or fp32.")] = None,
    seed: Annotated[int | None, typer.Option(help=cli_help.teacher_help("seed"))] = None,
    max_steps: Annotated[int | None, typer.Option(help=cli_help.teacher_help("max_steps"))] = None,
) -> None:
    """Queue fine-tuning a teacher on a head's labels (then soft labels and students)."""
    from sqlheads.sidecar.requests import request_teacher as request

    students = [] if no_students else student
    _run(
        lambda: request(
            _store(),
            head=head,
            set_name=set_name,
            labels=labels,
            source=source,
            model=model,
            students=students,
            student_model=student_model,
            deploy=deploy,
            epochs=epochs,
            batch_size=batch_size,
            lr=lr,
            max_length=max_length,
            warmup_ratio=warmup_ratio,
            grad_accumulation=grad_accumulation,
            patience=patience,
            compile=compile,
            precision=precision,
            seed=seed,
            max_steps=max_steps,
        ),
        "request-teacher",
    )


@app.command()
def jobs(
    state: Annotated[
        str | None, typer.Option(help="queued, running, done, failed or cancelled.")
    ] = None,
    kind: Annotated[str | None, typer.Option(help="teacher or embed.")] = None,
) -> None:
    """List the sidecar's jobs, newest first (the heads.jobs view)."""
    from sqlheads.sidecar.requests import jobs as listing

    def render(result: dict[str, Any]) -> None:
        out = Console()
        out.print(cli_tables.fitted_table("jobs", cli_tables.JOBS, result["jobs"], out.width))

    _run(lambda: listing(_store(), state=state, kind=kind), "jobs", render)


@app.command("cancel-job")
def cancel_job(job_id: Annotated[int, typer.Option("--job-id", help="The job to cancel.")]) -> None:
    """Cancel a queued job, or stop a running one at its sidecar's next heartbeat."""
    from sqlheads.sidecar.requests import cancel_job as cancel

    _run(lambda: cancel(_store(), job_id=job_id), "cancel-job")


@app.command()
def demo() -> None:
    """Rotten Tomatoes -> embed -> train -> predict -> views, on a local SQLite file."""
    from sqlheads.demo import run_demo

    url = options.url if options.url_given else "sqlite:///sqlheads-demo.db"

    def action() -> dict[str, Any]:
        with _progress("embedding Rotten Tomatoes") as progress:
            return run_demo(
                url,
                progress=progress,
                stage=progress.stage if progress else None,
                train_progress=progress.task("training rt_sentiment", "epochs")
                if progress
                else None,
            )

    _run(action, "demo: Rotten Tomatoes sentiment")


@app.command("load-sample")
def load_sample(
    teacher: Annotated[
        str, typer.Option(help="Head whose predictions become the soft labels (the demo's).")
    ] = "rt_sentiment",
) -> None:
    """Create rt_labels, imdb_reviews and teacher_logits for the README's students example."""
    from sqlheads.sample import load_sample as load

    _run(lambda: load(_store(), teacher_head=teacher), "load-sample")


@app.command()
def report(
    head: Annotated[str, typer.Option(help="Head to report on.")],
    version: Annotated[int | None, typer.Option(help="Version (default: deployed).")] = None,
    out: Annotated[
        str | None, typer.Option(help="Directory for index.html and PNGs (default report-HEAD-vN).")
    ] = None,
) -> None:
    """Write an HTML page with plots for a version; store the plots' numbers (model_figures)."""
    from sqlheads.report import build_report

    _run(lambda: build_report(_store(), head, version=version, out_dir=out), "report")


@app.command()
def plot(
    what: Annotated[str, typer.Argument(help="versions, students (both need --head) or job.")],
    head: Annotated[str | None, typer.Option(help="The head (versions, students).")] = None,
    job_id: Annotated[int | None, typer.Option("--job-id", help="The job (job).")] = None,
    out: Annotated[str | None, typer.Option(help="The PNG (default WHAT-NAME.png).")] = None,
) -> None:
    """Draw a head's versions over time, its teacher and students, or a job's progress."""
    from sqlheads.plots import plot_figure

    _run(lambda: plot_figure(_store(), what, head=head, job_id=job_id, out=out), "plot")


if __name__ == "__main__":  # pragma: no cover
    app()
