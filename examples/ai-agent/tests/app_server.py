"""The app served over real HTTP: uvicorn on loopback in a background thread, its
``AgentHost`` running the embedded engine and an in-process Worker, the mock model."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine, Sequence
from concurrent.futures import Future
from typing import Any

import httpx
import uvicorn

from dex_agents import AgentHost
from dex_agents.testing import find_free_loopback_ports
from dex_agents_ai_agent import ToolCatalog, create_ai_agent_flow, create_app
from dex_agents_ai_agent.security import TrustSettings
from dex_agents_ai_agent.tools import McpServerConfig

SECRET = "sk-test-secret-value-never-in-a-response"
GROQ_SECRET = "gsk-test-secret-value-never-in-a-response"
ENVIRON = {
    "OPENAI_API_KEY": SECRET,
    "GROQ_API_KEY": GROQ_SECRET,
    "DEX_AGENT_CUSTOM_BASE_URL": "http://127.0.0.1:9/v1",
}


class RunningApp:
    """The app at ``base_url``; ``call`` runs a coroutine on the server's event loop."""

    def __init__(
        self,
        server_address: str | None = None,
        mcp_servers: Sequence[McpServerConfig] = (),
        trust: TrustSettings | None = None,
    ) -> None:
        """With ``server_address``, the app runs no Worker: Worker processes serve it.
        With ``mcp_servers``, their tools come over MCP instead of the in-process demo."""
        catalog = ToolCatalog.build(mcp_servers, demo_servers=not mcp_servers)
        self.catalog = catalog
        flow = create_ai_agent_flow(catalog, retained_message_limit=4)
        if server_address is None:
            self.host = AgentHost(flow)
        else:
            self.host = AgentHost(flow, server_address=server_address, worker=False)
        self.trust = trust or TrustSettings()
        app = create_app(self.host, catalog, retained_messages=4, environ=ENVIRON, trust=self.trust)
        (port,) = find_free_loopback_ports(1)
        self.base_url = f"http://127.0.0.1:{port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        self.loop.run_until_complete(self.server.serve())

    def start(self) -> None:
        self.thread.start()
        ready = threading.Event()

        def check() -> None:
            if self.server.started:
                ready.set()
            elif self.thread.is_alive():
                self.loop.call_later(0.05, check)

        self.loop.call_soon_threadsafe(check)
        if not ready.wait(120):
            raise RuntimeError("the app did not start")

    def wait_until_tools_listed(self) -> None:
        """The page answers before the MCP servers' tools are listed; wait for them."""
        with httpx.Client(base_url=self.base_url, timeout=30) as client:
            for _ in range(1200):
                if not client.get("/products/ai-agent/portal").json()["toolsPending"]:
                    return
                time.sleep(0.1)  # polling until the background listing is done
        raise RuntimeError("the MCP servers' tools were not listed")

    @property
    def csrf_headers(self) -> dict[str, str]:
        """What a script (not the page) sends with a mutation: the page's CSRF token."""
        return {"x-csrf-token": self.trust.csrf_token}

    def call(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return self.submit(coroutine).result(60)

    def submit(self, coroutine: Coroutine[Any, Any, Any]) -> Future[Any]:
        """Runs ``coroutine`` on the server's loop; the future can be awaited elsewhere."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def sessions_delete(self, workflow_id: str, message_id: str) -> Future[Any]:
        """Deletes a queued message behind the page's back, as another tab would."""
        return self.submit(self.host.client().delete_queued_message(workflow_id, message_id))

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(60)
