"""The UI streams page's app (``docs/concepts/ui-streams.md``) runs as written: uvicorn serves
it, a chat turn streams."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import httpx

from dex_agents.testing import find_free_loopback_ports, poll_until, readme_examples

PAGE = Path(__file__).resolve().parents[4] / "docs/concepts/ui-streams.md"


def readme_app() -> str:
    (example,) = readme_examples(PAGE)  # the page's one runnable block
    return example.code


def test_the_app_is_under_40_lines() -> None:
    assert len(readme_app().strip().splitlines()) < 40


async def test_the_readme_app_streams_a_chat_turn(tmp_path: Path) -> None:
    (tmp_path / "chat_app.py").write_text(readme_app(), encoding="utf-8")
    (port,) = find_free_loopback_ports(1)
    server = await asyncio.create_subprocess_exec(
        *[
            sys.executable,
            "-m",
            "uvicorn",
            "chat_app:app",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=tmp_path,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=base, timeout=60) as http:

            async def answers() -> bool | None:
                try:
                    return (await http.get("/api/chat/s1")).status_code == 403 or None
                except httpx.TransportError:
                    assert server.returncode is None, "the README app exited"
                    return None

            await poll_until(answers, description="the README app answers")
            message = {"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
            body = {"id": "chat-1", "messages": [message]}
            assert (await http.post("/api/chat", json=body)).status_code == 403
            response = await http.post("/api/chat", json=body, headers={"x-user": "demo"})
            assert response.status_code == 200
            parts = [
                json.loads(line[6:])
                for line in response.text.splitlines()
                if line.startswith("data: {")
            ]
            text = "".join(p["delta"] for p in parts if p["type"] == "text-delta")
            assert text == "You said: hi"
            assert [p for p in parts if p["type"] == "finish"] == [
                {"type": "finish", "finishReason": "stop"}
            ]
            listing = (await http.get("/api/chat/chat-1", headers={"x-user": "demo"})).json()
            assert [m["role"] for m in listing["messages"]] == ["user", "assistant"]
    finally:
        server.terminate()
        await asyncio.wait_for(server.wait(), 30)
