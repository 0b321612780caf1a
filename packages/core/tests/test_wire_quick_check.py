"""The quick "already has its type" check of wire values agrees with full normalization.

``WireValue`` skips ``_coerce`` for a field whose value passes a precomputed check, so
the check must never accept a value that ``_coerce`` would change or refuse.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dex_agents.values as values
from dex_agents._wire import WireValue, _coerce, _field_plan  # pyright: ignore[reportPrivateUsage]

WIRE_CLASSES = [
    cls
    for _, cls in inspect.getmembers(values, inspect.isclass)
    if issubclass(cls, WireValue) and cls is not WireValue
]
FIELDS = [
    (cls, name, hint, check)
    for cls in WIRE_CLASSES
    for name, hint, check in _field_plan(cls)
    if check is not None
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False, allow_infinity=False, width=16),
    st.sampled_from(["", "x", "read", "user", "approval", "question", "completed", "succeeded"]),
    st.sampled_from(list(values.ToolEffect)),
)
samples = st.recursive(
    scalars, lambda inner: st.tuples(inner) | st.lists(inner, max_size=2).map(tuple), max_leaves=4
)


def test_there_are_fields_with_a_quick_check() -> None:
    assert len(FIELDS) > 20


@pytest.mark.parametrize(("cls", "name", "hint", "check"), FIELDS, ids=lambda p: str(p)[:40])
@settings(max_examples=60, deadline=None)
@given(value=samples)
def test_quick_check_accepts_only_values_coerce_keeps(
    cls: type[Any], name: str, hint: Any, check: Any, value: Any
) -> None:
    if not check(value):
        return
    assert _coerce(value, hint, f"{cls.__name__}.{name}") is value
