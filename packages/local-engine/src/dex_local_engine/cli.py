"""The ``dex-local-engine`` command line: ``dex-local-engine serve`` and ``vacuum``."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Sequence
from datetime import timedelta
from importlib.metadata import version
from pathlib import Path

from dex_local_engine._rules.attribute_stores import load_config
from dex_local_engine._rules.durability import DEFAULT_DURABILITY, Durability
from dex_local_engine._rules.limits import (
    DEFAULT_ATTRIBUTE_CACHE_FLOWS,
    DEFAULT_MAX_CONCURRENT_STREAMS_PER_WORKER,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_MAX_VALUE_BYTES,
    EngineLimits,
)
from dex_local_engine._server import EngineServer, EngineStartError
from dex_local_engine._transport.auth import TOKEN_ENVIRONMENT_VARIABLE, read_token
from dex_local_engine._transport.probes import ProbeServer


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
        "--health-port",
        type=_port,
        default=None,
        help="serve HTTP probes on this port: GET /livez (the engine's loop answers) and "
        "GET /readyz (serving, not stopping), 200 or 503; default: no probes",
    )
    serve.add_argument(
        "--health-host",
        default="127.0.0.1",
        help="address the probes listen on (default 127.0.0.1; 0.0.0.0 for a container)",
    )
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
        "--closed-flow-retention",
        type=duration,
        default=None,
        metavar="DURATION",
        help="delete Flows that closed longer ago than this (e.g. 30d, 12h, 15m, 0s), with "
        "their history, Attributes and Stream messages; checked at start and then every "
        "tenth of it (1 s to 10 min); default: keep closed Flows",
    )
    serve.add_argument(
        "--attribute-cache-flows",
        type=_positive,
        default=DEFAULT_ATTRIBUTE_CACHE_FLOWS,
        help="most Flows whose Attributes stay in memory (the most recently changed); "
        "the others load from the database when needed",
    )
    serve.add_argument(
        "--attribute-store-config",
        default=None,
        help="Attribute Stores Flows may select, in Dex Server's configuration shape "
        "(attributeStore.stores.NAME: type sqlite, dsn, tableName), JSON or YAML; "
        "without it the engine knows none",
    )
    vacuum = commands.add_parser(
        "vacuum",
        help="compact a database the engine does not have open, and make it return the "
        "pages later purges free (databases made before incremental vacuum)",
    )
    vacuum.add_argument("--db", required=True, help="SQLite database file")
    return parser


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(text: str) -> timedelta:
    """``30d``, ``12h``, ``15m``, ``90s`` or plain seconds, as a ``timedelta``."""
    cleaned = text.strip().lower()
    unit = _UNITS.get(cleaned[-1:])
    number = cleaned[:-1] if unit is not None else cleaned
    try:
        value = float(number) * (unit or 1)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a duration like 30d, 12h or 90s"
        ) from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative")
    return timedelta(seconds=value)


def _vacuum(database: str) -> int:
    import sqlite3

    if not Path(database).exists():
        print(f"dex-local-engine: no database {database!r}", file=sys.stderr)
        return 2
    before = Path(database).stat().st_size
    with contextlib.closing(sqlite3.connect(database, isolation_level=None)) as db:
        db.execute("PRAGMA busy_timeout=5000")
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.execute("PRAGMA auto_vacuum=INCREMENTAL")
        db.execute("VACUUM")
    print(f"vacuumed {database}: {before} -> {Path(database).stat().st_size} bytes")
    return 0


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
            attribute_cache_flows=args.attribute_cache_flows,
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
            closed_flow_retention=args.closed_flow_retention,
        )
    except (OSError, ValueError, EngineStartError) as error:
        print(f"dex-local-engine: {error}", file=sys.stderr, flush=True)
        return 2
    state: dict[str, str | None] = {"ready": "starting"}
    probes = None
    if args.health_port is not None:
        probes = ProbeServer(
            args.health_host, args.health_port, live=lambda: None, ready=lambda: state["ready"]
        )
        try:
            await probes.start()
        except OSError as error:
            print(f"dex-local-engine: {error}", file=sys.stderr, flush=True)
            return 2
    try:
        return await _serve_until_stopped(server, database, state)
    finally:
        if probes is not None:
            await probes.stop()


async def _serve_until_stopped(
    server: EngineServer, database: str, state: dict[str, str | None]
) -> int:
    try:
        address = await server.start()
    except EngineStartError as error:
        print(f"dex-local-engine: {error}", file=sys.stderr, flush=True)
        return 2
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    state["ready"] = None
    print(f"dex-local-engine ready on {address} (database {database})", flush=True)
    try:
        await stop.wait()
    finally:
        state["ready"] = "stopping"
        logging.getLogger("dex_local_engine").info("stopping")
        await server.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = build_parser().parse_args(argv)
    if args.command == "vacuum":
        return _vacuum(args.db)
    logging.basicConfig(
        level=args.log_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return asyncio.run(_serve(args))


if __name__ == "__main__":
    sys.exit(main())
