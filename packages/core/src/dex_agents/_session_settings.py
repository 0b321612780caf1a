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

from dex import Attribute, Context, Value, ValueMappingError, WireKind

from dex_agents._sdk_patches import committed_attribute_string
from dex_agents._values import SessionSettingsValue, TurnSessionSettings, decode_session_settings

__all__ = [
    "INVALID_START_SESSION_SETTINGS_REASON",
    "MAX_SESSION_SETTINGS_BYTES",
    "SESSION_SETTINGS_NEED_SESSION_CODECS",
    "SESSION_SETTINGS_SIZE_TOLERANCE_BYTES",
    "SessionSettingsStorageError",
    "read_session_settings",
    "session_settings_error",
    "session_settings_from_text",
    "session_settings_size",
    "session_settings_text",
    "store_session_settings",
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


SESSION_SETTINGS_NEED_SESSION_CODECS = (
    "the session settings cannot be stored: Dex's default codecs cannot write a JSON object"
    " of arbitrary values; build the Registry with session_codec_registry() (AgentHost does"
    " unless session_codecs=False)"
)
"""Why settings cannot be stored by a Registry without ``session_codec_registry()``."""


class SessionSettingsStorageError(TypeError):
    """The Registry has no codec that writes ``SessionSettings`` (see
    ``SESSION_SETTINGS_NEED_SESSION_CODECS``)."""


def session_settings_text(settings: Mapping[str, Any]) -> str:
    """The compact JSON text of ``settings``, whose UTF-8 size the limit counts (and the
    shape ``SessionSettings`` had in builds before it stored the object itself)."""
    return json.dumps(settings, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def session_settings_from_text(text: str | None) -> dict[str, Any]:
    """The settings object of their JSON text; ``{}`` for none, or text without an object."""
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


def read_session_settings(
    attribute: Attribute[SessionSettingsValue], context: Context
) -> tuple[dict[str, Any], bool]:
    """The stored settings (``{}`` while unset) and whether they are in the shape of
    earlier builds, JSON text in a Dex string, which the next store rewrites."""
    try:
        # ``get`` returns None, not KeyError, for an unset Attribute of this type.
        stored = cast("Mapping[str, Any] | None", attribute.get(context))
    except KeyError:
        return {}, False
    except ValueMappingError:
        # The old shape (JSON text in a Dex string) is read through the one SDK patch module;
        # test_session_settings_storage.py stores such a value on a real engine.
        text = committed_attribute_string(context, attribute.name)
        if text is None:
            raise
        return decode_session_settings(Value(WireKind.STRING, text)), True
    return (dict(stored) if stored is not None else {}), False


def store_session_settings(
    attribute: Attribute[SessionSettingsValue], context: Context, settings: Mapping[str, Any]
) -> None:
    """Stage ``settings`` as the ``SessionSettings`` value: the JSON object itself.

    Raises ``SessionSettingsStorageError`` when the Registry's codecs cannot write it
    (Dex's default codecs write only ``{}``).
    """
    try:
        attribute.set(context, dict(settings))
    except (TypeError, ValueMappingError) as error:
        raise SessionSettingsStorageError(SESSION_SETTINGS_NEED_SESSION_CODECS) from error


def turn_settings(copy: TurnSessionSettings | None, turn_id: str | None) -> Mapping[str, Any]:
    """The settings ``turn_id`` started with; a copy an earlier turn left reads as none."""
    if copy is None or turn_id is None or copy.turn_id != turn_id:
        return {}
    return copy.session_settings
