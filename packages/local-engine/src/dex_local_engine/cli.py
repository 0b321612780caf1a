"""The ``dex-local-engine`` command line (``serve`` arrives with the engine)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from dex_local_engine import __version__


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dex-local-engine")
    parser.add_argument("--version", action="version", version=f"dex-local-engine {__version__}")
    parser.parse_args(argv)
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
