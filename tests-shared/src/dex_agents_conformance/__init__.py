"""The dex-agents runner conformance suite, as a pytest plugin for adapter maintainers."""

from importlib.metadata import version as _version

__version__ = _version("dex-agents-conformance")

__all__ = ["__version__"]
