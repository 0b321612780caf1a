"""Deprecated: ``dex_agents_claude_sdk.messages`` is private now.

The runner stores and replays Messages API messages with it; nothing in it is public. Its
names still import from here, with a ``DeprecationWarning``, until the next release.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dex_agents.runner import deprecated_aliases
from dex_agents_claude_sdk import _messages

if TYPE_CHECKING:
    from dex_agents_claude_sdk._messages import ToolUse as ToolUse
    from dex_agents_claude_sdk._messages import assistant_messages as assistant_messages
    from dex_agents_claude_sdk._messages import decode_item as decode_item
    from dex_agents_claude_sdk._messages import request_messages as request_messages
    from dex_agents_claude_sdk._messages import stored_items as stored_items
    from dex_agents_claude_sdk._messages import tool_result_message as tool_result_message
    from dex_agents_claude_sdk._messages import tool_uses_of as tool_uses_of
    from dex_agents_claude_sdk._messages import unanswered_tool_uses as unanswered_tool_uses
    from dex_agents_claude_sdk._messages import user_message as user_message

__getattr__ = deprecated_aliases(
    __name__,
    {
        "ToolUse": ("the private dex_agents_claude_sdk._messages.ToolUse", _messages.ToolUse),
        "assistant_messages": (
            "the private dex_agents_claude_sdk._messages.assistant_messages",
            _messages.assistant_messages,
        ),
        "decode_item": (
            "the private dex_agents_claude_sdk._messages.decode_item",
            _messages.decode_item,
        ),
        "request_messages": (
            "the private dex_agents_claude_sdk._messages.request_messages",
            _messages.request_messages,
        ),
        "stored_items": (
            "the private dex_agents_claude_sdk._messages.stored_items",
            _messages.stored_items,
        ),
        "tool_result_message": (
            "the private dex_agents_claude_sdk._messages.tool_result_message",
            _messages.tool_result_message,
        ),
        "tool_uses_of": (
            "the private dex_agents_claude_sdk._messages.tool_uses_of",
            _messages.tool_uses_of,
        ),
        "unanswered_tool_uses": (
            "the private dex_agents_claude_sdk._messages.unanswered_tool_uses",
            _messages.unanswered_tool_uses,
        ),
        "user_message": (
            "the private dex_agents_claude_sdk._messages.user_message",
            _messages.user_message,
        ),
    },
)
