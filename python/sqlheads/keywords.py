"""Flat keywords in, parameter objects out: how a door hands a verb its typed parameters.

A verb takes its knobs as parameter objects (dataclasses such as
:class:`~sqlheads.engine.heads.HeadParams`, each with a ``validate()`` whose message says what
to pass instead). T-SQL passes flat scalars, and Python callers flat keywords. :func:`spread`
makes the door between them: a function with the verb's parameters where each parameter object
is spread into its fields (``epochs=5`` for ``params: HeadParams``), which builds each object
once, validates it before any work, and calls the verb. Its signature is the flat one, so that
``inspect.signature`` (and :func:`sqlheads.sqlserver.sql_server_parameters`, which reads it to
turn T-SQL's NULL into "the default") sees every field with its type and default. An object
may also be passed whole (the command line builds its own), but not beside its own fields.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar

from sqlheads.errors import InvalidParameterError

Result = TypeVar("Result")


def spread(function: Callable[..., Result]) -> Callable[..., Result]:
    """``function`` behind a door that takes its parameter objects' fields as keywords."""
    signature = inspect.signature(function, eval_str=True)
    objects: dict[str, type] = {}  # parameter name -> its dataclass
    flat: list[inspect.Parameter] = []
    for parameter in signature.parameters.values():
        cls = parameter_object(parameter.annotation)
        if cls is None:
            flat.append(parameter)
            continue
        objects[parameter.name] = cls
        flat.append(parameter.replace(default=None, annotation=cls | None))
        flat += fields_as_parameters(cls)
    names = [p.name for p in flat]
    doubled = sorted({n for n in names if names.count(n) > 1})
    if doubled:  # a programming error: the door could not tell whose field a keyword is
        raise TypeError(f"{function.__qualname__}: keyword(s) {doubled} name two things")
    fields = {name: [f.name for f in dataclasses.fields(cls)] for name, cls in objects.items()}
    known = set(names)
    what = function.__name__

    @functools.wraps(function)
    def door(*args: Any, **keywords: Any) -> Result:
        unknown = sorted(set(keywords) - known)
        if unknown:
            raise InvalidParameterError(
                f"{what} takes no parameter {', '.join(map(repr, unknown))}: pass one of "
                f"{', '.join(n for n in names if n not in ('store', 'input_data'))}"
            )
        for name, cls in objects.items():
            given = {f: keywords.pop(f) for f in fields[name] if f in keywords}
            whole = keywords.get(name)
            if whole is not None and given:
                raise InvalidParameterError(
                    f"{', '.join(given)} given beside {name}={whole!r}: pass them inside "
                    f"{name}, or {name} not at all"
                )
            built = whole if whole is not None else cls(**given)
            keywords[name] = built.validate()
        return function(*args, **keywords)

    door.__signature__ = signature.replace(parameters=_in_order(flat))  # type: ignore[attr-defined]
    return door


def parameter_object(annotation: Any) -> type | None:
    """The parameter object an annotation names (``X`` or ``X | None``, where ``X`` is a
    dataclass with ``validate()``), else None: a row source or a path is no parameter object."""
    candidates = typing.get_args(annotation) if _is_union(annotation) else (annotation,)
    named = [c for c in candidates if c is not type(None)]
    if len(named) != 1:
        return None
    (cls,) = named
    is_object = isinstance(cls, type) and dataclasses.is_dataclass(cls) and hasattr(cls, "validate")
    return cls if is_object else None


def fields_as_parameters(cls: type) -> list[inspect.Parameter]:
    """A dataclass's fields as keyword-only parameters, with their types and defaults."""
    hints = typing.get_type_hints(cls)
    spread_out = []
    for field in dataclasses.fields(cls):
        if not field.init:
            continue
        if field.default is not dataclasses.MISSING:
            default = field.default
        elif field.default_factory is not dataclasses.MISSING:
            default = field.default_factory()
        else:
            default = inspect.Parameter.empty
        spread_out.append(
            inspect.Parameter(
                field.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=default,
                annotation=hints[field.name],
            )
        )
    return spread_out


def _is_union(annotation: Any) -> bool:
    return isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union


def _in_order(parameters: list[inspect.Parameter]) -> list[inspect.Parameter]:
    """Parameters in the order a signature requires them (by kind; stable within one)."""
    return sorted(parameters, key=lambda p: p.kind)
