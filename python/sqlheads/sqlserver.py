"""How a verb's output crosses into SQL Server through ``sp_execute_external_script``.

Each verb's result set is declared once here, column name -> Python type
(:data:`RESULT_TYPES`): :mod:`sqlheads.compute.columns` derives the output columns from it, and a
test holds every ``WITH RESULT SETS`` clause of ``sql/`` to it. :func:`typed_frame` gives an
output exactly those types, :func:`sql_server_parameters` makes the scalars SQL Server hands
over what Python expects, and :func:`server_cache_dir` picks the runtime's encoder cache.
``procedures.sql_server_call`` (the entry point the released T-SQL names) puts them together.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

# The Python type of each output column, as Machine Learning Services maps it onto the
# procedure's WITH RESULT SETS types ("Python and SQL data types", Microsoft Learn:
# learn.microsoft.com/sql/machine-learning/python/python-libraries-and-data-types): str ->
# nvarchar/char, bytes -> varbinary, int32 -> int, float64 -> float, bool -> bit. A test
# holds every WITH RESULT SETS clause of sql/ to these.
RESULT_TYPES: dict[str, dict[str, str]] = {
    "embed": {
        "item_key": "str",
        "text_sha256": "str",
        "vector": "bytes",
        "windows": "int",
        "reject_reason": "str",
    },
    "train": {
        "classes_json": "str",
        "params_json": "str",
        "metrics_json": "str",
        "loss_curve_json": "str",
        "accuracy": "float",
        "macro_f1": "float",
        "rows_train": "int",
        "rows_test": "int",
        "seconds": "float",
        "blob": "bytes",
        "sha256": "str",
        "onnx": "bytes",
        "deploy": "bool",
        "deploy_reason": "str",
        "kind": "str",
        "parameters": "int",
    },
    "predict": {"item_key": "str", "label": "str", "score": "float", "probabilities_json": "str"},
    "decide": {"deploy": "bool", "deploy_reason": "str"},
    "soft_labels": {"item_key": "str", "logits": "bytes", "classes_json": "str"},
}
RESULT_TYPES["teach"] = {
    "item_key": "str",
    "text": "str",
    "logits": "bytes",
    "origin_key": "str",
    "transfer": "int",
}
RESULT_TYPES["distill"] = RESULT_TYPES["train"] | {
    "teacher_accuracy": "float",
    "rows_without_input": "int",
}

# What a NULL becomes where a result column must keep its type: an all-rejected embed batch
# still returns bytes in ``vector`` (b"", never stored: T-SQL keeps only rows without a
# reject_reason), and ``windows`` is 0 for a rejected row rather than NaN, which would turn
# the column into float.
_FILL = {"int": 0, "float": 0.0, "bool": False, "str": "", "bytes": b""}
_DTYPE = {"int": "int32", "float": "float64", "bool": "bool", "str": "object", "bytes": "object"}


def typed_frame(frame: pd.DataFrame | None, types: Mapping[str, str]) -> pd.DataFrame:
    """``frame`` with exactly the declared columns, each of its declared Python type.

    ``None`` gives a placeholder row (error paths): a frame whose types SQL Server cannot
    infer from zero rows never reaches it, and the procedure throws before it reads the row.
    """
    if frame is None:
        frame = pd.DataFrame([{c: _FILL[kind] for c, kind in types.items()}])
    columns = {}
    for column, kind in types.items():
        # NULL is None in a text column (never NaN, a float), and never reaches a column whose
        # type a NULL would change (int, bit, varbinary): there it is the type's filler.
        missing = None if kind in ("str", "float") else _FILL[kind]
        values = [missing if _is_null(v) else v for v in frame[column]]
        if kind == "bytes":
            values = [bytes(v) for v in values]
        # Built from a list with its dtype: Series.map would turn None back into NaN.
        columns[column] = pd.Series(values, dtype=_DTYPE[kind])
    return pd.DataFrame(columns, columns=list(types))


def _is_null(value: object) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def sql_server_parameters(
    function: Callable[..., pd.DataFrame], params: Mapping[str, object]
) -> dict[str, object]:
    """Scalars as ``sp_execute_external_script`` hands them over, made what Python expects.

    A T-SQL NULL may arrive as ``None`` or as ``NaN`` (a float), and an ``int`` as a float or
    a NumPy scalar. NULL means "the default" (the parameter is left out, so the function's own
    default applies: one place decides it); an integral float for an ``int`` parameter becomes
    an int, so that validation and ``if-better`` see the values the caller meant.
    """
    import inspect

    signature = inspect.signature(function).parameters
    arguments: dict[str, object] = {}
    for name, value in params.items():
        if isinstance(value, np.generic):
            value = value.item()
        if _is_null(value):
            continue
        # a name the verb does not take is left for its door to refuse, numbered
        annotation = str(signature[name].annotation) if name in signature else ""
        if (
            isinstance(value, float)
            and value.is_integer()
            and "int" in annotation
            and "float" not in annotation
        ):
            value = int(value)
        arguments[name] = value
    return arguments


def server_cache_dir() -> str:
    """The encoder cache of the server's runtime: ``SQLHEADS_CACHE`` or the platform's folder.

    Decided in Python rather than by T-SQL reading ``sys.dm_os_host_info``, which on SQL Server
    2022 needs VIEW SERVER PERFORMANCE STATE that an analyst does not hold (Microsoft Learn,
    sys.dm_os_host_info, "Permissions").
    """
    configured = os.environ.get("SQLHEADS_CACHE")
    if configured:
        return configured
    if sys.platform == "win32":
        return r"C:\ProgramData\sqlheads\cache"
    return "/var/opt/mssql/sqlheads/cache"
