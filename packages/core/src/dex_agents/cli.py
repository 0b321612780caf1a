"""The ``dex-agents`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from dex_agents.demo import add_demo_arguments, run_demo_command

# Every distribution of the project, plus the Dex SDK it is pinned to. Operators
# install the core and one adapter at one version; `version` shows what they got.
DISTRIBUTIONS = (
    "dex-agents",
    "dex-local-engine",
    "dex-agents-openai-agents",
    "dex-agents-langgraph",
    "dex-agents-pydantic-ai",
    "dex-agents-claude-sdk",
    "dex-agents-conformance",
    "dex-python-sdk",
)


def installed_versions() -> dict[str, str | None]:
    """Map each known distribution to its installed version, or None when absent."""
    found: dict[str, str | None] = {}
    for dist in DISTRIBUTIONS:
        try:
            found[dist] = version(dist)
        except PackageNotFoundError:
            found[dist] = None
    return found


def _cmd_version(_: argparse.Namespace) -> int:
    versions = installed_versions()
    core = versions["dex-agents"]
    mismatched = False
    for dist, ver in versions.items():
        if ver is None:
            continue
        note = ""
        if (dist.startswith("dex-agents") or dist == "dex-local-engine") and ver != core:
            note = f"  (does not match dex-agents {core})"
            mismatched = True
        print(f"{dist:<26} {ver}{note}")
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
