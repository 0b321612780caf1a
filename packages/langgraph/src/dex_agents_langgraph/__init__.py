"""Run a LangGraph / LangChain agent as a durable dex-agents session."""

from importlib.metadata import version as _version

__version__ = _version("dex-agents-langgraph")

__all__ = ["__version__"]
