"""Session settings: one JSON object per session that the application sets and replaces.

They let one Flow type serve sessions that differ, such as by model. A change takes
effect when the next turn starts: the Step that starts a turn copies them into
``TurnSessionSettings``, and the turn's model calls read only that copy. Never put
a secret in them: snapshots return them as stored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from dex_agents._values import TurnSessionSettings

__all__ = [
    "INVALID_START_SESSION_SETTINGS_REASON",
    "MAX_SESSION_SETTINGS_BYTES",
    "SESSION_SETTINGS_SIZE_TOLERANCE_BYTES",
    "session_settings_error",
    "session_settings_from_text",
    "session_settings_size",
    "session_settings_text",
    "turn_settings",
    "validate_session_settings",
]

MAX_SESSION_SETTINGS_BYTES = 16 * 1024
"""Most bytes of the settings' compact JSON text, UTF-8."""
SESSION_SETTINGS_SIZE_TOLERANCE_BYTES = 1024
"""Extra bytes the session's own checks accept: the cores write some floats and
U+2028/U+2029 differently."""
INVALID_START_SESSION_SETTINGS_REASON = "the session start input has invalid session settings"
"""Start of the reason a session fails with when its start settings are invalid."""


def session_settings_text(settings: Mapping[str, Any]) -> str:
    """The compact JSON text of ``settings``, as ``SessionSettings`` stores it."""
    return json.dumps(settings, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def session_settings_from_text(text: str | None) -> dict[str, Any]:
    """The stored settings object; ``{}`` when none are stored."""
    if not text:
        return {}
    value = json.loads(text)
    return cast("dict[str, Any]", value) if isinstance(value, dict) else {}


def session_settings_size(settings: Mapping[str, Any]) -> int:
    """Bytes of the compact JSON text of ``settings``, UTF-8."""
    return len(session_settings_text(settings).encode("utf-8"))


def session_settings_error(settings: object, *, tolerance: int = 0) -> str | None:
    """Why ``settings`` are not valid session settings, or ``None`` when they are."""
    if not isinstance(settings, Mapping):
        return f"session settings must be a JSON object, got {type(settings).__name__}"
    mapping: Mapping[Any, Any] = settings  # pyright: ignore[reportUnknownVariableType]
    if not all(isinstance(key, str) for key in mapping):  # pyright: ignore[reportUnknownVariableType]
        return "session settings keys must be strings"
    try:
        size = session_settings_size(mapping)
    except (TypeError, ValueError) as error:
        return f"session settings must be JSON: {error}"
    limit = MAX_SESSION_SETTINGS_BYTES + tolerance
    if size > limit:
        return f"session settings take {size} bytes of JSON; the limit is {limit}"
    return None


def validate_session_settings(settings: object) -> Mapping[str, Any]:
    """Return ``settings`` when they are a JSON object of at most 16 KiB; else raise
    ``ValueError`` that says why. Call it before ``start_flow`` or an update."""
    error = session_settings_error(settings)
    if error is not None:
        raise ValueError(error)
    assert isinstance(settings, Mapping)
    return settings  # pyright: ignore[reportUnknownVariableType]


def turn_settings(copy: TurnSessionSettings | None, turn_id: str | None) -> Mapping[str, Any]:
    """The settings ``turn_id`` started with; a copy an earlier turn left reads as none."""
    if copy is None or turn_id is None or copy.turn_id != turn_id:
        return {}
    return copy.session_settings
