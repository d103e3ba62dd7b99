"""The one schema definition: every table and view of sqlheads.

Alembic migrations are generated from this metadata and reviewed; SQL Server gets the same
tables in the ``heads`` schema (the migration passes ``schema=SCHEMA`` there), SQLite gets them
unqualified. Types are chosen so that SQL Server's dialect emits VARBINARY(MAX) and NVARCHAR(MAX)
(with ``deprecate_large_types=True``), never IMAGE or NTEXT.
"""

from __future__ import annotations

from sqlalchemy import (
    CheckConstraint,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Unicode,
    UnicodeText,
    UniqueConstraint,
    case,
    func,
    or_,
    select,
    text,
)

# SQL Server schema that holds every sqlheads object; SQLite has no schemas.
SCHEMA = "heads"

# Named constraints so that migrations can drop and alter them on SQL Server by name.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# 450 characters keeps a key inside SQL Server's 900-byte index key limit as NVARCHAR.
KEY_LENGTH = 450
NAME_LENGTH = 128  # sysname
SID_LENGTH = 85  # a security identifier: USER_SID() is varbinary(85)

metadata = MetaData(naming_convention=NAMING_CONVENTION)


def _created_at() -> Column:
    return Column("created_at", DateTime(timezone=False), nullable=False, server_default=func.now())


encoders = Table(
    "encoders",
    metadata,
    Column("encoder_id", Integer, primary_key=True, autoincrement=True),
    Column("name", Unicode(NAME_LENGTH), nullable=False),
    Column("sha256", String(64), nullable=False),
    Column("onnx", LargeBinary, nullable=False),
    Column("tokenizer_json", UnicodeText, nullable=False),
    Column("dim", Integer, nullable=False),
    Column("max_length", Integer, nullable=False),
    Column("quantization", String(16), nullable=False),
    Column("source", Unicode(400), nullable=False),
    Column("parity_cosine", Float, nullable=False),
    _created_at(),
    UniqueConstraint("name"),
    UniqueConstraint("sha256"),
    CheckConstraint("dim > 0", name="dim_positive"),
)

embedding_sets = Table(
    "embedding_sets",
    metadata,
    Column("set_id", Integer, primary_key=True, autoincrement=True),
    Column("name", Unicode(NAME_LENGTH), nullable=False),
    Column("encoder_id", Integer, ForeignKey("encoders.encoder_id"), nullable=False),
    Column("long_text", String(16), nullable=False),
    _created_at(),
    # The last source query embedded into the set: text models (word students) read the rows'
    # text through it when a call names no source of its own, and its author (the database
    # user; the OS user on SQLite), for whom alone it runs: a stored query run with another
    # user's rights would be a privilege escalation (migration 0007; NULL before it: no one).
    Column("source_query", UnicodeText, nullable=True),
    Column("source_user", Unicode(NAME_LENGTH), nullable=True),
    # On SQL Server the author by security identifier (USER_SID(), migration 0008): a user
    # dropped and made again under the same name has another SID, and inherits nothing.
    Column("source_sid", LargeBinary(SID_LENGTH), nullable=True),
    # Who owns the set, and alone (or heads_admin) writes its vectors: the user who made it
    # (SQL Server: SID and name; SQLite: the OS user), migration 0008. NULL for a set made
    # before it whose author was not known: the next user to write into it takes it.
    Column("owner_user", Unicode(NAME_LENGTH), nullable=True),
    Column("owner_sid", LargeBinary(SID_LENGTH), nullable=True),
    UniqueConstraint("name"),
    CheckConstraint("long_text IN ('window', 'truncate')", name="long_text_mode"),
)

embeddings = Table(
    "embeddings",
    metadata,
    Column(
        "set_id", Integer, ForeignKey("embedding_sets.set_id", ondelete="CASCADE"), nullable=False
    ),
    Column("item_key", Unicode(KEY_LENGTH), nullable=False),
    Column("text_sha256", String(64), nullable=False),
    # Little-endian float32, dim * 4 bytes: see store.vectors.
    Column("vector", LargeBinary, nullable=False),
    Column("windows", Integer, nullable=False),
    Column("embedded_at", DateTime(timezone=False), nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("set_id", "item_key"),
)

rejects = Table(
    "rejects",
    metadata,
    Column(
        "set_id", Integer, ForeignKey("embedding_sets.set_id", ondelete="CASCADE"), nullable=False
    ),
    Column("item_key", Unicode(KEY_LENGTH), nullable=False),
    Column("reason", Unicode(400), nullable=False),
    Column("rejected_at", DateTime(timezone=False), nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("set_id", "item_key"),
)

# A teacher is a named source of soft labels for one set: a caller's query stored by
# ``distill --soft-labels``, or (later) a fine-tuned model of the GPU sidecar (``model_id``).
teachers = Table(
    "teachers",
    metadata,
    Column("teacher_id", Integer, primary_key=True, autoincrement=True),
    Column("name", Unicode(NAME_LENGTH), nullable=False),
    Column("set_id", Integer, ForeignKey("embedding_sets.set_id"), nullable=False),
    Column("classes_json", UnicodeText, nullable=False),
    _created_at(),
    # The fine-tuned model (kind ``teacher``) whose predictions these soft labels are; NULL for
    # soft labels a caller's query supplied. A plain column, not a foreign key: ``models`` names
    # ``teachers`` already, and a cycle would stop either table being dropped (migration 0005).
    Column("model_id", Integer, nullable=True),
    UniqueConstraint("name"),
)

# One logit per class of the teacher, as little-endian float32 bytes in its classes' order.
soft_labels = Table(
    "soft_labels",
    metadata,
    Column(
        "teacher_id", Integer, ForeignKey("teachers.teacher_id", ondelete="CASCADE"), nullable=False
    ),
    Column("item_key", Unicode(KEY_LENGTH), nullable=False),
    Column("logits", LargeBinary, nullable=False),
    PrimaryKeyConstraint("teacher_id", "item_key"),
)

models = Table(
    "models",
    metadata,
    Column("model_id", Integer, primary_key=True, autoincrement=True),
    Column("head", Unicode(NAME_LENGTH), nullable=False),
    Column("version", Integer, nullable=False),
    Column("kind", String(32), nullable=False),
    Column("set_id", Integer, ForeignKey("embedding_sets.set_id"), nullable=False),
    Column("encoder_id", Integer, ForeignKey("encoders.encoder_id"), nullable=False),
    Column("classes_json", UnicodeText, nullable=False),
    Column("params_json", UnicodeText, nullable=False),
    Column("metrics_json", UnicodeText, nullable=False),
    Column("loss_curve_json", UnicodeText, nullable=False),
    Column("accuracy", Float, nullable=False),
    Column("macro_f1", Float, nullable=False),
    Column("rows_train", Integer, nullable=False),
    Column("rows_test", Integer, nullable=False),
    Column("seconds", Float, nullable=False),
    Column("blob", LargeBinary, nullable=False),
    Column("sha256", String(64), nullable=False),
    Column("onnx", LargeBinary, nullable=True),
    _created_at(),
    # Students: trainable numbers, the teacher whose soft labels they learnt, and that
    # teacher's accuracy on the same held-out rows (NULL for models trained on gold labels).
    Column("parameters", Integer, nullable=True),
    Column("teacher_id", Integer, ForeignKey("teachers.teacher_id"), nullable=True),
    Column("teacher_accuracy", Float, nullable=True),
    # TF-IDF + logistic regression on the same training and held-out rows, the bar a version
    # must clear to be worth its cost, or why it was not fitted (no text reachable, one class).
    Column("baseline_accuracy", Float, nullable=True),
    Column("baseline_macro_f1", Float, nullable=True),
    Column("baseline_seconds", Float, nullable=True),
    Column("baseline_skipped", Unicode(400), nullable=True),
    UniqueConstraint("head", "version"),
)

# Transfer rows a teacher version labelled for distillation (engine.students.transfer): made
# once per teacher version and recipe (whose key also hashes the rows they were made from) and
# reused by every later student, whatever count it asks (a smaller count reads the first rows);
# dropping the teacher's head drops them with its versions.
transfer_sets = Table(
    "transfer_sets",
    metadata,
    Column("transfer_set_id", Integer, primary_key=True, autoincrement=True),
    Column("model_id", Integer, ForeignKey("models.model_id", ondelete="CASCADE"), nullable=False),
    Column("recipe_key", String(64), nullable=False),
    Column("recipe_json", UnicodeText, nullable=False),
    Column("classes_json", UnicodeText, nullable=False),
    # how many rows the recipe can make from its rows at most, once a build ran short of the
    # count asked; NULL while every count asked was made in full
    Column("rows_max", Integer, nullable=True),
    _created_at(),
    UniqueConstraint("model_id", "recipe_key"),
)

# One row of a transfer set with the teacher's logits (float32 bytes in its classes' order);
# written in chunks as the teacher scores them, so an interrupted run resumes.
transfer_rows = Table(
    "transfer_rows",
    metadata,
    Column(
        "transfer_set_id",
        Integer,
        ForeignKey("transfer_sets.transfer_set_id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("ordinal", Integer, nullable=False),
    Column("origin_key", Unicode(KEY_LENGTH), nullable=False),
    Column("how", String(16), nullable=False),
    Column("text", UnicodeText, nullable=False),
    Column("logits", LargeBinary, nullable=False),
    # the teacher encoder's vector of the row (float16 bytes, revision 0009): what an encoder
    # student's feature loss learns; NULL where the teacher reads text (no encoder of its own)
    # or the row was scored before that revision
    Column("vector", LargeBinary, nullable=True),
    PrimaryKeyConstraint("transfer_set_id", "ordinal"),
)

# Every deployment is a row; the newest row of a head is what is deployed, so a rollback is just
# another row and the history stays readable.
deployments = Table(
    "deployments",
    metadata,
    Column("deployment_id", Integer, primary_key=True, autoincrement=True),
    Column("head", Unicode(NAME_LENGTH), nullable=False),
    Column("model_id", Integer, ForeignKey("models.model_id"), nullable=False),
    Column("reason", Unicode(200), nullable=False),
    Column("deployed_at", DateTime(timezone=False), nullable=False, server_default=func.now()),
)

predictions = Table(
    "predictions",
    metadata,
    Column("model_id", Integer, ForeignKey("models.model_id", ondelete="CASCADE"), nullable=False),
    Column("set_id", Integer, ForeignKey("embedding_sets.set_id"), nullable=False),
    Column("item_key", Unicode(KEY_LENGTH), nullable=False),
    Column("label", Unicode(400), nullable=False),
    Column("score", Float, nullable=False),
    Column("probabilities_json", UnicodeText, nullable=False),
    Column("predicted_at", DateTime(timezone=False), nullable=False, server_default=func.now()),
    PrimaryKeyConstraint("model_id", "set_id", "item_key"),
    # drop_set deletes a set's predictions by set_id, which the key does not lead with
    # (migration 0003).
    Index(None, "set_id"),
)

# The numbers behind the report's plots, one row a point, so that a BI tool can draw them too:
# figure 'confusion_matrix' (series = true class, x = predicted class, value = count),
# 'per_class' (series = precision|recall|f1, x = class), 'loss_curve' (x = epoch),
# 'score_histogram' (series = predicted label, x = bin's lower edge, value = count).
model_figures = Table(
    "model_figures",
    metadata,
    # A surrogate key: series and x are as long as a class label (400), and a key over them
    # would pass SQL Server's 900-byte index limit. The report replaces a model's rows whole.
    Column("point_id", Integer, primary_key=True, autoincrement=True),
    Column("model_id", Integer, ForeignKey("models.model_id", ondelete="CASCADE"), nullable=False),
    Column("figure", Unicode(64), nullable=False),
    Column("series", Unicode(400), nullable=False),
    Column("x", Unicode(400), nullable=False),
    Column("value", Float, nullable=False),
    Index(None, "model_id", "figure"),
)


# The keys whose gold labels a version learnt from or was scored on (its training and held-out
# rows), in the set it was trained on: the label queue and drift leave them out, as rows a
# person has labelled already. Versions trained before revision 0007 have none recorded.
labelled_keys = Table(
    "labelled_keys",
    metadata,
    Column("model_id", Integer, ForeignKey("models.model_id", ondelete="CASCADE"), nullable=False),
    Column("item_key", Unicode(KEY_LENGTH), nullable=False),
    PrimaryKeyConstraint("model_id", "item_key"),
)


# Work for the sidecar (teacher fine-tuning, GPU embedding): requested by analysts, claimed by
# sidecars. The table is ``job_queue``; ``jobs`` is the view analysts read (SSMS, BI tools).
JOB_KINDS = ("teacher", "embed")
JOB_STATES = ("queued", "running", "done", "failed", "cancelled")

job_queue = Table(
    "job_queue",
    metadata,
    Column("job_id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(16), nullable=False),
    Column("state", String(16), nullable=False, server_default="queued"),
    Column("head", Unicode(NAME_LENGTH), nullable=True),  # teacher jobs: the head it trains
    Column("set_name", Unicode(NAME_LENGTH), nullable=False),
    # Everything the job needs, the caller's queries included: the sidecar reads text and
    # labels through them, never through a query of its own making.
    Column("parameters_json", UnicodeText, nullable=False),
    # A big embed request is split into parts by key range, so that N sidecars share a table;
    # parts of one request share group_id (the first part's job_id).
    Column("group_id", Integer, nullable=True),
    Column("part", Integer, nullable=False, server_default=text("1")),
    Column("parts", Integer, nullable=False, server_default=text("1")),
    Column("key_from", Unicode(KEY_LENGTH), nullable=True),  # inclusive; NULL: from the first
    Column("key_to", Unicode(KEY_LENGTH), nullable=True),  # exclusive; NULL: to the last
    Column("attempts", Integer, nullable=False, server_default=text("0")),
    Column("max_attempts", Integer, nullable=False, server_default=text("3")),
    Column("claimed_by", Unicode(200), nullable=True),  # host:pid of the sidecar
    Column("heartbeat_at", DateTime(timezone=False), nullable=True),
    Column("cancel_requested", Integer, nullable=False, server_default=text("0")),
    Column("stage", Unicode(200), nullable=True),
    Column("progress_done", Integer, nullable=True),
    Column("progress_total", Integer, nullable=True),
    Column("result_json", UnicodeText, nullable=True),
    Column("error_number", Integer, nullable=True),
    Column("error", UnicodeText, nullable=True),
    Column("requested_at", DateTime(timezone=False), nullable=False, server_default=func.now()),
    Column("started_at", DateTime(timezone=False), nullable=True),
    Column("finished_at", DateTime(timezone=False), nullable=True),
    # Who asked, so that only they (or heads_admin) may cancel: the login (ORIGINAL_LOGIN())
    # and the database user on SQL Server, the OS user on SQLite. heads.jobs shows each caller
    # their own jobs.
    Column("requested_by", Unicode(NAME_LENGTH), nullable=True),
    Column("requested_user", Unicode(NAME_LENGTH), nullable=True),
    # SQL Server: the requester's USER_SID() (migration 0008), which heads.jobs, heads.cancel_job
    # and the set an embed job writes compare, never the name.
    Column("requested_sid", LargeBinary(SID_LENGTH), nullable=True),
    CheckConstraint(f"kind IN {JOB_KINDS}", name="job_kind"),
    CheckConstraint(f"state IN {JOB_STATES}", name="job_state"),
    CheckConstraint("cancel_requested IN (0, 1)", name="cancel_flag"),
    # Claims scan queued and running jobs in job order.
    Index(None, "state", "job_id"),
)


# A job's inputs, captured when it was requested, under the requester's own permissions: the
# rows of the caller's queries (key, label, text). The sidecar reads these and never runs a
# caller's query, which would run with the sidecar's rights. A key may appear twice (an embed
# source's duplicates are rejected by the embed job, as `sqlheads embed` rejects them), hence
# the row id.
job_inputs = Table(
    "job_inputs",
    metadata,
    Column("input_id", Integer, primary_key=True, autoincrement=True),
    Column("job_id", Integer, ForeignKey("job_queue.job_id", ondelete="CASCADE"), nullable=False),
    Column("item_key", Unicode(KEY_LENGTH), nullable=False),
    Column("label", Unicode(400), nullable=True),  # teacher jobs: NULL for unlabelled rows
    Column("text", UnicodeText, nullable=True),
    Index(None, "job_id", "item_key"),
)


# SQLite declares a view column's type only when the column is a table's column, never for an
# expression: model_summary's 0/1 flags (is_deployed, below_baseline) are read from this
# two-row table, so that a BI tool reading declared types sees INTEGER where it saw NULL.
bit_values = Table(
    "bit_values",
    metadata,
    Column("bit", Integer, primary_key=True, autoincrement=False),
    CheckConstraint("bit IN (0, 1)", name="zero_or_one"),
)
BITS = (0, 1)  # its rows, written by the migration that creates it


def current_deployments():
    """The newest deployment row of each head."""
    newest = (
        select(deployments.c.head, func.max(deployments.c.deployment_id).label("deployment_id"))
        .group_by(deployments.c.head)
        .subquery("newest")
    )
    return (
        select(deployments.c.head, deployments.c.model_id, deployments.c.deployed_at)
        .join(newest, newest.c.deployment_id == deployments.c.deployment_id)
        .subquery("current_deployments")
    )


def _last_deployments():
    """Each version's newest deployment: the later, the more it stands for its head."""
    return (
        select(
            deployments.c.model_id,
            deployments.c.head,
            func.max(deployments.c.deployment_id).label("deployment_id"),
        )
        .group_by(deployments.c.model_id, deployments.c.head)
        .subquery("shown")
    )


def latest_predictions_select():
    """Each row's prediction by the most recently deployed version of its head that has one:
    the deployed version's, or where a deploy could not re-score a set (a text model whose
    set has no known source), the version it replaced, until predict runs. What a BI tool
    reads. The deployed version's rows are shown without a look further (nothing is newer);
    an earlier version's row only where no later deployed version has the key (a primary key
    look-up per version)."""
    shown = _last_deployments()
    newest = (
        select(deployments.c.head, func.max(deployments.c.deployment_id).label("deployment_id"))
        .group_by(deployments.c.head)
        .subquery("newest")
    )
    later = deployments.alias("later")
    newer_predictions = predictions.alias("newer_predictions")
    superseded = (
        select(newer_predictions.c.model_id)
        .where(
            newer_predictions.c.model_id.in_(
                select(later.c.model_id)
                .where(later.c.head == shown.c.head, later.c.deployment_id > shown.c.deployment_id)
                .correlate_except(later)
            ),
            newer_predictions.c.set_id == predictions.c.set_id,
            newer_predictions.c.item_key == predictions.c.item_key,
        )
        .exists()
    )
    return (
        select(
            models.c.head,
            models.c.version,
            predictions.c.model_id,
            embedding_sets.c.name.label("set_name"),
            predictions.c.item_key,
            predictions.c.label,
            predictions.c.score,
            predictions.c.probabilities_json,
            predictions.c.predicted_at,
        )
        .select_from(predictions)
        .join(shown, shown.c.model_id == predictions.c.model_id)
        .join(newest, newest.c.head == shown.c.head)
        .join(models, models.c.model_id == predictions.c.model_id)
        .join(embedding_sets, embedding_sets.c.set_id == predictions.c.set_id)
        .where(or_(shown.c.deployment_id == newest.c.deployment_id, ~superseded))
    )


def model_summary_select():
    """Every version of every head with its metrics and whether it is deployed."""
    current = current_deployments()
    deployed_bit, below_bit = bit_values.alias("deployed_bit"), bit_values.alias("below_bit")
    # CASE, not a bare predicate: SQL Server has no boolean-valued expressions.
    is_deployed = case((current.c.model_id.is_not(None), 1), else_=0)
    is_below = case((models.c.accuracy < models.c.baseline_accuracy, 1), else_=0)
    return (
        select(
            models.c.head,
            models.c.version,
            models.c.model_id,
            models.c.kind,
            embedding_sets.c.name.label("set_name"),
            encoders.c.name.label("encoder_name"),
            models.c.accuracy,
            models.c.macro_f1,
            models.c.rows_train,
            models.c.rows_test,
            models.c.seconds,
            models.c.created_at,
            deployed_bit.c.bit.label("is_deployed"),
            models.c.parameters,
            teachers.c.name.label("teacher"),
            models.c.teacher_accuracy,
            models.c.baseline_accuracy,
            models.c.baseline_macro_f1,
            models.c.baseline_seconds,
            models.c.baseline_skipped,
            below_bit.c.bit.label("below_baseline"),
        )
        .select_from(models)
        .join(embedding_sets, embedding_sets.c.set_id == models.c.set_id)
        .join(encoders, encoders.c.encoder_id == models.c.encoder_id)
        .outerjoin(teachers, teachers.c.teacher_id == models.c.teacher_id)
        .outerjoin(current, current.c.model_id == models.c.model_id)
        .join(deployed_bit, deployed_bit.c.bit == is_deployed)
        .join(below_bit, below_bit.c.bit == is_below)
    )


def report_figures_select():
    """The report's numbers with the head and version they belong to (for BI tools)."""
    return (
        select(
            models.c.head,
            models.c.version,
            model_figures.c.model_id,
            model_figures.c.figure,
            model_figures.c.series,
            model_figures.c.x,
            model_figures.c.value,
        )
        .select_from(model_figures)
        .join(models, models.c.model_id == model_figures.c.model_id)
    )


def jobs_select():
    """The sidecar's queue as analysts read it (SSMS: ``SELECT * FROM heads.jobs``)."""
    q = job_queue.c
    return select(
        q.job_id,
        q.kind,
        q.state,
        q.head,
        q.set_name,
        q.group_id,
        q.part,
        q.parts,
        q.key_from,
        q.key_to,
        q.attempts,
        q.max_attempts,
        q.claimed_by,
        q.heartbeat_at,
        q.cancel_requested,
        q.stage,
        q.progress_done,
        q.progress_total,
        q.error_number,
        q.error,
        q.result_json,
        q.parameters_json,
        q.requested_at,
        q.started_at,
        q.finished_at,
        q.requested_by,
        q.requested_user,
    ).select_from(job_queue)


VIEWS = {
    "jobs": jobs_select,
    "latest_predictions": latest_predictions_select,
    "model_summary": model_summary_select,
    "report_figures": report_figures_select,
}
