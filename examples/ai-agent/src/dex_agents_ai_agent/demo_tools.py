"""The credential-free demo servers' tools (search, slack, google_docs): plain async
functions, shared by the stdio MCP demo servers and the in-process function tools.

Kept free of heavy imports: each stdio demo server imports only this and the ``mcp``
SDK, so the three start quickly beside the app.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping


async def _web_search(query: str) -> str:
    return f"Demo search results for {query!r}: Dex runs durable Flows; agents survive restarts."


async def _search_messages(query: str) -> str:
    return f"Demo Slack matches for {query!r}: #general 'deploy at 5pm', #ops 'all green'."


async def _post_message(channel: str, message: str) -> str:
    return f"Demo Slack message posted to {channel}: {message}"


async def _search_documents(query: str) -> str:
    return f"Demo Google Docs matches for {query!r}: 'Q3 plan', 'Onboarding notes'."


async def _create_document(title: str, content: str) -> str:
    return f"Demo Google Doc {title!r} created with {len(content)} characters."


DemoFunction = Callable[..., Awaitable[str]]

# Each demo server's tools: the function (its name without the underscore is the tool's),
# the description, and whether it only reads.
DEMO_SERVER_FUNCTIONS: Mapping[str, tuple[tuple[DemoFunction, str, bool], ...]] = {
    "search": ((_web_search, "Search the web (demo results).", True),),
    "slack": (
        (_search_messages, "Search Slack messages (demo).", True),
        (
            _post_message,
            "Post a message to a Slack channel (demo; changes an external system).",
            False,
        ),
    ),
    "google_docs": (
        (_search_documents, "Search Google Docs (demo).", True),
        (_create_document, "Create a Google Doc (demo; changes an external system).", False),
    ),
}
