"""The ``dex-agents`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from dex_agents._demo import add_demo_arguments, run_demo_command
from dex_agents._versions import (
    CORE,
    DEX_SDK,
    installed_line_versions,
    line_mismatches,
    mismatch_message,
)


def installed_versions() -> dict[str, str | None]:
    """Every installed distribution on the version line, then the Dex SDK (None when absent)."""
    found: dict[str, str | None] = dict(installed_line_versions())
    try:
        found[DEX_SDK] = version(DEX_SDK)
    except PackageNotFoundError:
        found[DEX_SDK] = None
    return found


def _cmd_version(_: argparse.Namespace) -> int:
    """List what is installed; exit 1 when a distribution is off the core's version line."""
    line = installed_line_versions()
    mismatched = line_mismatches(line)
    for dist, ver in installed_versions().items():
        if ver is None:
            continue
        note = f"  (does not match dex-agents {line.get(CORE)})" if dist in mismatched else ""
        print(f"{dist:<26} {ver}{note}")
    for dist, ver in mismatched.items():
        print(mismatch_message(dist, ver, line.get(CORE)), file=sys.stderr)
    return 1 if mismatched else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dex-agents", description="Durable agent sessions on the Dex engine."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    show = commands.add_parser("version", help="show the installed dex-agents packages")
    show.set_defaults(handler=_cmd_version)
    demo = commands.add_parser(
        "demo",
        help="chat with a durable support agent on an embedded engine",
        description="Chat with a durable Stepwise support agent on an embedded local engine. "
        "Without an API key it uses a scripted demo model.",
    )
    add_demo_arguments(demo)
    demo.set_defaults(handler=_cmd_demo)
    return parser


def _cmd_demo(args: argparse.Namespace) -> int:
    return run_demo_command(args)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.handler(args))


if __name__ == "__main__":
    sys.exit(main())
