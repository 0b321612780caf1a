"""Deprecated: ``dex_agents_langgraph.messages`` is private now.

The runner stores and replays LangChain messages with it; nothing in it is public. Its names
still import from here, with a ``DeprecationWarning``, until the next release.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dex_agents.runner import deprecated_aliases
from dex_agents_langgraph import _messages

if TYPE_CHECKING:
    from dex_agents_langgraph._messages import RequestedToolCall as RequestedToolCall
    from dex_agents_langgraph._messages import framework_message_of as framework_message_of
    from dex_agents_langgraph._messages import framework_messages_of as framework_messages_of
    from dex_agents_langgraph._messages import (
        message_from_framework_item as message_from_framework_item,
    )
    from dex_agents_langgraph._messages import message_text as message_text
    from dex_agents_langgraph._messages import (
        message_to_framework_item as message_to_framework_item,
    )
    from dex_agents_langgraph._messages import (
        pair_tool_calls_with_results as pair_tool_calls_with_results,
    )
    from dex_agents_langgraph._messages import result_message_of as result_message_of
    from dex_agents_langgraph._messages import stored_messages as stored_messages
    from dex_agents_langgraph._messages import tool_calls_of as tool_calls_of
    from dex_agents_langgraph._messages import unanswered_tool_calls as unanswered_tool_calls
    from dex_agents_langgraph._messages import user_message as user_message

__getattr__ = deprecated_aliases(
    __name__,
    {
        "RequestedToolCall": (
            "the private dex_agents_langgraph._messages.RequestedToolCall",
            _messages.RequestedToolCall,
        ),
        "framework_message_of": (
            "the private dex_agents_langgraph._messages.framework_message_of",
            _messages.framework_message_of,
        ),
        "framework_messages_of": (
            "the private dex_agents_langgraph._messages.framework_messages_of",
            _messages.framework_messages_of,
        ),
        "message_from_framework_item": (
            "the private dex_agents_langgraph._messages.message_from_framework_item",
            _messages.message_from_framework_item,
        ),
        "message_text": (
            "the private dex_agents_langgraph._messages.message_text",
            _messages.message_text,
        ),
        "message_to_framework_item": (
            "the private dex_agents_langgraph._messages.message_to_framework_item",
            _messages.message_to_framework_item,
        ),
        "pair_tool_calls_with_results": (
            "the private dex_agents_langgraph._messages.pair_tool_calls_with_results",
            _messages.pair_tool_calls_with_results,
        ),
        "result_message_of": (
            "the private dex_agents_langgraph._messages.result_message_of",
            _messages.result_message_of,
        ),
        "stored_messages": (
            "the private dex_agents_langgraph._messages.stored_messages",
            _messages.stored_messages,
        ),
        "tool_calls_of": (
            "the private dex_agents_langgraph._messages.tool_calls_of",
            _messages.tool_calls_of,
        ),
        "unanswered_tool_calls": (
            "the private dex_agents_langgraph._messages.unanswered_tool_calls",
            _messages.unanswered_tool_calls,
        ),
        "user_message": (
            "the private dex_agents_langgraph._messages.user_message",
            _messages.user_message,
        ),
    },
)
