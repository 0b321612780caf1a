"""Run Claude through Anthropic's Python SDK as a durable dex-agents session."""

from importlib.metadata import version as _version

__version__ = _version("dex-agents-claude-sdk")

__all__ = ["__version__"]
