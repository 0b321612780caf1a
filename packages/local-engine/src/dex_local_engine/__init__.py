"""A local Dex engine: the Dex server protocol over SQLite, for the unmodified dex-python-sdk."""

from importlib.metadata import version as _version

__version__ = _version("dex-local-engine")

__all__ = ["__version__"]
