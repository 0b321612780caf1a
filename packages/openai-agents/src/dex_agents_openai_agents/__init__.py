"""Run an OpenAI Agents SDK agent as a durable dex-agents session."""

from importlib.metadata import version as _version

__version__ = _version("dex-agents-openai-agents")

__all__ = ["__version__"]
