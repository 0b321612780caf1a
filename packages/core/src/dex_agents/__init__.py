"""Durable agent sessions on the Dex durable execution engine."""

from importlib.metadata import version as _version

__version__ = _version("dex-agents")

__all__ = ["__version__"]
