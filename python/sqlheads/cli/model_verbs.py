"""The model verbs: train, distill, predict, deploy, roll-back, models, drop-head, report."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.console import Console

from sqlheads import host, settings
from sqlheads.cli import tables as cli_tables
from sqlheads.cli.app import LockTimeout, app, open_store, options, run
from sqlheads.cli.interrupts import Heard, NewVersion, so_far, were
from sqlheads.cli.render import showing_progress
from sqlheads.engine.constraints import about
from sqlheads.engine.heads import FAST_FROM_ROWS, HeadParams
from sqlheads.engine.kinds import DEFAULT_STUDENT, KINDS, STUDENTS, student_kind
from sqlheads.engine.students.distillation import DistillParams
from sqlheads.engine.students.encoder import EncoderStudentParams
from sqlheads.engine.students.word.architectures import NAMES
from sqlheads.engine.students.word.student import DEFAULT_ARCH
from sqlheads.host import LOCK_TIMEOUT_MS


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
            help=f"auto: fast from {FAST_FROM_ROWS:,} training rows on, full below; fast "
            "(early stopping) or full (Adam amsgrad, linear decay)."
        ),
    ] = HeadParams.recipe,
    epochs: Annotated[int, typer.Option(help="At most (fast) or exactly (full).")] = (
        HeadParams.epochs
    ),
    lr: Annotated[float, typer.Option(help="Adam learning rate.")] = HeadParams.lr,
    weight_decay: Annotated[float, typer.Option()] = HeadParams.weight_decay,
    batch_size: Annotated[
        int | None,
        typer.Option(help="Rows per step (fast 512; full 64, or rows/100 if larger)."),
    ] = HeadParams.batch_size,
    dropout: Annotated[float, typer.Option()] = HeadParams.dropout,
    test_fraction: Annotated[
        float, typer.Option(help="Held-out share, stratified.")
    ] = settings.TEST_FRACTION,
    seed: Annotated[
        int, typer.Option(help="Fixes the split and the initialisation.")
    ] = HeadParams.seed,
    deploy: Annotated[
        str, typer.Option(help="if-better, always or never.")
    ] = settings.DEFAULT_DEPLOY,
    encoder: Annotated[
        str | None, typer.Option(help="Refuse unless the set uses this encoder.")
    ] = None,
    lock_timeout_ms: LockTimeout = LOCK_TIMEOUT_MS,
    source: Annotated[
        str | None,
        typer.Option(help="TF-IDF baseline: SELECT item_key, text (default: the set's source)."),
    ] = None,
    allow_encoder_change: Annotated[
        bool,
        typer.Option(
            "--allow-encoder-change",
            help="Accept a set whose encoder differs from the head's earlier versions'.",
        ),
    ] = False,
) -> None:
    """Train a new version of a head on stored vectors, with metrics on a held-out split."""
    heard, version = Heard(), NewVersion(options.url, head)

    def action() -> dict[str, Any]:
        with showing_progress(f"training {head}", unit="epochs") as display:
            # the door: host.train builds and checks TrainParams from these, before any work
            return host.train(
                version.note(open_store()),
                head=head,
                set_name=set_name,
                labels=labels,
                source=source,
                progress=heard.showing(display),
                recipe=recipe,
                hidden=hidden,
                epochs=epochs,
                lr=lr,
                weight_decay=weight_decay,
                batch_size=batch_size,
                dropout=dropout,
                seed=seed,
                test_fraction=test_fraction,
                deploy=deploy,
                lock_timeout_ms=lock_timeout_ms,
                encoder=encoder,
                allow_encoder_change=allow_encoder_change,
            )

    def kept() -> str:
        epochs = heard.of()
        after = "before training began" if epochs is None else f"after {so_far(epochs, 'epochs')}"
        return f"interrupted {after}: {version.said()}"

    run(action, "train", kept=kept)


TeacherHeadOption = Annotated[
    str | None,
    typer.Option(
        help="A head whose deployed version scores the rows and the transfer rows (e.g. a "
        "frozen all-mpnet-base-v2 head: no GPU needed)."
    ),
]
TRANSFER_DEFAULTS = ", ".join(
    f"{student} {KINDS[kind].transfer_rows:,}"
    for student, kind in STUDENTS.items()
    if KINDS[kind].reads == "text"
)
TransferRowsOption = Annotated[
    int | None,
    typer.Option(
        help="With --teacher-head: transfer rows the teacher labels (each student's measured "
        f"default: {TRANSFER_DEFAULTS}; cached for the next student)."
    ),
]
ArchOption = Annotated[
    str | None,
    typer.Option(help=f"Word student: {', '.join(NAMES)} ({DEFAULT_ARCH})."),
]
StudentModelOption = Annotated[
    str | None,
    typer.Option(
        help=f"Encoder student: catalogue model or HF directory ({EncoderStudentParams.model})."
    ),
]
MaxLengthOption = Annotated[
    int | None,
    typer.Option(help=f"Encoder student: tokens per text ({EncoderStudentParams.max_length})."),
]
MaxStepsOption = Annotated[
    int | None, typer.Option(help="Encoder student: stop after this many steps.")
]
DeviceOption = Annotated[
    str | None,
    typer.Option(
        help=f"Encoder student: auto, cpu, cuda or cuda:N ({EncoderStudentParams.device})."
    ),
]
LayersOption = Annotated[int | None, typer.Option(help=about(EncoderStudentParams, "layers")[0])]
FeatureWeightOption = Annotated[
    float | None, typer.Option(help=about(EncoderStudentParams, "feature_weight")[0])
]


StudentOption = Annotated[
    str,
    typer.Option(
        help="word (raw text, no encoder at scoring), head (stored vectors), encoder "
        "(MiniLM fine-tuned on the soft labels, int8 ONNX on raw text) or tfidf (TF-IDF "
        "of the whole text: long texts)."
    ),
]
SoftLabelsOption = Annotated[
    str | None,
    typer.Option(help="SELECT returning item_key and one logit column per class (by name)."),
]
TeacherOption = Annotated[
    str | None,
    typer.Option(help="Name the soft labels are stored under, or reused from (HEAD_teacher)."),
]


@app.command()
def distill(
    head: Annotated[str, typer.Option(help="Head to add a student version to.")],
    set_name: Annotated[str, typer.Option("--set", help="Embedding set the rows belong to.")],
    labels: Annotated[str, typer.Option(help="SELECT returning item_key and label (gold).")],
    student: StudentOption = DEFAULT_STUDENT,
    soft_labels: SoftLabelsOption = None,
    teacher: TeacherOption = None,
    teacher_head: TeacherHeadOption = None,
    transfer_rows: TransferRowsOption = None,
    arch: ArchOption = None,
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
        float | None,
        typer.Option(
            help="Weight of cross-entropy on gold labels (0: KL only). Default: the student "
            "kind's (encoder 0.5, the others 0)."
        ),
    ] = None,
    epochs: Annotated[int | None, typer.Option(help="Default: the student kind's.")] = None,
    lr: Annotated[float | None, typer.Option(help="Default: the student kind's.")] = None,
    batch_size: Annotated[int, typer.Option()] = DistillParams.batch_size,
    test_fraction: Annotated[
        float, typer.Option(help="Held-out share, as train's.")
    ] = settings.TEST_FRACTION,
    seed: Annotated[int, typer.Option(help="Fixes the split, as train's.")] = DistillParams.seed,
    deploy: Annotated[
        str, typer.Option(help="if-better, always or never.")
    ] = settings.DEFAULT_DEPLOY,
    student_model: StudentModelOption = None,
    max_length: MaxLengthOption = None,
    max_steps: MaxStepsOption = None,
    layers: LayersOption = None,
    feature_weight: FeatureWeightOption = None,
    device: DeviceOption = None,
) -> None:
    """Distil a teacher's soft labels into a student version of a head."""
    heard, version = Heard(), NewVersion(options.url, head)
    teacher_heard = Heard()

    def action() -> dict[str, Any]:
        nonlocal teacher_heard
        unit = student_kind(student).progress_unit  # an unknown student: its 50022 here
        with showing_progress(f"distilling {head}", unit=unit) as display:
            progress = heard.showing(display)
            if teacher_head is not None:
                teacher_heard = progress.task(f"teacher {teacher_head} scoring", "rows")
            # the door: host.distill builds and checks the student's, the teacher's and the
            # distillation's parameters from these, before a teacher scores a row
            return host.distill(
                version.note(open_store()),
                head=head,
                set_name=set_name,
                progress=progress,
                teacher_progress=teacher_heard if teacher_head is not None else None,
                labels=labels,
                source=source,
                transfer=transfer,
                soft_labels=soft_labels,
                teacher=teacher,
                teacher_head=teacher_head,
                transfer_rows=transfer_rows,
                student=student,
                arch=arch,
                student_model=student_model,
                max_length=max_length,
                max_steps=max_steps,
                layers=layers,
                feature_weight=feature_weight,
                device=device,
                temperature=temperature,
                gold_weight=gold_weight,
                epochs=epochs,
                lr=lr,
                batch_size=batch_size,
                seed=seed,
                test_fraction=test_fraction,
                deploy=deploy,
            )

    def kept() -> str:
        return _distill_kept(heard, teacher_heard, version, student, teacher_head)

    run(action, "distill", kept=kept)


def _distill_kept(
    heard: Heard, teacher_heard: Heard, version: NewVersion, student: str, teacher_head: str | None
) -> str:
    """What an interrupted distill kept: no version unless it was written, and a teacher
    head's transfer rows scored so far (cached in chunks as they are scored)."""
    steps = heard.of()
    if steps is not None:
        where = f"after {so_far(steps, student_kind(student).progress_unit)}"
    elif teacher_heard.stage is not None:
        scored = teacher_heard.of() or (0, None)
        where = f"while the teacher scored ({teacher_heard.stage}: {so_far(scored, 'rows')})"
    else:
        where = "before the student began"
    cache = (
        ""
        if teacher_head is None
        else "; the transfer rows the teacher scored stay cached (they commit in chunks), and "
        "a run again scores only the rest"
    )
    return f"interrupted {where}: {version.said()}{cache}"


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

    heard = Heard()

    def action() -> dict[str, Any]:
        with showing_progress(f"scoring {set_name}") as display:
            return host.predict(
                open_store(),
                head=head,
                set_name=set_name,
                version=version,
                keys=keys,
                source=source,
                progress=heard.showing(display),
            )

    def kept() -> str:
        return (
            f"interrupted: {were(heard.of(), 'rows')} scored and written to the "
            f"predictions of head {head} (each chunk commits on its own; the other rows keep "
            "the predictions they had); run the same command again to score them all"
        )

    run(action, "predict", kept=kept)


@app.command()
def deploy(
    head: Annotated[str, typer.Option(help="The head whose version to deploy.")],
    version: Annotated[int, typer.Option(help="Version to deploy.")],
    lock_timeout_ms: LockTimeout = LOCK_TIMEOUT_MS,
) -> None:
    """Deploy a version of a head (predict and latest_predictions use it)."""
    run(
        lambda: host.deploy(
            open_store(), head=head, version=version, lock_timeout_ms=lock_timeout_ms
        ),
        "deploy",
    )


@app.command("roll-back")
def roll_back(
    head: Annotated[str, typer.Option(help="The head to deploy the previous version of.")],
    lock_timeout_ms: LockTimeout = LOCK_TIMEOUT_MS,
) -> None:
    """Deploy again the version deployed before the current one (heads.roll_back)."""
    run(
        lambda: host.roll_back(open_store(), head=head, lock_timeout_ms=lock_timeout_ms),
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
        frame = host.models(open_store(must_exist=True), head=head)
        return {"models": json.loads(frame.to_json(orient="records", date_format="iso"))}

    def render(result: dict[str, Any]) -> None:
        out = Console()
        columns = cli_tables.MODELS_WIDE if wide else cli_tables.MODELS
        empty = "no versions yet: `sqlheads train` makes the first"
        table = cli_tables.fitted_table(
            "model_summary", columns, result["models"], out.width, empty
        )
        if not wide and any(record.get("below_baseline") for record in result["models"]):
            below = f"{cli_tables.BELOW_BASELINE.strip()} below its TF-IDF + LR baseline (--wide)"
            table.caption = below if table.caption is None else f"{below}; {table.caption}"
        out.print(table)

    run(action, "models", render)


@app.command("drop-head")
def drop_head(
    head: Annotated[str, typer.Option(help="The head to delete, with every version.")],
    lock_timeout_ms: LockTimeout = LOCK_TIMEOUT_MS,
) -> None:
    """Delete a head: its versions, deployments and predictions."""
    run(
        lambda: host.drop_head(open_store(), head=head, lock_timeout_ms=lock_timeout_ms),
        "drop-head",
    )


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

    run(lambda: build_report(open_store(), head, version=version, out_dir=out), "report")


@app.command()
def plot(
    what: Annotated[str, typer.Argument(help="versions, students (both need --head) or job.")],
    head: Annotated[str | None, typer.Option(help="The head (versions, students).")] = None,
    job_id: Annotated[int | None, typer.Option("--job-id", help="The job (job).")] = None,
    out: Annotated[str | None, typer.Option(help="The PNG (default WHAT-NAME.png).")] = None,
) -> None:
    """Draw a head's versions over time, its teacher and students, or a job's progress."""
    from sqlheads.plots import plot_figure

    run(lambda: plot_figure(open_store(), what, head=head, job_id=job_id, out=out), "plot")
