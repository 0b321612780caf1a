"""Compact JSON text as the session writes it on the wire (sorted keys, no spaces)."""

from __future__ import annotations

import json
from typing import Any, cast

__all__ = ["as_list", "as_object", "dumps"]


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def as_object(value: object) -> dict[str, Any] | None:
    """``value`` as a JSON object, or ``None`` when it is not one."""
    return cast("dict[str, Any]", value) if isinstance(value, dict) else None


def as_list(value: object) -> list[Any]:
    """``value`` as a JSON array; anything else reads as empty."""
    return cast("list[Any]", value) if isinstance(value, list) else []
