"""The ``dex-local-engine`` command line: ``dex-local-engine serve``."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence

from dex_local_engine import __version__
from dex_local_engine.durability import DEFAULT_DURABILITY, Durability
from dex_local_engine.server import EngineServer, EngineStartError


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port {value} is out of range 0-65535")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dex-local-engine",
        description="A local Dex engine: the Dex server protocol over SQLite.",
    )
    parser.add_argument("--version", action="version", version=f"dex-local-engine {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the engine until SIGTERM or Ctrl+C")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on")
    serve.add_argument("--port", type=_port, default=8801, help="port, 0 for any free one")
    serve.add_argument(
        "--db",
        default=":memory:",
        help="SQLite database file, created if missing; :memory: keeps nothing (default)",
    )
    serve.add_argument(
        "--durability",
        default=DEFAULT_DURABILITY.value,
        choices=[mode.value for mode in Durability],
        help="process-crash (default): SQLite synchronous=NORMAL, a commit survives the "
        "engine process crashing; power-loss: synchronous=FULL, an fsync per commit",
    )
    serve.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    return parser


async def _serve(host: str, port: int, database: str, durability: str) -> int:
    server = EngineServer(database, host, port, durability)
    try:
        address = await server.start()
    except EngineStartError as error:
        print(f"dex-local-engine: {error}", file=sys.stderr, flush=True)
        return 2
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    print(f"dex-local-engine ready on {address} (database {database})", flush=True)
    try:
        await stop.wait()
    finally:
        logging.getLogger("dex_local_engine").info("stopping")
        await server.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return asyncio.run(_serve(args.host, args.port, args.db, args.durability))


if __name__ == "__main__":
    sys.exit(main())
