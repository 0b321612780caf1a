"""Deprecated: ``dex_agents_openai_agents.run_state`` is private now.

The runner keeps the SDK's RunState in the turn's run state with it; nothing in it is
public. Its names still import from here, with a ``DeprecationWarning``, until the next
release.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dex_agents.runner import deprecated_aliases
from dex_agents_openai_agents import _messages

if TYPE_CHECKING:
    from dex_agents_openai_agents._messages import RUN_STATE_FORMAT as RUN_STATE_FORMAT
    from dex_agents_openai_agents._messages import StepRunState as StepRunState
    from dex_agents_openai_agents._messages import decode_run_state as decode_run_state
    from dex_agents_openai_agents._messages import encode_run_state as encode_run_state

__getattr__ = deprecated_aliases(
    __name__,
    {
        "RUN_STATE_FORMAT": (
            "the private dex_agents_openai_agents._messages.RUN_STATE_FORMAT",
            _messages.RUN_STATE_FORMAT,
        ),
        "StepRunState": (
            "the private dex_agents_openai_agents._messages.StepRunState",
            _messages.StepRunState,
        ),
        "decode_run_state": (
            "the private dex_agents_openai_agents._messages.decode_run_state",
            _messages.decode_run_state,
        ),
        "encode_run_state": (
            "the private dex_agents_openai_agents._messages.encode_run_state",
            _messages.encode_run_state,
        ),
    },
)
