"""A local Dex engine: the Dex server protocol over SQLite, for the unmodified dex-python-sdk.

The public names are here; ``dex_local_engine.in_process`` (the in-process channel),
``dex_local_engine.sdk_patches`` (opt-in SDK patches) and ``dex_local_engine.cli`` (the
command line) are public modules too. Everything under a leading underscore is the
engine's implementation, in layers that import only downwards (see the local engine page's
Structure section and ``.importlinter``).
"""

from importlib.metadata import version as _version

from dex_local_engine._rules.attribute_stores import AttributeStore
from dex_local_engine._rules.durability import Durability
from dex_local_engine._rules.limits import SDK_MAX_RECEIVE_BYTES, EngineLimits
from dex_local_engine._server import EngineServer, EngineStartError, LocalEngine
from dex_local_engine._transport.auth import TOKEN_ENVIRONMENT_VARIABLE, read_token
from dex_local_engine._transport.probes import ProbeCheck, ProbeServer
from dex_local_engine.attempt_progress import StepAttemptProgress, recovery_attempt_progress

__version__ = _version("dex-local-engine")

__all__ = [
    "SDK_MAX_RECEIVE_BYTES",
    "TOKEN_ENVIRONMENT_VARIABLE",
    "AttributeStore",
    "Durability",
    "EngineLimits",
    "EngineServer",
    "EngineStartError",
    "LocalEngine",
    "ProbeCheck",
    "ProbeServer",
    "StepAttemptProgress",
    "__version__",
    "read_token",
    "recovery_attempt_progress",
]
