"""Every parameter's policy, decided once: its default, its choices or its bounds.

A parameter object's field takes its default, its choices or its bounds from :data:`SETTINGS`
(:func:`default`, :func:`option`, :func:`bounds`); on SQL Server the migrations copy it into
``heads.settings``, which the procedures read instead of restating a value. The deploy
policies, the reasons a deployment records and the verbs' shared defaults
(:data:`DEFAULT_DEPLOY`, :data:`TEST_FRACTION`) live here too, so that a default is written once.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlheads.engine import kinds
from sqlheads.engine.constraints import Interval, OneOf
from sqlheads.engine.encoders.onnx_encoder import LONG_TEXT_MODES
from sqlheads.engine.evaluation import TEST_FRACTION as TEST_FRACTION  # the verbs' default
from sqlheads.errors import InvalidParameterError

DEPLOY_POLICIES = ("if-better", "always", "never")
DEFAULT_DEPLOY = DEPLOY_POLICIES[0]
EMBED_ENGINES = ("auto", "onnx", "torch")
DEFAULT_ENCODER = "all-MiniLM-L6-v2-int8"
# Why a version was deployed: one row of deployments each, the same words on both hosts.
REASON_BY_HAND = "deployed by hand"
REASON_ROLL_BACK = "roll-back"


def deploy_reason(policy: str) -> str:
    """The reason recorded when ``train`` deploys the version it made under ``policy``."""
    return f"trained ({policy})"


@dataclass(frozen=True)
class Setting:
    """One parameter's policy: its default, its allowed values or its bounds.

    Decided here, once. The embedded host checks against it; on SQL Server the migrations
    copy :data:`SETTINGS` into ``heads.settings``, which the procedures read instead of
    restating a value (``heads.setting_choice``, ``heads.setting_int``).
    """

    default: str | int | None
    choices: tuple[str, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    about: str = ""  # what it decides, for the settings reference (docs/reference/settings.md)


SETTINGS: dict[str, Setting] = {
    "encoder": Setting(DEFAULT_ENCODER, about="The encoder of a new set when none is named."),
    "long_text": Setting(
        LONG_TEXT_MODES[0],
        choices=LONG_TEXT_MODES,
        about="A new set's treatment of texts past the encoder's max length: pooled windows "
        "or the first window only.",
    ),
    "deploy": Setting(
        DEFAULT_DEPLOY,
        choices=DEPLOY_POLICIES,
        about="Whether train and distill deploy the version they make.",
    ),
    # Measured on the 2-core build machine (docs/guides/dba.md, "A 10M-row table"): a fresh
    # Python costs ~0.65 s to import this module and ~0.55 s to load the cached encoder, against
    # ~6.3 s of encoding for 1000 short texts: 1000 rows keep ~16 % overhead and lose little to
    # a failure.
    "embed.batch_rows": Setting(
        1000,
        minimum=1,
        maximum=1_000_000,
        about="Rows per committed batch of embed (on SQL Server: one Python call each).",
    ),
    "embed.batch_size": Setting(
        32, minimum=1, maximum=4096, about="Texts per encoder call inside a batch."
    ),
    # SQL Server's predict batches (the embedded host reads its chunks without a process start):
    # ~0.43 s of start-up against ~0.18 s of scoring for 10,000 rows, ~1.1 s for 100,000.
    "predict.batch_rows": Setting(
        100_000, minimum=1, maximum=1_000_000, about="Rows per batch of heads.predict."
    ),
    # A teacher's blob is ~438 MB (MPNet), a head's far smaller (compute/model_cache.py).
    "predict.model_cache_bytes": Setting(
        1 << 30,
        minimum=0,
        maximum=1 << 40,
        about="Blob bytes of the models predict keeps loaded between chunks, least recently "
        "used dropped first; the model used last always stays.",
    ),
    "drop_set.batch_rows": Setting(
        50_000, minimum=1, maximum=1_000_000, about="Rows deleted per batch of heads.drop_set."
    ),
    "lock_timeout_ms": Setting(
        600_000,
        minimum=0,
        maximum=86_400_000,
        about="How long a verb waits for another session's lock on its set or head (then 50016).",
    ),
    "reason.by_hand": Setting(
        REASON_BY_HAND, about="The reason a deployment made by deploy records."
    ),
    "teacher.suffix": Setting(
        "_teacher", about="Soft labels given as a query are stored as teacher HEAD + this."
    ),
    "predict.text_kinds": Setting(
        ",".join(name for name, kind in kinds.KINDS.items() if kind.reads == "text"),
        about="The model kinds that read the rows' text instead of stored vectors "
        "(engine/kinds.py).",
    ),
    "reason.roll_back": Setting(
        REASON_ROLL_BACK, about="The reason a deployment made by roll-back records."
    ),
    # The sidecar's job queue (store/jobs.py, sidecar/, heads.request_*). A sidecar beats
    # every heartbeat_seconds; a running job whose beat is older than stale_after_seconds (a
    # sidecar killed, a machine gone) is claimable again; a job fails for good after
    # max_attempts claims. An idle sidecar polls every poll_seconds.
    "jobs.heartbeat_seconds": Setting(
        10, minimum=1, maximum=3600, about="A running job's heartbeat period."
    ),
    "jobs.stale_after_seconds": Setting(
        120,
        minimum=1,
        maximum=86_400,
        about="A running job whose last beat is older is claimable again (its sidecar died).",
    ),
    "jobs.max_attempts": Setting(
        3, minimum=1, maximum=100, about="Claims of a job before it fails for good."
    ),
    "jobs.poll_seconds": Setting(
        5, minimum=1, maximum=3600, about="How often an idle sidecar looks for work."
    ),
    "embed.parts": Setting(
        1, minimum=1, maximum=64, about="Jobs an embed request is split into, by key range."
    ),
    "embed.engine": Setting(
        EMBED_ENGINES[0],
        choices=EMBED_ENGINES,
        about="Who embeds in an embed job: auto is PyTorch on a GPU, the set's ONNX graph on "
        "a CPU.",
    ),
}


def default(name: str):
    """A setting's default: a parameter object's field default reads it here."""
    return SETTINGS[name].default


def option(name: str) -> OneOf:
    """What a setting with choices accepts, case and surrounding blanks ignored: the one place
    where ``'WINDOW '`` becomes ``'window'``, as T-SQL's ``heads.setting`` reads it against the
    same choices, so a set never stores a spelling Python would later refuse."""
    return OneOf(SETTINGS[name].choices, loose=True)


def bounds(name: str, kind: type = int) -> Interval:
    """What a bounded setting accepts: a whole number (or, ``kind`` float, any number) within
    its bounds."""
    setting = SETTINGS[name]
    return Interval(kind, setting.minimum, setting.maximum)


def choice(name: str, value: str | None) -> str:
    """The canonical spelling of a choice that comes from the database rather than through a
    parameter object (a job's stored policy), or its default; refused as a field would be."""
    if value is None:
        return str(default(name))
    allowed = option(name)
    if not allowed.accepts(value):
        raise InvalidParameterError(f"{name} {value!r} {allowed.refusal(value)}")
    return allowed.normal(value)


# A real improvement for ``if-better``: a tenth of a point of macro-F1. Re-training on the
# same data gives the same or an insignificantly different score (one held-out row of
# Rotten Tomatoes' 1,706 moves it by ~0.0006); deploying it would only re-score every row.
MIN_DEPLOY_GAIN = 0.001


def decide_deploy(policy: str, new_macro_f1: float, deployed_macro_f1: float | None) -> bool:
    """``if-better``: deploy when nothing is deployed, or when the new macro-F1 beats the
    deployed one by at least :data:`MIN_DEPLOY_GAIN`; a tie or a smaller gain is no gain.
    ``policy`` is a canonical one (:func:`option`'s), as a parameter object keeps it."""
    if policy == "always":
        return True
    if policy == "never":
        return False
    # rounded so that float noise in the 12th digit cannot make 0.001 fall short
    return (
        deployed_macro_f1 is None or round(new_macro_f1 - deployed_macro_f1, 9) >= MIN_DEPLOY_GAIN
    )
