"""MCP tools in a Claude session: this runner has no code of its own for them.

MCP tools reach ``ClaudeRunner`` as ordinary tools: each tool of a
``dex_agents.mcp.McpToolSource`` wrapped with ``claude_tool(handler, name=...,
description=..., input_schema=...)`` (the README's "MCP tools"), whose handler calls
``call_tool`` with ``get_deferred_tool_execution().idempotency_key``. They are
deferred, given their policy (``call_policy``; merge ``McpToolSource.tool_policies()``
into the session's) and run in their tool Step like any other
(``dex_agents_claude_sdk._tools``).
"""
