"""A clear error when an optional dependency (an extra of ``dex-agents``) is missing."""

from __future__ import annotations


def missing_extra_error(
    package: str, extra: str, needed_by: str = "this model client"
) -> ImportError:
    """The error to raise from ``except ImportError`` around an extra's import."""
    return ImportError(
        f"{needed_by} needs the {package!r} package; install it with "
        f"`pip install 'dex-agents[{extra}]'`"
    )
