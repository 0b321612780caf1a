"""The module paths of ``dex_agents.mcp`` before 0.3, kept one release with a warning."""

from __future__ import annotations

import importlib
import warnings
from typing import Any

__all__ = ["forward"]


def forward(old_module: str, name: str, new_modules: tuple[str, ...]) -> Any:
    """``name`` from the first of ``new_modules`` that has it, with a ``DeprecationWarning``.

    Public names point at ``dex_agents.mcp``; a name only the implementation has keeps
    working too, for this release.
    """
    if name.startswith("__"):
        raise AttributeError(name)
    import dex_agents.mcp as public

    for module_name in new_modules:
        module = importlib.import_module(module_name)
        if hasattr(module, name):
            where = "dex_agents.mcp" if name in public.__all__ else module_name
            warnings.warn(
                f"{old_module}.{name} moved: import it from {where}; "
                f"the module {old_module} goes away in the next release",
                DeprecationWarning,
                stacklevel=3,
            )
            return getattr(module, name)
    raise AttributeError(f"module {old_module!r} has no attribute {name!r}")
