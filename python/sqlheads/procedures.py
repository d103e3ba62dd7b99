"""SQL Server's door: the one function every ``@script`` in ``sql/`` calls.

The released T-SQL imports :func:`sql_server_call` from here (``sql/0002`` to ``sql/0006`` are
frozen), so this module stays where it is and stays small: the registry of the verbs an
external script may run (each in its own module of :mod:`sqlheads.compute`) and the door that
turns T-SQL's flat scalars into a call with the verb's parameter objects
(:func:`sqlheads.keywords.spread`) and any failure into a numbered error.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pandas as pd

from sqlheads.compute.columns import (
    DECIDE_OUTPUT,
    DISTILL_OUTPUT,
    EMBED_OUTPUT,
    PREDICT_OUTPUT,
    SOFT_LABELS_OUTPUT,
    TRAIN_OUTPUT,
)
from sqlheads.compute.deploy import decide as decide_half
from sqlheads.compute.distill import distill as distill_half
from sqlheads.compute.embed import embed as embed_half
from sqlheads.compute.predict import predict as predict_half
from sqlheads.compute.soft_labels import soft_labels as soft_labels_half
from sqlheads.compute.teach import teach as teach_half
from sqlheads.compute.train import train as train_half
from sqlheads.engine import kinds
from sqlheads.errors import InternalError, InvalidParameterError, SqlheadsError
from sqlheads.keywords import spread
from sqlheads.sqlserver import RESULT_TYPES, server_cache_dir, sql_server_parameters, typed_frame

# Each compute half behind its door: T-SQL's flat scalars become its parameter objects
# (EmbedParams and EncoderRef, TrainParams, Distillation, TeacherVersion and TransferRecipe),
# built and checked once, here.
embed = spread(embed_half)
train = spread(train_half)
predict = spread(predict_half)
decide = spread(decide_half)
distill = spread(distill_half)
soft_labels = spread(soft_labels_half)
teach = spread(teach_half)

SQL_SERVER_VERBS: dict[str, tuple[Callable[..., pd.DataFrame], tuple[str, ...]]] = {
    "embed": (embed, EMBED_OUTPUT),
    "train": (train, TRAIN_OUTPUT),
    "predict": (predict, PREDICT_OUTPUT),
    "decide": (decide, DECIDE_OUTPUT),
    "distill": (distill, DISTILL_OUTPUT),
    "soft_labels": (soft_labels, SOFT_LABELS_OUTPUT),
    "teach": (teach, tuple(RESULT_TYPES["teach"])),
}


def sql_server_call(
    verb: str, input_data: pd.DataFrame, **params: object
) -> tuple[pd.DataFrame, int, str]:
    """Run ``verb`` for ``sp_execute_external_script``: ``(OutputDataSet, number, message)``.

    No exception escapes into SQL Server, which would report every failure as error 39004 and
    lose its number: a :class:`~sqlheads.errors.SqlheadsError` comes back as output parameters,
    with a typed placeholder ``OutputDataSet``, so that the procedure can ``THROW`` the same
    number and message (and, on 50009, retry with the encoder's bytes); anything else comes
    back as :class:`~sqlheads.errors.InternalError` (50090), naming the verb and the failure.
    """
    types = RESULT_TYPES.get(verb, {})
    try:
        os.environ["SQLHEADS_CACHE"] = server_cache_dir()
        output = _call(verb, input_data, params)
        return typed_frame(output, types), 0, ""
    except SqlheadsError as error:
        return typed_frame(None, types), error.number, error.message[:2000]
    except Exception as error:  # a bug: still a numbered error SQL Server can THROW
        internal = InternalError(
            f"{verb!r} failed inside sqlheads with {type(error).__name__}: {error} (a bug in "
            "sqlheads, not in the call: report it with this message)"
        )
        return typed_frame(None, types), internal.number, internal.message[:2000]


def _call(verb: str, input_data: pd.DataFrame, params: dict[str, object]) -> pd.DataFrame:
    if verb not in SQL_SERVER_VERBS:
        raise InternalError(
            f"no verb {verb!r} for external scripts: one of {', '.join(SQL_SERVER_VERBS)}"
        )
    if verb == "distill" and params.get("student") in kinds.SIDECAR_STUDENTS:
        raise InvalidParameterError(
            f"student {params['student']!r} fine-tunes a transformer, which SQL Server's "
            "external scripts must not do: request it from the sidecar with "
            "EXEC heads.request_teacher ..., @students = N'encoder' (or `sqlheads distill "
            "--student encoder` on a machine with a GPU)"
        )
    function, _ = SQL_SERVER_VERBS[verb]
    return function(input_data, **sql_server_parameters(function, params))
