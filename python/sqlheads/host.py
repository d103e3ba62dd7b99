"""The embedded host's public Python API: every verb, against any SQLAlchemy database.

``host.embed(store, set_name=..., source=...)`` and the rest, as the command line calls them.
Each verb lives in its own module of :mod:`sqlheads.verbs`, beside its
``sp_execute_external_script`` half of the same name in :mod:`sqlheads.compute`; this module
only gathers them under one name, so that callers need not know where each lives.
"""

from __future__ import annotations

from sqlheads import settings
from sqlheads.verbs.deploy import deploy, roll_back
from sqlheads.verbs.distill import distill
from sqlheads.verbs.drop import drop_head, drop_set
from sqlheads.verbs.embed import embed
from sqlheads.verbs.encoders import encoders, register_encoder
from sqlheads.verbs.init import init
from sqlheads.verbs.locks import LOCK_TIMEOUT_MS
from sqlheads.verbs.models import models
from sqlheads.verbs.predict import predict
from sqlheads.verbs.progress import Progress, Stage
from sqlheads.verbs.train import train

DEFAULT_ENCODER = settings.DEFAULT_ENCODER  # decided once, in settings (SETTINGS)
DEFAULT_URL = "sqlite:///sqlheads.db"

__all__ = [
    "DEFAULT_ENCODER",
    "DEFAULT_URL",
    "LOCK_TIMEOUT_MS",
    "Progress",
    "Stage",
    "deploy",
    "distill",
    "drop_head",
    "drop_set",
    "embed",
    "encoders",
    "init",
    "models",
    "predict",
    "register_encoder",
    "roll_back",
    "train",
]
