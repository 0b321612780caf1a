"""Tool names and effects of MCP tools, and the ``_meta`` key of the idempotency key."""

from __future__ import annotations

import hashlib
import re

from mcp_types import ToolAnnotations

from dex_agents.runner import MCP_IDEMPOTENCY_KEY_META_KEY
from dex_agents.values import ToolEffect

__all__ = [
    "MAX_TOOL_NAME_LENGTH",
    "MCP_IDEMPOTENCY_KEY_META_KEY",
    "mcp_tool_name",
    "tool_effect_from_mcp_tool_annotations",
]


MAX_TOOL_NAME_LENGTH = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_HASH_LENGTH = 8


def mcp_tool_name(server: str, tool: str) -> str:
    """``<server>__<tool>`` with unsafe characters as ``_``, shortened with a hash past 64."""
    name = _UNSAFE.sub("_", f"{server}__{tool}")
    if len(name) <= MAX_TOOL_NAME_LENGTH:
        return name
    # The hash of the unshortened name keeps two long names with one prefix apart.
    digest = hashlib.sha256(f"{server}__{tool}".encode()).hexdigest()[:_HASH_LENGTH]
    return f"{name[: MAX_TOOL_NAME_LENGTH - _HASH_LENGTH - 1]}_{digest}"


def tool_effect_from_mcp_tool_annotations(annotations: ToolAnnotations | None) -> ToolEffect | None:
    """``read`` for ``readOnlyHint``, ``idempotent_write`` for ``idempotentHint``, else ``None``.

    ``None`` leaves the tool to the session's ``default_tool_effect``.
    """
    if annotations is None:
        return None
    if annotations.read_only_hint is True:
        return ToolEffect.READ
    if annotations.idempotent_hint is True:
        return ToolEffect.IDEMPOTENT_WRITE
    return None
