"""Flat keywords in, parameter objects out: how a door hands a verb its typed parameters.

A verb takes its knobs as parameter objects (:class:`sqlheads.engine.constraints.Params`, each
checked once, when built, with a message that says what to pass instead). T-SQL passes flat
scalars, and Python callers flat keywords. :func:`spread` makes the door between them: a
function with the verb's parameters where each parameter object is spread into its fields
(``epochs=5`` for ``params: TrainParams``, whose ``head_params`` is a ``HeadParams``), which
builds each object once, before any work, and calls the verb. Its signature is the flat one,
so that ``inspect.signature`` (and :func:`sqlheads.sqlserver.sql_server_parameters`, which
reads it to turn T-SQL's NULL into "the default") sees every field with its type and default.
A keyword given as None is left out, as T-SQL's NULL is: the field keeps its default. An object
may also be passed whole (the sidecar builds its own), but not beside its own fields.

A parameter annotated ``Annotated[X, Door(prefix="student_")]`` takes X's keywords with that
prefix (``student_tokenizer_json``); ``Door(only=(...))`` takes only those of X's fields.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from sqlheads.engine.constraints import parameter_class, unknown_names

Result = TypeVar("Result")
NOT_PASSED = ("store", "input_data")  # the verb's own, never a caller's keyword


@dataclass(frozen=True)
class Door:
    """How a parameter object is spread at a door: its keywords' ``prefix``, and ``only``
    these of them (empty: all)."""

    prefix: str = ""
    only: tuple[str, ...] = ()


def spread(function: Callable[..., Result]) -> Callable[..., Result]:
    """``function`` behind a door that takes its parameter objects' fields as keywords."""
    signature = inspect.signature(function, eval_str=True)
    hints = typing.get_type_hints(function, include_extras=True)
    objects: dict[str, tuple[Any, Door, list[str]]] = {}  # name -> class, door, its keywords
    flat: list[inspect.Parameter] = []
    for parameter in signature.parameters.values():
        cls, door = _object(hints.get(parameter.name, parameter.annotation))
        if cls is None:
            flat.append(parameter)
            continue
        own = [
            p
            for p in cls.door_parameters(door.prefix)
            if not door.only or p.name.removeprefix(door.prefix) in door.only
        ]
        objects[parameter.name] = (cls, door, [p.name for p in own])
        flat.append(parameter.replace(default=None, annotation=cls | None))
        flat += own
    names = [p.name for p in flat]
    doubled = sorted({n for n in names if names.count(n) > 1})
    if doubled:  # a programming error: the door could not tell whose field a keyword is
        raise TypeError(f"{function.__qualname__}: keyword(s) {doubled} name two things")
    known = set(names)
    what = function.__name__

    @functools.wraps(function)
    def door(*args: Any, **keywords: Any) -> Result:
        unknown = set(keywords) - known
        if unknown:
            raise unknown_names(what, unknown, [n for n in names if n not in NOT_PASSED])
        for name, (cls, how, own) in objects.items():
            given = {k: keywords.pop(k) for k in own if k in keywords}
            whole = (name, keywords.pop(name, None))
            keywords[name] = cls.from_flat(given, what=what, prefix=how.prefix, whole=whole)
        return function(*args, **keywords)

    door.__signature__ = signature.replace(parameters=_in_order(flat))  # type: ignore[attr-defined]
    return door


def _object(annotation: Any) -> tuple[Any, Door]:
    """The parameter object class an annotation names, and how it is spread."""
    door = Door()
    if typing.get_origin(annotation) is typing.Annotated:
        annotation, *extras = typing.get_args(annotation)
        door = next((e for e in extras if isinstance(e, Door)), door)
    return parameter_class(annotation), door


def _in_order(parameters: list[inspect.Parameter]) -> list[inspect.Parameter]:
    """Parameters in the order a signature requires them (by kind; stable within one)."""
    return sorted(parameters, key=lambda p: p.kind)
