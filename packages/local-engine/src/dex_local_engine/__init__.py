"""A local Dex engine: the Dex server protocol over SQLite, for the unmodified dex-python-sdk."""

from importlib.metadata import version as _version

__version__ = _version("dex-local-engine")

from dex_local_engine.attempt_progress import StepAttemptProgress, recovery_attempt_progress
from dex_local_engine.auth import TOKEN_ENVIRONMENT_VARIABLE, read_token
from dex_local_engine.durability import Durability
from dex_local_engine.limits import SDK_MAX_RECEIVE_BYTES, EngineLimits
from dex_local_engine.server import EngineServer, EngineStartError, LocalEngine

__all__ = [
    "SDK_MAX_RECEIVE_BYTES",
    "TOKEN_ENVIRONMENT_VARIABLE",
    "Durability",
    "EngineLimits",
    "EngineServer",
    "EngineStartError",
    "LocalEngine",
    "StepAttemptProgress",
    "__version__",
    "read_token",
    "recovery_attempt_progress",
]
