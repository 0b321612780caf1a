"""The ``dex-local-engine`` command line: ``dex-local-engine serve``."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence
from importlib.metadata import version

from dex_local_engine._rules.attribute_stores import load_config
from dex_local_engine._rules.durability import DEFAULT_DURABILITY, Durability
from dex_local_engine._rules.limits import (
    DEFAULT_MAX_CONCURRENT_STREAMS_PER_WORKER,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_MAX_VALUE_BYTES,
    EngineLimits,
)
from dex_local_engine._server import EngineServer, EngineStartError
from dex_local_engine._transport.auth import TOKEN_ENVIRONMENT_VARIABLE, read_token


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port {value} is out of range 0-65535")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The ``dex-local-engine`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="dex-local-engine",
        description="A local Dex engine: the Dex server protocol over SQLite.",
    )
    parser.add_argument(
        "--version", action="version", version=f"dex-local-engine {version('dex-local-engine')}"
    )
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
    serve.add_argument(
        "--token-file",
        default=None,
        help=f"file holding the bearer token every call must carry; without it, "
        f"${TOKEN_ENVIRONMENT_VARIABLE} when set, else no authentication",
    )
    serve.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="allow listening on a non-loopback address without a token (any peer "
        "that reaches it can read and drive every session)",
    )
    serve.add_argument(
        "--max-value-bytes",
        type=_positive,
        default=DEFAULT_MAX_VALUE_BYTES,
        help="largest value a request or a Step result may carry",
    )
    serve.add_argument(
        "--max-request-bytes",
        type=_positive,
        default=DEFAULT_MAX_REQUEST_BYTES,
        help="largest gRPC message the engine receives",
    )
    serve.add_argument(
        "--max-streams-per-worker",
        type=_positive,
        default=DEFAULT_MAX_CONCURRENT_STREAMS_PER_WORKER,
        help="most open task streams of one Worker",
    )
    serve.add_argument(
        "--attribute-store-config",
        default=None,
        help="Attribute Stores Flows may select, in Dex Server's configuration shape "
        "(attributeStore.stores.NAME: type sqlite, dsn, tableName), JSON or YAML; "
        "without it the engine knows none",
    )
    return parser


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value} is not positive")
    return value


async def _serve(args: argparse.Namespace) -> int:
    host, port, database = args.host, args.port, args.db
    try:
        token = read_token(args.token_file)
        stores = load_config(args.attribute_store_config) if args.attribute_store_config else []
        limits = EngineLimits(
            max_value_bytes=args.max_value_bytes,
            max_request_bytes=args.max_request_bytes,
            max_concurrent_streams_per_worker=args.max_streams_per_worker,
        )
        server = EngineServer(
            database,
            host,
            port,
            args.durability,
            limits=limits,
            token=token,
            allow_insecure=args.insecure_no_auth,
            attribute_stores=stores,
        )
    except (OSError, ValueError, EngineStartError) as error:
        print(f"dex-local-engine: {error}", file=sys.stderr, flush=True)
        return 2
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
    """Run the command line; returns the exit status."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return asyncio.run(_serve(args))


if __name__ == "__main__":
    sys.exit(main())
