"""The one version line: every installed ``dex-agents-*`` distribution at the core's version.

The core, the local engine, every adapter and the conformance suite are released together
at one version, and an adapter pins ``dex-agents==`` that version. An installer enforces
the pin, but an adapter built with a stale pin or installed with ``--no-deps`` slips past
it; so ``dex-agents version`` lists and flags every distribution off the line, and an
adapter warns once, on import, when its version is not the core's.
"""

from __future__ import annotations

import re
import warnings
from importlib.metadata import PackageNotFoundError, distributions, version

CORE = "dex-agents"
# On the version line without the ``dex-agents-`` prefix.
ENGINE = "dex-local-engine"
# Shown beside the line, which pins it exactly.
DEX_SDK = "dex-python-sdk"

_warned: set[str] = set()


class VersionMismatchWarning(UserWarning):
    """A dex-agents distribution is installed at another version than the core."""

    __module__ = "dex_agents.runner"  # the public import path, as warnings filters name it


def canonical_name(name: str) -> str:
    """The normalized distribution name (PEP 503): lower case, runs of ``-_.`` as ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def on_version_line(name: str) -> bool:
    name = canonical_name(name)
    return name in (CORE, ENGINE) or name.startswith(f"{CORE}-")


def installed_line_versions() -> dict[str, str]:
    """Every installed distribution on the version line, core first, then by name.

    Found by name, so a third-party ``dex-agents-*`` adapter is checked as well.
    """
    found: dict[str, str] = {}
    for distribution in distributions():
        name = canonical_name(distribution.metadata["Name"] or "")
        if on_version_line(name):
            # The first one on sys.path is the one Python imports.
            found.setdefault(name, distribution.version)
    return dict(sorted(found.items(), key=lambda item: (item[0] != CORE, item[0])))


def line_mismatches(versions: dict[str, str]) -> dict[str, str]:
    """The distributions whose version is not the core's (all of them without a core)."""
    core = versions.get(CORE)
    return {name: found for name, found in versions.items() if found != core}


def mismatch_message(distribution: str, found: str, core: str | None) -> str:
    if core is None:
        return f"{distribution} {found} is installed without dex-agents (dex-agents=={found})"
    return (
        f"{distribution} {found} is installed with dex-agents {core}; the packages are released "
        f"together, so install both at one version (pip install '{distribution}=={core}')"
    )


def warn_if_off_version_line(distribution: str) -> None:
    """Warn once per process when ``distribution`` is installed at another version than the core.

    Adapters call this on import. A distribution that is not installed (a source checkout
    on ``sys.path``) has no version to compare, so it is left alone.
    """
    name = canonical_name(distribution)
    if name in _warned:
        return
    _warned.add(name)
    try:
        found = version(name)
    except PackageNotFoundError:
        return
    try:
        core: str | None = version(CORE)
    except PackageNotFoundError:
        core = None
    if found != core:
        warnings.warn(mismatch_message(name, found, core), VersionMismatchWarning, stacklevel=2)
