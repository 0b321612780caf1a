"""The JSON shape of wire values, shared by every value class of the session.

Every persisted value, RPC input and RPC output is a frozen dataclass whose field
names are the snake_case JSON keys of the session contract. Dex encodes such a
dataclass with its automatic JSON codec (``dataclasses.asdict``, sorted keys,
compact separators), so the bytes on the wire are exactly ``to_wire(value)``
dumped the same way.

The automatic decoder only rebuilds dataclasses and tuples at the top level of a
field, not inside ``X | None``. ``WireValue.__post_init__`` therefore normalizes
every field from its type hint: a JSON object becomes its dataclass, a list
becomes a tuple, a string becomes its enum, and a value of the wrong type raises
a ``TypeError`` that names the field. Decoding works the same whether Dex or
``from_wire`` built the value, and whatever Registry codecs the application uses.
"""

from __future__ import annotations

import inspect
import json
import types
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields, is_dataclass
from enum import Enum
from functools import cache
from types import MappingProxyType
from typing import (
    Any,
    ClassVar,
    Literal,
    TypeVar,
    Union,
    cast,
    get_args,
    get_origin,
    get_type_hints,
)

__all__ = [
    "WireValue",
    "from_wire",
    "from_wire_json",
    "to_wire",
    "to_wire_json",
    "unknown_fields",
]

WireT = TypeVar("WireT", bound="WireValue")

_NONE_TYPE = type(None)


@dataclass(frozen=True)
class WireValue:
    """Base of every wire dataclass: normalizes and checks fields on construction."""

    wire_name: ClassVar[str] = ""

    def __post_init__(self) -> None:
        for name, hint, is_unchanged in _field_plan(type(self)):
            current = getattr(self, name)
            if is_unchanged is not None and is_unchanged(current):
                continue
            normalized = _coerce(current, hint, f"{_label(type(self))}.{name}")
            if normalized is not current:
                object.__setattr__(self, name, normalized)


def _label(cls: type[Any]) -> str:
    wire_name: str = getattr(cls, "wire_name", "") or cls.__name__
    return wire_name


@cache
def _field_hints(cls: type[Any]) -> dict[str, Any]:
    hints = get_type_hints(cls)
    _keep_evaluated_annotations(cls)
    return {field.name: hints[field.name] for field in fields(cls)}


_UnchangedCheck = Callable[[Any], bool]


@cache
def _field_plan(cls: type[Any]) -> tuple[tuple[str, Any, _UnchangedCheck | None], ...]:
    """Each field's name, type hint and quick check, built once per class."""
    return tuple((name, hint, _unchanged_check(hint)) for name, hint in _field_hints(cls).items())


def _unchanged_check(hint: Any) -> _UnchangedCheck | None:
    """A cheap test that ``_coerce`` would return a value as it is, or None when there is
    none for ``hint``. Values are built every time a Step reads them, and most already
    have their final type, so this skips the general normalization for them."""
    if hint is Any:
        return lambda value: True
    if hint is str or hint is int or hint is bool or hint is float:
        exact: type[Any] = hint
        return lambda value: type(value) is exact
    origin = get_origin(hint)
    if origin is Union or origin is types.UnionType:
        options = get_args(hint)
        allows_none = _NONE_TYPE in options
        # _coerce returns the first option that accepts a value, so only the first counts.
        first = next(option for option in options if option is not _NONE_TYPE)
        first_check = _unchanged_check(first)
        if first_check is None:
            return None
        check: _UnchangedCheck = first_check
        return lambda value: allows_none if value is None else check(value)
    if origin is Literal:
        allowed = get_args(hint)
        return lambda value: value in allowed
    if origin is tuple:
        arguments = get_args(hint)
        item_check = (
            _unchanged_check(arguments[0])
            if len(arguments) == 2 and arguments[1] is Ellipsis
            else None
        )
        if item_check is None:
            return None
        each: _UnchangedCheck = item_check

        def is_unchanged_tuple(value: Any) -> bool:
            items = cast("tuple[Any, ...]", value) if type(value) is tuple else None
            return items is not None and all(each(item) for item in items)

        return is_unchanged_tuple
    if isinstance(hint, type) and (is_dataclass(hint) or issubclass(hint, Enum)):
        kind: type[Any] = hint
        return lambda value: isinstance(value, kind)
    return None


def _keep_evaluated_annotations(cls: type[Any]) -> None:
    """Replace the text annotations of ``cls`` and its bases by the types they name.

    Dex's automatic dataclass codec calls ``typing.get_type_hints`` for every value it
    decodes. With postponed annotations that compiles and evaluates every field's text
    each time (about 0.3 ms per message), which made reading a session's messages the
    slowest part of a Step; evaluated annotations give the same hints without that work.
    """
    for owner in cls.__mro__:
        own = inspect.get_annotations(owner)
        if not own or not any(isinstance(value, str) for value in own.values()):
            continue
        evaluated = get_type_hints(owner)
        owner.__annotations__ = {name: evaluated.get(name, value) for name, value in own.items()}


def _coerce(value: Any, hint: Any, where: str) -> Any:
    """Return ``value`` as ``hint`` describes it, or raise a TypeError naming ``where``."""
    if hint is Any:
        return value
    origin = get_origin(hint)
    if origin is Union or origin is types.UnionType:
        options = get_args(hint)
        if value is None:
            if _NONE_TYPE in options:
                return None
            raise TypeError(f"{where} must not be null")
        errors: list[str] = []
        for option in options:
            if option is _NONE_TYPE:
                continue
            try:
                return _coerce(value, option, where)
            except (TypeError, ValueError) as error:
                errors.append(str(error))
        raise TypeError(errors[0] if len(errors) == 1 else f"{where} has an invalid value")
    if origin is Literal:
        allowed = get_args(hint)
        if value not in allowed:
            raise TypeError(
                f"{where} must be one of {', '.join(map(repr, allowed))}, got {value!r}"
            )
        return value
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{where} must be a list")
        items = cast("list[Any] | tuple[Any, ...]", value)
        item_hint = get_args(hint)[0]
        coerced = tuple(
            _coerce(item, item_hint, f"{where}[{index}]") for index, item in enumerate(items)
        )
        if isinstance(items, tuple) and all(a is b for a, b in zip(coerced, items, strict=True)):
            return items
        return coerced
    if origin is dict or origin is Mapping:
        if not isinstance(value, Mapping):
            raise TypeError(f"{where} must be an object")
        mapping = cast("Mapping[Any, Any]", value)
        for key in mapping:
            if not isinstance(key, str):
                raise TypeError(f"{where} keys must be strings")
        return mapping
    if isinstance(hint, type):
        if is_dataclass(hint):
            if isinstance(value, hint):
                return value
            if isinstance(value, Mapping):
                return _build(cast("type[Any]", hint), cast("Mapping[str, Any]", value), where)
            raise TypeError(f"{where} must be an object")
        if issubclass(hint, Enum):
            if isinstance(value, hint):
                return value
            try:
                return hint(value)
            except ValueError:
                allowed = ", ".join(repr(member.value) for member in hint)
                raise TypeError(f"{where} must be one of {allowed}, got {value!r}") from None
        if hint is int:
            if type(value) is not int:
                raise TypeError(f"{where} must be an integer")
            return value
        if hint is float:
            if type(value) is int:
                return float(value)
            if type(value) is not float:
                raise TypeError(f"{where} must be a number")
            return value
        if hint is bool or hint is str:
            if type(value) is not hint:
                raise TypeError(f"{where} must be a {'boolean' if hint is bool else 'string'}")
            return value
    return value


def _build(cls: type[Any], data: Mapping[str, Any], where: str) -> Any:
    arguments: dict[str, Any] = {}
    null_means_default = _null_means_default(cls)
    for field in fields(cls):
        if field.name in data and not (
            data[field.name] is None and field.name in null_means_default
        ):
            arguments[field.name] = data[field.name]
        elif field.default is MISSING and field.default_factory is MISSING:
            raise TypeError(f"{where} is missing field {field.name}")
    value = cls(**arguments)
    known = {field.name for field in fields(cls)}
    unknown = {key: item for key, item in data.items() if key not in known}
    if unknown:
        # Fields a newer writer added: kept, so decoding and encoding again loses nothing.
        object.__setattr__(value, _UNKNOWN_FIELDS, MappingProxyType(unknown))
    return value


_UNKNOWN_FIELDS = "_wire_unknown_fields"


@cache
def _null_means_default(cls: type[Any]) -> frozenset[str]:
    """Fields with a default whose type has no ``None``: a stored null reads as the default."""
    hints = get_type_hints(cls)
    return frozenset(
        field.name
        for field in fields(cls)
        if (field.default is not MISSING or field.default_factory is not MISSING)
        and _NONE_TYPE not in get_args(hints[field.name])
        and hints[field.name] is not Any
    )


_NO_FIELDS: Mapping[str, Any] = MappingProxyType({})


def unknown_fields(value: Any) -> Mapping[str, Any]:
    """The JSON fields ``value`` was decoded with that its class does not know."""
    return cast("Mapping[str, Any]", getattr(value, _UNKNOWN_FIELDS, _NO_FIELDS))


_JSON_SCALARS = frozenset({str, int, float, bool, type(None)})


@cache
def _dataclass_field_names(cls: type) -> tuple[str, ...] | None:
    """The field names of a dataclass ``cls``; None for any other class."""
    return tuple(field.name for field in fields(cls)) if is_dataclass(cls) else None


def to_wire(value: Any) -> Any:
    """Return the JSON-compatible data Dex writes for ``value``."""
    cls: type[object] = value.__class__
    if cls in _JSON_SCALARS:  # most leaves: checked first, as every Step encodes values
        return value
    names = _dataclass_field_names(cls)
    if names is not None:
        data = {name: to_wire(getattr(value, name)) for name in names}
        for key, item in unknown_fields(value).items():
            data.setdefault(key, item)
        return data
    if isinstance(value, Enum):
        return to_wire(value.value)
    if isinstance(value, Mapping):
        mapping = cast("Mapping[str, Any]", value)
        return {key: to_wire(item) for key, item in mapping.items()}
    if isinstance(value, (list, tuple)):
        items = cast("list[Any] | tuple[Any, ...]", value)
        return [to_wire(item) for item in items]
    return value


def to_wire_json(value: Any) -> str:
    """Return the JSON text Dex stores for ``value``: sorted keys, compact separators."""
    return json.dumps(to_wire(value), allow_nan=False, separators=(",", ":"), sort_keys=True)


def from_wire(cls: type[WireT], data: Any) -> WireT:
    """Decode JSON-compatible ``data`` into ``cls``; missing fields with defaults are filled."""
    if not isinstance(data, Mapping):
        raise TypeError(f"{_label(cls)} must be a JSON object")
    return cast("WireT", _build(cls, cast("Mapping[str, Any]", data), _label(cls)))


def from_wire_json(cls: type[WireT], text: str) -> WireT:
    """Decode JSON text into ``cls``."""
    return from_wire(cls, json.loads(text))
