# A deprecated path, for type checkers: at run time it imports as the module below, with
# a DeprecationWarning, for one release (dex_agents._deprecation.MOVED_MODULES).
from dex_agents.testing._mcp_transports import *  # noqa: F403
