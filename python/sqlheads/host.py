"""The embedded host's public Python API: every verb, against any SQLAlchemy database.

``host.embed(store, set_name=..., source=...)`` and the rest, as the command line calls them.
Each verb lives in its own module of :mod:`sqlheads.verbs`, beside its
``sp_execute_external_script`` half of the same name in :mod:`sqlheads.compute`; this module
gathers them under one name, so that callers need not know where each lives. It is Python's
door as ``sql_server_call`` is T-SQL's: ``embed``, ``train`` and ``distill`` take their
parameters as flat keywords (``epochs=5``, as the command line passes them), built into the
verb's parameter objects and checked once, here (:func:`~sqlheads.keywords.spread`), or those
objects whole (``params=TrainParams(...)``).
"""

from __future__ import annotations

from sqlheads import settings
from sqlheads.engine.progress import Progress
from sqlheads.keywords import spread
from sqlheads.verbs.deploy import deploy, roll_back
from sqlheads.verbs.distill import distill as distill_verb
from sqlheads.verbs.drop import drop_head, drop_set
from sqlheads.verbs.embed import embed as embed_verb
from sqlheads.verbs.encoders import encoders, register_encoder
from sqlheads.verbs.init import init
from sqlheads.verbs.locks import LOCK_TIMEOUT_MS
from sqlheads.verbs.models import models
from sqlheads.verbs.predict import predict
from sqlheads.verbs.train import train as train_verb

embed = spread(embed_verb)
train = spread(train_verb)
distill = spread(distill_verb)

DEFAULT_ENCODER = settings.DEFAULT_ENCODER  # decided once, in settings (SETTINGS)
DEFAULT_URL = "sqlite:///sqlheads.db"

__all__ = [
    "DEFAULT_ENCODER",
    "DEFAULT_URL",
    "LOCK_TIMEOUT_MS",
    "Progress",
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
