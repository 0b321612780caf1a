"""``python -m dex_local_engine serve ...``."""

import sys

from dex_local_engine.cli import main

sys.exit(main())
