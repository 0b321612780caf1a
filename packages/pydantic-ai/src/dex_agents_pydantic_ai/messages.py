"""Deprecated: ``dex_agents_pydantic_ai.messages`` is private now.

The runner stores and replays Pydantic AI messages with it; nothing in it is public. Its
names still import from here, with a ``DeprecationWarning``, until the next release.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dex_agents.runner import deprecated_aliases
from dex_agents_pydantic_ai import _messages

if TYPE_CHECKING:
    from dex_agents_pydantic_ai._messages import EMPTY_FRAMEWORK_ITEM as EMPTY_FRAMEWORK_ITEM
    from dex_agents_pydantic_ai._messages import (
        answer_orphaned_tool_calls as answer_orphaned_tool_calls,
    )
    from dex_agents_pydantic_ai._messages import decode_history as decode_history
    from dex_agents_pydantic_ai._messages import encode_framework_item as encode_framework_item
    from dex_agents_pydantic_ai._messages import project_message as project_message
    from dex_agents_pydantic_ai._messages import project_messages as project_messages
    from dex_agents_pydantic_ai._messages import tool_results_request as tool_results_request
    from dex_agents_pydantic_ai._messages import user_prompt_message as user_prompt_message

__getattr__ = deprecated_aliases(
    __name__,
    {
        "EMPTY_FRAMEWORK_ITEM": (
            "the private dex_agents_pydantic_ai._messages.EMPTY_FRAMEWORK_ITEM",
            _messages.EMPTY_FRAMEWORK_ITEM,
        ),
        "answer_orphaned_tool_calls": (
            "the private dex_agents_pydantic_ai._messages.answer_orphaned_tool_calls",
            _messages.answer_orphaned_tool_calls,
        ),
        "decode_history": (
            "the private dex_agents_pydantic_ai._messages.decode_history",
            _messages.decode_history,
        ),
        "encode_framework_item": (
            "the private dex_agents_pydantic_ai._messages.encode_framework_item",
            _messages.encode_framework_item,
        ),
        "project_message": (
            "the private dex_agents_pydantic_ai._messages.project_message",
            _messages.project_message,
        ),
        "project_messages": (
            "the private dex_agents_pydantic_ai._messages.project_messages",
            _messages.project_messages,
        ),
        "tool_results_request": (
            "the private dex_agents_pydantic_ai._messages.tool_results_request",
            _messages.tool_results_request,
        ),
        "user_prompt_message": (
            "the private dex_agents_pydantic_ai._messages.user_prompt_message",
            _messages.user_prompt_message,
        ),
    },
)
