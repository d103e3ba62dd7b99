"""The sidecar's verbs: run a sidecar, request its work, list and cancel jobs
(:mod:`sqlheads.sidecar.requests`, :mod:`sqlheads.sidecar.worker`)."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console

from sqlheads import host
from sqlheads.cli import help as cli_help
from sqlheads.cli import tables as cli_tables
from sqlheads.cli.app import app, console, open_store, run


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
    """Claim and run queued jobs (teacher fine-tuning, embed parts): the container's entrypoint.

    Exits with status 1 when a job it ran failed."""
    from sqlheads.sidecar.worker import Sidecar, SidecarOptions

    ran: list[dict[str, Any]] = []

    def action() -> dict[str, Any]:
        given = {
            "device": device,
            "once": once,
            "max_jobs": max_jobs,
            "poll_seconds": poll_seconds,
            "heartbeat_seconds": heartbeat_seconds,
            "stale_after_seconds": stale_after_seconds,
            "kinds": tuple(kind or ()),
        }
        chosen = SidecarOptions.from_flat(given, what="sidecar")
        summary = Sidecar(open_store(), chosen, console=console).run()
        ran.extend(summary["jobs"])
        return summary

    run(action, "sidecar")
    if any(job["state"] == "failed" for job in ran):  # schedulers and CI read the status
        raise typer.Exit(1)


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

    run(
        lambda: request(
            open_store(),
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
        typer.Option(
            help="encoder, word or tfidf (repeatable; default encoder and word); none: "
            "--no-students."
        ),
    ] = None,
    no_students: Annotated[
        bool,
        typer.Option(
            "--no-students",
            help="Fine-tune the teacher and store its soft labels, distil no student.",
        ),
    ] = False,
    student_model: Annotated[
        str | None, typer.Option(help=cli_help.teacher_help("student_model"))
    ] = None,
    student_layers: Annotated[
        int | None, typer.Option(help=cli_help.teacher_help("student_layers"))
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
    transfer_rows: Annotated[
        int | None, typer.Option(help=cli_help.teacher_help("transfer_rows"))
    ] = None,
) -> None:
    """Queue fine-tuning a teacher on a head's labels (then soft labels and students)."""
    from sqlheads.sidecar.requests import request_teacher as request

    students = [] if no_students else student
    run(
        lambda: request(
            open_store(),
            head=head,
            set_name=set_name,
            labels=labels,
            source=source,
            model=model,
            students=students,
            student_model=student_model,
            student_layers=student_layers,
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
            transfer_rows=transfer_rows,
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
        wanted = " ".join(f"--{k} {v}" for k, v in (("state", state), ("kind", kind)) if v)
        empty = f"no jobs{' match ' + wanted if wanted else ' yet'}"
        jobs_table = cli_tables.fitted_table(
            "jobs", cli_tables.JOBS, result["jobs"], out.width, empty
        )
        out.print(jobs_table)

    run(lambda: listing(open_store(must_exist=True), state=state, kind=kind), "jobs", render)


@app.command("cancel-job")
def cancel_job(job_id: Annotated[int, typer.Option("--job-id", help="The job to cancel.")]) -> None:
    """Cancel a queued job, or stop a running one at its sidecar's next heartbeat."""
    from sqlheads.sidecar.requests import cancel_job as cancel

    run(lambda: cancel(open_store(), job_id=job_id), "cancel-job")
