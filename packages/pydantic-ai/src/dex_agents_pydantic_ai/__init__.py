"""Run a Pydantic AI agent as a durable dex-agents session."""

from importlib.metadata import version as _version

__version__ = _version("dex-agents-pydantic-ai")

__all__ = ["__version__"]
