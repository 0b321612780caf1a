"""``dex-agents demo``: a durable support agent in the terminal, on an embedded engine.

The demo starts the local Dex engine in process (its SQLite database under the
user's data directory unless ``--db`` names one), an AsyncWorker, and a Stepwise
support agent with shop tools, ``ask_user`` and ``durable_wait``. Without an API
key it runs a scripted demo model; with ``OPENAI_API_KEY`` or
``ANTHROPIC_API_KEY`` it talks to that provider.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import secrets
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import platformdirs

if TYPE_CHECKING:
    from dex_agents._demo.chat import Chat
    from dex_agents.mcp import McpToolSource

__all__ = ["DemoOptions", "add_demo_arguments", "run_demo", "run_demo_command"]

_DATABASE_NAME = "demo.sqlite3"


@dataclass(frozen=True)
class DemoOptions:
    """What ``dex-agents demo`` was asked to do."""

    database: Path | None = None
    server_address: str | None = None
    session_id: str | None = None
    messages: tuple[str, ...] = ()
    auto_approve: bool = False
    provider: str | None = None
    model: str | None = None
    mcp_config: Path | None = None
    """A JSON file of MCP servers whose tools the agent also offers."""
    data_directory: Path = field(
        default_factory=lambda: Path(platformdirs.user_data_dir("dex-agents"))
    )


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        type=Path,
        help="SQLite database of the embedded engine (default: demo.sqlite3 in the "
        "user's data directory)",
    )
    parser.add_argument(
        "--server",
        metavar="HOST:PORT",
        default=os.environ.get("DEX_SERVER_ADDRESS") or None,
        help="use this Dex server instead of the embedded engine (default: "
        "$DEX_SERVER_ADDRESS when set); --db is then unused; a server that requires a "
        "bearer token gets $DEX_SERVER_TOKEN",
    )
    parser.add_argument("--session", help="resume this session ID (or start it under this ID)")
    parser.add_argument(
        "--message",
        action="append",
        default=[],
        metavar="TEXT",
        help="send TEXT without a prompt; repeat for several turns; exits when they finish",
    )
    parser.add_argument(
        "--auto-approve",
        action="store_true",
        help="approve every tool call that needs approval (for unattended runs)",
    )
    parser.add_argument(
        "--provider",
        choices=("scripted", "openai", "anthropic"),
        help="model provider (default: openai or anthropic when its API key is set, "
        "else the scripted demo model)",
    )
    parser.add_argument("--model", help="model name for the provider")
    parser.add_argument(
        "--mcp-config",
        type=Path,
        metavar="FILE",
        help='offer the tools of the MCP servers in FILE ({"servers": [...]}; see the README); '
        "needs the dex-agents[mcp] extra",
    )
    parser.add_argument("--verbose", action="store_true", help="log engine and Worker details")


async def _read_line(prompt: str) -> str | None:
    # A daemon thread, not the default executor: Ctrl-C must not wait for Enter.
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[str | None] = loop.create_future()

    def deliver(line: str | None) -> None:
        if not answer.done():
            answer.set_result(line)

    def read() -> None:
        try:
            line: str | None = input(prompt)
        except (EOFError, OSError, ValueError):
            line = None
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(deliver, line)

    threading.Thread(target=read, name="dex-agents-demo-input", daemon=True).start()
    return await answer


async def run_demo(options: DemoOptions, out: TextIO = sys.stdout) -> int:
    """Run the demo; 0 when every turn finished, 1 when one failed."""
    # Imported here so `dex-agents version` stays light.
    from dex_agents._demo.agent import DEMO_FLOW_TYPE, build_demo_flow, choose_demo_model
    from dex_agents._demo.chat import Chat
    from dex_agents._host import AgentHost

    model = choose_demo_model(options.provider, options.model)
    database = options.database or options.data_directory / _DATABASE_NAME
    state_directory = database.parent
    tool_sources = _mcp_tool_sources(options.mcp_config)
    flow = build_demo_flow(model.client, state_directory / "demo-shop.json", tool_sources)
    session_id = options.session_id or f"demo-{secrets.token_hex(4)}"
    interactive = not options.messages

    host = AgentHost(
        flow,
        database=database,
        server_address=options.server_address,
        blob_cache_directory=state_directory / "demo-blob-cache",
    )
    out.write(f"dex-agents demo: {model.label}\n")
    for source in tool_sources:
        names = ", ".join(tool.name for tool in await source.list_tools())
        out.write(f"MCP tools: {names or '(none; see the warnings)'}\n")
    if host.embedded:
        out.write(f"engine database: {database}\n")
    else:
        out.write(f"Dex server: {host.server_address}\n")
    async with host:
        chat = Chat(
            host.client(flow),
            session_id,
            prompt=_read_line,
            out=out,
            interactive=interactive,
            auto_approve=options.auto_approve,
            # A person at a terminal can type /cancel or /steer while a turn runs; piped
            # input stays in order, so a scripted answer is never taken for a command.
            reads_during_turns=interactive and sys.stdin.isatty(),
        )
        resumed = await chat.open()
        verb = "resumed" if resumed else "started"
        chat.say(f"session {session_id} {verb} (flow type {DEMO_FLOW_TYPE})")
        try:
            snapshot = await chat.snapshot()
            if resumed:
                chat.show_history(snapshot)
            if snapshot.state is not None and snapshot.state.active_turn_id is not None:
                chat.say("  (a turn is still running; following it)")
                for record in snapshot.tool_calls:
                    chat.say(f"  [tool] {record.tool_name} {record.status.value}")
                await chat.follow_turns(snapshot.state.turn_count)
            if interactive:
                await _converse(chat)
            else:
                for text in options.messages:
                    chat.say(f"you> {text}")
                    if not await chat.run_command(text):
                        await chat.send(text)
        finally:
            await chat.close()
        out.write(f"resume later with: dex-agents demo --session {session_id}\n")
        out.flush()
    return 1 if chat.failed_turns else 0


def _mcp_tool_sources(config: Path | None) -> list[McpToolSource]:
    if config is None:
        return []
    from dex_agents._demo.agent import DemoSetupError
    from dex_agents.mcp import McpToolSource, load_mcp_server_configs

    try:
        servers = load_mcp_server_configs(config)
    except ValueError as error:
        raise DemoSetupError(str(error)) from None
    return [McpToolSource(servers, resource_and_prompt_tools_enabled=True)]


async def _converse(chat: Chat) -> None:
    from dex_agents._demo.script import DEMO_HELP

    chat.say(DEMO_HELP)
    chat.say(
        "Commands: /plan TEXT plans before acting, /execute runs the plan, /steer TEXT "
        "redirects a turn, /cancel stops one, /quit leaves (the session stays in the database)."
    )
    while True:
        line = await chat.prompt("you> ")
        if line is None or line.strip() in ("/quit", "/exit"):
            return
        if not line.strip():
            continue
        if not await chat.run_command(line):
            await chat.send(line)


def run_demo_command(args: argparse.Namespace) -> int:
    """Entry point of ``dex-agents demo``."""
    logging.basicConfig(level=logging.INFO if args.verbose else logging.ERROR)
    options = DemoOptions(
        database=args.db,
        server_address=args.server,
        session_id=args.session,
        messages=tuple(args.message),
        auto_approve=args.auto_approve,
        provider=args.provider,
        model=args.model,
        mcp_config=args.mcp_config,
    )
    try:
        return asyncio.run(run_demo(options))
    except KeyboardInterrupt:
        print("\nstopped; the session stays in the database (resume with --session)")
        return 130
    except ImportError as error:
        print(f"dex-agents demo: {error}", file=sys.stderr)
        return 2
    except Exception as error:
        from dex_agents._demo.agent import DemoSetupError

        if not isinstance(error, DemoSetupError):
            raise
        print(f"dex-agents demo: {error}", file=sys.stderr)
        return 2
