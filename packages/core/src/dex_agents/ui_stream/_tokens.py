"""The resume token of the UI message stream: where a part sits in its turn.

It carries the Dex position before the turn's first event (to replay the turn),
the Dex position before the event the part came from plus how many of that
event's parts were sent (to continue exactly after the part), and the mapper's
state at that point. The browser holds it opaquely; a token that does not decode
is treated as no token, and the Dex positions inside are checked by Dex.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any, cast

from dex_agents.ui_stream._json import dumps

__all__ = [
    "UIStreamPosition",
    "decode_ui_resume_token",
    "encode_ui_resume_token",
    "encode_ui_resume_token_for_tests",
]

_VERSION = 1
MAX_TOKEN_CHARACTERS = 64 * 1024


@dataclass(frozen=True)
class UIStreamPosition:
    """A decoded UI resume token."""

    turn_id: str
    turn_start: str
    """Dex token before the turn's first retained event."""
    event_start: str
    """Dex token before the event whose parts were being sent."""
    sent_parts: int
    """How many parts of that event the browser has."""
    mapper: dict[str, Any]
    """The part mapper's state after those parts."""


def encode_ui_resume_token(position: UIStreamPosition) -> str:
    data = {
        "v": _VERSION,
        "turn": position.turn_id,
        "start": position.turn_start,
        "at": position.event_start,
        "sent": position.sent_parts,
        "mapper": position.mapper,
    }
    return base64.urlsafe_b64encode(dumps(data).encode()).decode().rstrip("=")


def decode_ui_resume_token(token: str | None) -> UIStreamPosition | None:
    """The position in ``token``, or ``None`` when it is empty or not a UI resume token."""
    if not token or len(token) > MAX_TOKEN_CHARACTERS:
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(raw)
    except (binascii.Error, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    fields = cast("dict[str, Any]", data)
    turn, start, at = fields.get("turn"), fields.get("start"), fields.get("at")
    sent, mapper = fields.get("sent"), fields.get("mapper")
    if (
        fields.get("v") != _VERSION
        or not isinstance(turn, str)
        or not turn
        or not isinstance(start, str)
        or not isinstance(at, str)
        or type(sent) is not int
        or sent < 0
        or not isinstance(mapper, dict)
    ):
        return None
    return UIStreamPosition(turn, start, at, sent, cast("dict[str, Any]", mapper))


def encode_ui_resume_token_for_tests(turn_id: str, dex_token: str) -> str:
    """A token at the start of ``turn_id`` with a chosen Dex position, such as a forged one."""
    return encode_ui_resume_token(UIStreamPosition(turn_id, dex_token, dex_token, 0, {}))
