"""Deprecated: ``dex_agents_claude_sdk.runner`` is private now.

Import its public names from ``dex_agents_claude_sdk``. Its names still import from here,
with a ``DeprecationWarning``, until the next release.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dex_agents.runner import deprecated_aliases
from dex_agents_claude_sdk import _runner

if TYPE_CHECKING:
    from dex_agents_claude_sdk._runner import DEFAULT_MAX_TOKENS as DEFAULT_MAX_TOKENS
    from dex_agents_claude_sdk._runner import ClaudeRunner as ClaudeRunner
    from dex_agents_claude_sdk._runner import ClientFactory as ClientFactory
    from dex_agents_claude_sdk._runner import client_from_environment as client_from_environment

__getattr__ = deprecated_aliases(
    __name__,
    {
        "DEFAULT_MAX_TOKENS": (
            "dex_agents_claude_sdk.DEFAULT_MAX_TOKENS",
            _runner.DEFAULT_MAX_TOKENS,
        ),
        "ClaudeRunner": ("dex_agents_claude_sdk.ClaudeRunner", _runner.ClaudeRunner),
        "ClientFactory": ("dex_agents_claude_sdk.ClientFactory", _runner.ClientFactory),
        "client_from_environment": (
            "the private dex_agents_claude_sdk._runner.client_from_environment",
            _runner.client_from_environment,
        ),
    },
)
