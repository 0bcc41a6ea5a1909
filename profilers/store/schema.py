"""One schema mechanism for the JSON files attn-cost reads: device profiles, op calibrations and result records.

A file's layout is a dataclass: each field's type says what its value must be (str, int, float, bool, a literal,
`X | None`, lists, string-keyed mappings, nested dataclasses), and `rule`, a field's metadata, adds what a type
cannot say (bounds, choices, a string that may be blank). `check` compares parsed JSON with the dataclass and
raises `SchemaError` naming the first field that does not fit, in one line: `time.linear.launch_s must be a finite
number >= 0, got 'fast'`. A field without a default must be present; keys the dataclass does not name are left alone.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal, Union

from attn_cost.costmodel.errors import UserError

_RULE = "attn_cost.schema.rule"


@dataclass(frozen=True)
class Rule:
    """What a field's type does not say. Bounds apply to a number, or to every number of a list or mapping."""

    minimum: float | None = None
    above: float | None = None
    """An exclusive lower bound (a time must be > 0)."""
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    """The strings allowed."""
    blank: bool = False
    """Whether a string may be empty (else it must hold more than spaces)."""


NO_RULE = Rule()
"""A field without a rule of its own."""


def rule(
    *,
    minimum: float | None = None,
    above: float | None = None,
    maximum: float | None = None,
    choices: tuple[str, ...] | None = None,
    blank: bool = False,
) -> dict[str, Rule]:
    """A field's schema rule, as the metadata of its dataclass field: `x: int = field(metadata=rule(minimum=1))`."""
    return {_RULE: Rule(minimum, above, maximum, choices, blank)}


class SchemaError(ValueError):
    """A value that does not fit its schema: where it is (`time.linear.points`), what it must be, what it is."""

    def __init__(self, path: str, what: str, value: object) -> None:
        self.path, self.what, self.value = path, what, value
        super().__init__(f"{path} must be {what}, got {self.shown}")

    @property
    def shown(self) -> str:
        """The value as written in a message, cut to 40 characters."""
        text = repr(self.value)
        return text if len(text) <= 40 else text[:37] + "..."


def check(data: object, schema: type, root: str = "the file", path: str = "") -> None:
    """Raise `SchemaError` naming the first field of `data` (parsed JSON) that does not fit dataclass `schema`.
    `root` names the whole object in a message about it; `path`, where given, is where `data` sits in a larger
    object (`time`: its fields are then `time.median`, ...)."""
    _value(data, schema, NO_RULE, path, root, nullable=False)


def load_error(where: str, what: str, error: SchemaError) -> UserError:
    """The one line that says a file is not what it should be: `x.json is not an attn-cost device profile: ...`."""
    return UserError(f"{where} is not an attn-cost {what}: {error}")


@dataclass
class Fingerprint:
    """What every file that carries a device fingerprint (`profilers.measure.machine`) must have of it: the
    device's name and kind (the other fields are read where they are used)."""

    name: str
    kind: str


@cache
def _fields(schema: type) -> tuple[tuple[str, Any, Rule, bool], ...]:
    """Each field of a schema dataclass: its name, type, rule and whether it is required (read once a schema)."""
    hints = typing.get_type_hints(schema)
    return tuple(
        (f.name, hints[f.name], f.metadata.get(_RULE, NO_RULE),
         f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
        for f in dataclasses.fields(schema)
    )  # fmt: skip


@cache
def _form(tp: Any) -> tuple[Any, tuple, bool]:
    """A type's origin, arguments and whether it is a dataclass (read once a type)."""
    return typing.get_origin(tp), typing.get_args(tp), dataclasses.is_dataclass(tp)


def _value(value: object, tp: Any, how: Rule, path: str, root: str, nullable: bool) -> None:
    where = path or root
    origin, args, is_schema = _form(tp)
    if tp is Any or tp is object:
        return
    if origin is Union or origin is types.UnionType:
        options = [a for a in args if a is not type(None)]
        if len(options) != 1:
            raise TypeError(f"schema: only X | None is supported, not {tp}")
        if value is None and len(options) < len(args):
            return
        _value(value, options[0], how, path, root, nullable=len(options) < len(args))
        return
    null = " or null" if nullable else ""
    if origin is Literal:
        if not any(type(value) is type(a) and value == a for a in args):
            raise SchemaError(where, " or ".join(str(a) for a in args) + null, value)
    elif is_schema:
        _object(value, tp, path, root, null)
    elif tp is list or origin is list:
        if not isinstance(value, list):
            raise SchemaError(where, "a list" + null, value)
        for i, item in enumerate(value):
            _value(item, args[0] if args else Any, how, f"{path}[{i}]", root, nullable=False)
    elif tp is dict or origin is dict:
        if not isinstance(value, dict):
            raise SchemaError(where, "an object" + null, value)
        for key, item in value.items():
            _value(item, args[1] if args else Any, how, _join(path, str(key)), root, nullable=False)
    elif tp is str:
        _text(value, how, where, null)
    elif tp is bool:
        if not isinstance(value, bool):
            raise SchemaError(where, "true or false" + null, value)
    elif tp is int or tp is float:
        _number(value, tp, how, where, null)
    else:
        raise TypeError(f"schema: unsupported type {tp!r} at {where}")


def _object(value: object, schema: Any, path: str, root: str, null: str) -> None:
    if not isinstance(value, dict):
        raise SchemaError(path or root, "an object" + null, value)
    for name, tp, how, required in _fields(schema):
        if name in value or required:  # a missing field is checked as null: `schema must be 1, got None`
            _value(value.get(name), tp, how, _join(path, name), root, False)


def _text(value: object, how: Rule, where: str, null: str) -> None:
    if how.choices is not None:
        if not isinstance(value, str) or value not in how.choices:
            raise SchemaError(where, "one of " + ", ".join(how.choices) + null, value)
    elif not isinstance(value, str) or not (how.blank or value.strip()):
        raise SchemaError(where, ("a string" if how.blank else "a non-empty string") + null, value)


def _number(value: object, tp: type, how: Rule, where: str, null: str) -> None:
    """A number of the type and within the rule's bounds; the message is made only for one that is not (a
    calibration holds a hundred thousand numbers)."""
    if (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and not (tp is int and isinstance(value, float))
        and (not isinstance(value, float) or math.isfinite(value))
        and (how.minimum is None or value >= how.minimum)
        and (how.above is None or value > how.above)
        and (how.maximum is None or value <= how.maximum)
    ):
        return
    what = "an integer" if tp is int else "a finite number"
    limits = ((">=", how.minimum), (">", how.above), ("<=", how.maximum))
    bounds = " and ".join(f"{sign} {_bound(limit)}" for sign, limit in limits if limit is not None)
    raise SchemaError(where, f"{what} {bounds}".strip() + null, value)


def _bound(value: float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:g}"


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
