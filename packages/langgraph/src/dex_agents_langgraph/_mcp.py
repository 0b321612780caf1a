"""MCP tools in a LangGraph session: this runner has no code of its own for them.

MCP tools reach a LangGraph agent as ordinary LangChain tools: a
``dex_agents.mcp.McpToolSource`` tool wrapped as a schema-only ``StructuredTool``
(the README's "MCP tools"), or a tool of ``langchain-mcp-adapters``. They are
deferred, given their policy (``call_policy``; merge ``McpToolSource.tool_policies()``
into the session's) and run in their tool Step like any other
(``dex_agents_langgraph._tools``), where ``idempotency_key_of(config)`` gives the
wrapper the key to send in the ``tools/call``'s ``_meta``.
"""
