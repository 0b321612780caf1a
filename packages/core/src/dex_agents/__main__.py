"""``python -m dex_agents``: the ``dex-agents`` command (``version``, ``demo``)."""

import sys

from dex_agents._cli import main

sys.exit(main())
