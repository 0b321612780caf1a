"""Moved: the patches of dex-python-sdk live in dex-agents (``dex_agents._sdk_patches``).

Every patch of the SDK, and the one read of its internals, is now in one module of the
core behind one version gate, and ``dex_agents.AgentHost`` applies them
(``SdkPatches``, ``EmbeddedEngineOptions.transport``). This module re-exports them for
one release, with a ``DeprecationWarning``; it needs ``dex-agents`` installed. The
in-process transport itself stays in the engine: ``dex_local_engine.in_process``.
"""

from __future__ import annotations

import warnings

try:
    from dex_agents._sdk_patches import (
        PATCHED_SDK_VERSION,
        memoize_sdk_version,
        route_in_process_channels,
    )
except ImportError as error:  # pragma: no cover - dex-local-engine installed alone
    raise ImportError(
        "dex_local_engine.sdk_patches moved to dex-agents: pip install dex-agents, and let"
        " dex_agents.AgentHost apply the patches (its sdk_patches option)"
    ) from error

__all__ = ["PATCHED_SDK_VERSION", "memoize_sdk_version", "route_in_process_channels"]

warnings.warn(
    "dex_local_engine.sdk_patches is deprecated: dex_agents.AgentHost applies the SDK patches"
    " (SdkPatches, EmbeddedEngineOptions.transport); the module goes away in the next release",
    DeprecationWarning,
    stacklevel=2,
)
