"""A client-only process, as a web process is: send one message to a session, print the reply.

``python client.py SESSION_ID "Where is my order?"`` starts the session when it is new.
The host reads ``DEX_SERVER_ADDRESS`` and ``DEX_SERVER_TOKEN``; it runs no Worker, so
the Worker processes must be up for the reply to come.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys

import dex
from orders_agent import flow

from dex_agents import AgentHost


async def main(session_id: str, text: str) -> None:
    async with AgentHost(flow, worker=False) as host:
        sessions = host.client()
        with contextlib.suppress(dex.FlowAlreadyStartedError):  # it exists: continue it
            await sessions.start_session(session_id)
        await sessions.wait_for_turn(session_id)
        await sessions.send_user_message_and_wait(session_id, text)
        snapshot = await sessions.snapshot(session_id)  # committed: it has the reply
        print(snapshot.messages[-1].text)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python client.py SESSION_ID MESSAGE")
    asyncio.run(main(sys.argv[1], sys.argv[2]))
