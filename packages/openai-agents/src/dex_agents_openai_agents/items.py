"""Deprecated: ``dex_agents_openai_agents.items`` is private now.

The runner stores and replays the SDK's input items with it; nothing in it is public. Its
names still import from here, with a ``DeprecationWarning``, until the next release.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dex_agents.runner import deprecated_aliases
from dex_agents_openai_agents import _messages

if TYPE_CHECKING:
    from dex_agents_openai_agents._messages import InputItem as InputItem
    from dex_agents_openai_agents._messages import call_names as call_names
    from dex_agents_openai_agents._messages import framework_message_of as framework_message_of
    from dex_agents_openai_agents._messages import message_text as message_text
    from dex_agents_openai_agents._messages import replay_items as replay_items
    from dex_agents_openai_agents._messages import stored_item as stored_item
    from dex_agents_openai_agents._messages import user_input_item as user_input_item

__getattr__ = deprecated_aliases(
    __name__,
    {
        "InputItem": (
            "the private dex_agents_openai_agents._messages.InputItem",
            _messages.InputItem,
        ),
        "call_names": (
            "the private dex_agents_openai_agents._messages.call_names",
            _messages.call_names,
        ),
        "framework_message_of": (
            "the private dex_agents_openai_agents._messages.framework_message_of",
            _messages.framework_message_of,
        ),
        "message_text": (
            "the private dex_agents_openai_agents._messages.message_text",
            _messages.message_text,
        ),
        "replay_items": (
            "the private dex_agents_openai_agents._messages.replay_items",
            _messages.replay_items,
        ),
        "stored_item": (
            "the private dex_agents_openai_agents._messages.stored_item",
            _messages.stored_item,
        ),
        "user_input_item": (
            "the private dex_agents_openai_agents._messages.user_input_item",
            _messages.user_input_item,
        ),
    },
)
