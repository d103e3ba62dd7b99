"""Parameter objects: each class states once what its fields accept, and is checked once, built.

As scikit-learn's ``_parameter_constraints`` (``sklearn.utils._param_validation``), a class
declares, for each field, the values it accepts: :func:`param` gives a field its default and
its constraints, any one of which must hold (:class:`Interval`, :class:`OneOf`, :class:`Text`,
:class:`Names`, :class:`Instance`, or ``None`` for "None too"); a class's ``RULES`` say what one
field needs of another (:class:`Rule`). Building an object checks them all (``__post_init__``)
and refuses the first that fails with a numbered error (50012 unless the field names another)
that says what to pass instead. An object that exists is valid: nothing below the door that
built it checks it again.

A door (``sql_server_call``, the command line, ``host``, a sidecar's request) has flat keywords;
:meth:`Params.from_flat` builds an object from them, refusing a name the class does not know,
and :meth:`Params.door_parameters` lists them for a signature (:func:`sqlheads.keywords.spread`).
A field passes under its own name unless it gives another (``flat``: the encoder student's
``model`` is ``student_model`` there), not at all with ``door=False`` (a word student's size
comes with its architecture), and a field that is itself a parameter object passes as its own
fields (or whole, under the field's name).

Written here rather than taken from a library: scikit-learn's validation is a private module
that checks an estimator's ``__init__`` keywords, not dataclasses; pydantic would be a new
dependency of SQL Server's pinned ML Services runtime (``docker/mssql/runtime-constraints.txt``),
and its messages are its own, where these must be numbered (``errors.py``) and name the bounds
``settings.SETTINGS`` also gives T-SQL.
"""

from __future__ import annotations

import dataclasses
import inspect
import numbers
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from sqlheads.errors import InvalidParameterError, SqlheadsError

MISSING = dataclasses.MISSING
Flat = Mapping[str, Any]  # a door's keywords
Whole = tuple[str, Any] | None  # (keyword, object) for an object passed whole at a door


class Constraint(Protocol):
    def accepts(self, value: Any) -> bool: ...

    def normal(self, value: Any) -> Any:
        """The value as the object keeps it (a choice's canonical spelling)."""

    def describe(self) -> str:
        """What to pass: "a whole number between 1 and 1000"."""

    def refusal(self, value: Any) -> str:
        """What is wrong and what to pass instead, after ``name=value``."""


def _number(x: float) -> str:
    if isinstance(x, numbers.Integral):
        return f"{x:,}" if abs(x) >= 10_000 else str(x)
    return f"{x:g}"


def _either(choices: Iterable[str], word: str = "or") -> str:
    *others, last = [str(c) for c in choices]
    return f"{', '.join(others)} {word} {last}" if others else last


@dataclass(frozen=True)
class Interval:
    """Numbers of ``kind`` (``int``: whole numbers; ``float``: any real) from ``low`` to
    ``high`` (None: unbounded); ``closed``: which ends are included (both, left, right,
    neither)."""

    kind: type
    low: float | None = None
    high: float | None = None
    closed: str = "both"

    def typed(self, value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return False
        return self.kind is not int or isinstance(value, numbers.Integral)

    def accepts(self, value: Any) -> bool:
        if not self.typed(value):
            return False
        left, right = self.closed in ("both", "left"), self.closed in ("both", "right")
        above = self.low is None or (value >= self.low if left else value > self.low)
        below = self.high is None or (value <= self.high if right else value < self.high)
        return above and below

    def normal(self, value: Any) -> Any:
        return value

    def range(self) -> str:
        left, right = self.closed in ("both", "left"), self.closed in ("both", "right")
        low, high = self.low, self.high
        if low is not None and high is not None:
            if left and right and self.kind is int:
                return f"between {_number(low)} and {_number(high)}"
            opening, closing = "[" if left else "(", "]" if right else ")"
            return f"in {opening}{_number(low)}, {_number(high)}{closing}"
        if low is not None:
            return f"of at least {_number(low)}" if left else f"above {_number(low)}"
        if high is not None:
            return f"of at most {_number(high)}" if right else f"below {_number(high)}"
        return ""

    def describe(self) -> str:
        noun = "a whole number" if self.kind is int else "a number"
        return f"{noun} {self.range()}".rstrip()

    def refusal(self, value: Any) -> str:
        if not self.typed(value):
            return f"has the wrong type: pass {self.describe()}"
        return f"is out of range: pass a value {self.range()}"


@dataclass(frozen=True)
class OneOf:
    """One of ``choices``; ``loose``: case and surrounding blanks ignored, the canonical
    spelling kept (as T-SQL's ``heads.setting`` reads a choice)."""

    choices: tuple[str, ...]
    loose: bool = False

    def normal(self, value: Any) -> str | None:
        if not isinstance(value, str):
            return None
        if value in self.choices:
            return value
        wanted = value.strip().lower()
        found = [c for c in self.choices if self.loose and c.lower() == wanted]
        return found[0] if found else None

    def accepts(self, value: Any) -> bool:
        return self.normal(value) is not None

    def describe(self) -> str:
        return _either(self.choices)

    def refusal(self, value: Any) -> str:
        return f"is not one of {', '.join(self.choices)}: pass {self.describe()}"


class _Named:
    """A constraint that ``what`` names: it keeps a value as given."""

    what: str

    def normal(self, value: Any) -> Any:
        return value

    def describe(self) -> str:
        return self.what

    def refusal(self, value: Any) -> str:
        return f"is not {self.what}"


@dataclass(frozen=True)
class Text(_Named):
    """A text with something in it; ``what`` says which (a query, a model's name)."""

    what: str = "a non-empty text"

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str) and bool(value.strip())


@dataclass(frozen=True)
class Names:
    """Distinct names among ``choices``: a list, or one text of comma-separated names; kept as
    a tuple."""

    choices: tuple[str, ...]

    def normal(self, value: Any) -> tuple[str, ...] | None:
        if isinstance(value, str):
            value = [name.strip() for name in value.split(",") if name.strip()]
        if not isinstance(value, list | tuple):
            return None
        names = tuple(value)
        if len(set(names)) != len(names) or not set(names) <= set(self.choices):
            return None
        return names

    def accepts(self, value: Any) -> bool:
        return self.normal(value) is not None

    def describe(self) -> str:
        return (
            f"a list of distinct {_either(self.choices, 'and/or')}, e.g. "
            f"{list(self.choices[:2])}, or [] for none"
        )

    def refusal(self, value: Any) -> str:
        return f"is not {self.describe()}"


@dataclass(frozen=True)
class Instance(_Named):
    """An instance of one of ``types`` (a row source, a folder, bytes)."""

    types: tuple[type, ...]
    what: str

    def accepts(self, value: Any) -> bool:
        return isinstance(value, self.types)


FLAG = Instance((bool,), "True or False")  # and not 1 or 0: a bool is an int, not the reverse
SEED = Interval(int, 0, 2**32 - 1)  # what NumPy's and PyTorch's generators take


@dataclass(frozen=True)
class Rule:
    """What ``field`` needs of the object's other fields: ``holds(obj)``, or the object is
    refused with ``refusal`` (formatted with the fields' values) after ``field=value``
    (``named``) or alone."""

    field: str
    holds: Callable[[Any], bool]
    refusal: str
    error: type[SqlheadsError] = InvalidParameterError
    named: bool = True  # False: ``refusal`` is the whole message, not after ``field=value``


def param(
    default: Any = MISSING,
    *allowed: Constraint | None,
    factory: Callable[[], Any] | None = None,
    flat: str | None = None,
    door: bool = True,
    stored: bool = True,
    error: type[SqlheadsError] = InvalidParameterError,
    about: str = "",
) -> Any:
    """A parameter object's field: its ``default`` (or ``factory``; neither: required), the
    values it accepts (any one of ``allowed``; ``None`` among them: None too), the name a door
    passes it under (``flat``; ``door=False``: none), whether :meth:`Params.record` keeps it,
    the error a refusal raises, and what it does (``about``: help texts read it)."""
    metadata = {
        "allowed": allowed,
        "flat": flat,
        "door": door,
        "stored": stored,
        "error": error,
        "about": about,
    }
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def flat_name(field: dataclasses.Field) -> str:
    return field.metadata.get("flat") or field.name


def default_of(field: dataclasses.Field) -> Any:
    """A field's default, ``inspect.Parameter.empty`` when it has none."""
    if field.default is not MISSING:
        return field.default
    if field.default_factory is not MISSING:
        return field.default_factory()
    return inspect.Parameter.empty


def about(cls: type, name: str) -> tuple[str, Any]:
    """A field's help text and default, for help texts that quote them."""
    (found,) = [f for f in dataclasses.fields(cls) if f.name == name]
    return found.metadata.get("about", ""), default_of(found)


def allowed_of(cls: type, name: str) -> tuple:
    """What a class's field ``name`` accepts, for another class's field of the same knob."""
    (found,) = [f for f in dataclasses.fields(cls) if f.name == name]
    return found.metadata["allowed"]


def parameter_class(annotation: Any) -> type | None:
    """The parameter object class an annotation names (``X`` or ``X | None``), else None."""
    candidates = typing.get_args(annotation) if _is_union(annotation) else (annotation,)
    named = [c for c in candidates if c is not type(None)]
    if len(named) != 1:
        return None
    (cls,) = named
    return cls if isinstance(cls, type) and hasattr(cls, "from_flat") else None


def _is_union(annotation: Any) -> bool:
    import types

    return isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union


def unknown_names(what: str, unknown: Iterable[str], known: Iterable[str]) -> InvalidParameterError:
    return InvalidParameterError(
        f"{what} does not know parameter(s) {', '.join(map(repr, sorted(unknown)))}: pass one "
        f"of {', '.join(known)}"
    )


class Params:
    """The base of a parameter object (a dataclass): checked when built; built from a door's
    flat keywords with :meth:`from_flat`."""

    RULES: ClassVar[tuple[Rule, ...]] = ()

    def __post_init__(self) -> None:
        check(self)

    @classmethod
    def admits(cls, value: Any) -> bool:
        """Whether ``value`` may stand for an object of this class (passed whole)."""
        return isinstance(value, cls)

    @classmethod
    def _door_fields(cls) -> list[tuple[dataclasses.Field, type | None]]:
        return [(f, nested) for f, nested in _fields(cls) if f.metadata.get("door", True)]

    @classmethod
    def door_parameters(cls, prefix: str = "") -> list[inspect.Parameter]:
        """The keywords a door takes for this class: its fields (a parameter object among
        them whole, under its field's name, and as its own fields), with types and defaults."""
        hints = typing.get_type_hints(cls)
        found: list[inspect.Parameter] = []
        for field, nested in cls._door_fields():
            if nested is not None:
                found.append(keyword(prefix + field.name, None, nested | None))
                found += nested.door_parameters(prefix)
            else:
                name, default = prefix + flat_name(field), default_of(field)
                found.append(keyword(name, default, hints[field.name]))
        return found

    @classmethod
    def from_flat(cls, given: Flat, *, what: str, prefix: str = "", whole: Whole = None) -> Any:
        """The object of the flat keywords ``given`` (None: the field's default), or the one
        ``whole`` passes as it is (``(keyword, object)``, then not beside its own fields); a
        name the class does not know is refused, naming those it knows."""
        given = {k: v for k, v in given.items() if v is not None}
        known = [p.name for p in cls.door_parameters(prefix)]
        unknown = set(given) - set(known)
        if unknown:
            raise unknown_names(what, unknown, known)
        if whole is not None and whole[1] is not None:
            return passed_whole(cls, given, whole)
        values: dict[str, Any] = {}
        for field, nested in cls._door_fields():
            if nested is not None:
                inner = {p.name for p in nested.door_parameters(prefix)}
                mine = {k: v for k, v in given.items() if k in inner}
                name = prefix + field.name
                if mine or name in given:
                    values[field.name] = nested.from_flat(
                        mine, what=what, prefix=prefix, whole=(name, given.get(name))
                    )
            elif prefix + flat_name(field) in given:
                values[field.name] = given[prefix + flat_name(field)]
            elif default_of(field) is inspect.Parameter.empty:
                raise _missing(field, prefix + flat_name(field), what)
        return cls.built(values)

    @classmethod
    def built(cls, values: dict[str, Any]) -> Any:
        """The object a door's ``values`` (by field) make."""
        return cls(**values)

    def to_flat(self) -> dict[str, Any]:
        """The object as a door's flat keywords, JSON's values (a tuple as a list)."""
        flat: dict[str, Any] = {}
        for field, nested in self._door_fields():
            value = getattr(self, field.name)
            if nested is not None:
                flat |= value.to_flat()
            else:
                flat[flat_name(field)] = list(value) if isinstance(value, tuple) else value
        return flat

    def record(self) -> dict[str, Any]:
        """The fields a version's record keeps (all but those that say where a run keeps its
        files)."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.metadata.get("stored", True)
        }


_FIELDS: dict[type, list[tuple[dataclasses.Field, type | None]]] = {}


def _fields(cls: type) -> list[tuple[dataclasses.Field, type | None]]:
    """A parameter object's fields, each with the parameter class it holds (or None)."""
    if cls not in _FIELDS:
        hints = typing.get_type_hints(cls)
        _FIELDS[cls] = [
            (f, parameter_class(hints[f.name])) for f in dataclasses.fields(cls) if f.init
        ]
    return _FIELDS[cls]


def passed_whole(cls: Any, given: Flat, whole: tuple[str, Any]) -> Any:
    """An object a door was given whole (``(keyword, object)``): of ``cls``, and not beside
    its own fields."""
    name, passed = whole
    if given:
        raise InvalidParameterError(
            f"{', '.join(given)} given beside {name}={passed!r}: pass them inside {name}, or "
            f"{name} not at all"
        )
    if not cls.admits(passed):
        raise InvalidParameterError(
            f"{name}={passed!r} is not {cls.__name__}'s: pass a {cls.__name__}, or its fields"
        )
    return passed


def keyword(name: str, default: Any, annotation: Any) -> inspect.Parameter:
    """A keyword-only parameter of a door's signature."""
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
    )


def check(obj: Any) -> None:
    """Refuse the first field of ``obj`` its constraints do not admit, then the first rule
    that does not hold; keep each admitted value in its normal form."""
    for field, nested in _fields(type(obj)):
        value = getattr(obj, field.name)
        if nested is not None and not nested.admits(value):
            raise InvalidParameterError(
                f"{field.name}={value!r} is not {nested.__name__}'s: pass a {nested.__name__}"
            )
        allowed = field.metadata.get("allowed")
        if allowed:
            admitted = _admitted(field, value, allowed)
            if admitted is not value:
                object.__setattr__(obj, field.name, admitted)
    values = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    for rule in type(obj).RULES:
        if not rule.holds(obj):
            said = rule.refusal.format(**values)
            raise rule.error(f"{rule.field}={values[rule.field]!r} {said}" if rule.named else said)


def _admitted(field: dataclasses.Field, value: Any, allowed: tuple) -> Any:
    if value is None and None in allowed:
        return None
    constraints = [c for c in allowed if c is not None]
    for constraint in constraints:
        if constraint.accepts(value):
            return constraint.normal(value)
    or_none = ", or None" if None in allowed else ""
    refusal = constraints[0].refusal(value)
    raise _error(field)(f"{flat_name(field)}={value!r} {refusal}{or_none}")


def _error(field: dataclasses.Field) -> type[SqlheadsError]:
    return field.metadata.get("error", InvalidParameterError)


def _missing(field: dataclasses.Field, name: str, what: str) -> SqlheadsError:
    constraints = [c for c in field.metadata.get("allowed") or () if c is not None]
    wanted = f": pass {constraints[0].describe()}" if constraints else ""
    return _error(field)(f"{what} needs {name}{wanted}")
