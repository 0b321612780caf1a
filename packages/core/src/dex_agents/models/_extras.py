"""A clear error when an optional provider SDK is missing."""

from __future__ import annotations


def missing_extra_error(package: str, extra: str) -> ImportError:
    return ImportError(
        f"this model client needs the {package!r} package; install it with "
        f"`pip install 'dex-agents[{extra}]'`"
    )
