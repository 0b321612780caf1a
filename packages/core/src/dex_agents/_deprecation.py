"""Old import paths that keep working for one release, each with a ``DeprecationWarning``.

dex-agents 0.1 made its implementation modules private (``dex_agents._host``,
``dex_agents.session._turn``, ...) and gave each audience one public module:
``dex_agents`` for applications, ``dex_agents.runner`` for runner authors,
``dex_agents.values`` for the wire values and ``dex_agents.testing`` for tests.
Two things keep older code running until the next release:

* ``MOVED_MODULES``: an old module path imports the module it became (the same
  module object), through a finder that ``dex_agents`` installs, and warns once.
  Stub files (``.pyi``) at some of the old paths let type checkers see them too.
* ``moved_names``: a module ``__getattr__`` for the names a public module no longer
  exports; each access imports the name from its new home and warns.

``deprecated_aliases`` does the same as ``moved_names`` for a runner package's own
old names (objects it already holds).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType

__all__ = [
    "MOVED_MODULES",
    "deprecated_aliases",
    "install_moved_module_finder",
    "moved_names",
]

REMOVAL = "the old path goes away in the next release"


def _where(new: str) -> str:
    """How a warning names a new home: a public path, or a note that it became private."""
    if any(part.startswith("_") for part in new.split(".")):
        return f"it is internal now ({new}); {REMOVAL}"
    return f"use {new}; {REMOVAL}"


def _moved(package: str, names: str, public: str) -> dict[str, tuple[str, str]]:
    return {f"{package}.{name}": (f"{package}._{name}", public) for name in names.split()}


MOVED_MODULES: Mapping[str, tuple[str, str]] = {
    # The modules outside code could import (they were not on the old internal list), and
    # the few internal ones that the core's MCP and Stepwise code still imports.
    **_moved(
        "dex_agents",
        "adapter_support builtin_tools compaction_support decode_cache plans texts"
        " tool_task_routing versions",
        "dex_agents.runner",
    ),
    **_moved("dex_agents", "compaction", "dex_agents and dex_agents.runner"),
    **_moved("dex_agents", "session_settings", "dex_agents.values"),
    **_moved("dex_agents", "storage", "dex_agents.AgentSessionOptions"),
    "dex_agents.pull_streams": ("dex_agents._sdk_patches", "dex_agents.SdkPatches"),
    **_moved(
        "dex_agents.session",
        "approval_rules approvals builtin_rules cancellation changes committed_reads"
        " compaction_step control_reads events heartbeats interrupts options persistence"
        " plan_rules question_rules question_supersession questions read_rules routing"
        " steering timers tool_rules tool_task_rules tool_tasks tracing_hooks"
        " turn_control_rpcs turn_control_rules turn_rules wait_cancellation",
        "dex_agents",
    ),
    **_moved(
        "dex_agents.models",
        "types scripted openai_responses anthropic_messages openai_chat litellm",
        "dex_agents.models",
    ),
    **_moved("dex_agents.tracing", "options spans", "dex_agents.tracing"),
    **_moved(
        "dex_agents.ui_stream",
        "chunks parts positions reader snapshots sse starlette tokens",
        "dex_agents.ui_stream",
    ),
    **_moved(
        "dex_agents.testing",
        "attributes compaction gates history http_endpoint mcp_server_2025 probe_flow readme"
        " runner_driver scenario_flow scenario_tasks script_playback scripted_runner scripts"
        " worker_fork_server worker_process",
        "dex_agents.testing",
    ),
    **_moved("dex_agents.testing", "mcp_transports", "dex_agents.testing.mcp_server"),
}
"""Old module path -> the private module it became, and the public place to use instead."""


class _MovedModuleLoader(importlib.abc.Loader):
    """Loads an old path as the module it became: the same object, under both names."""

    def __init__(self, new: str, public: str) -> None:
        self._new = new
        self._public = public

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None  # a placeholder, replaced in sys.modules by exec_module

    def exec_module(self, module: ModuleType) -> None:
        old = module.__name__
        moved = importlib.import_module(self._new)
        warnings.warn(
            f"module {old} is deprecated: use {self._public} (the module is internal now,"
            f" {self._new}); {REMOVAL}",
            DeprecationWarning,
            stacklevel=2,
        )
        # The import system hands out whatever sys.modules holds once this returns, so
        # the placeholder (and its spec) never reaches the caller.
        sys.modules[old] = moved


class _MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Finds the old paths of ``MOVED_MODULES`` that have no file of their own."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        moved = MOVED_MODULES.get(fullname)
        if moved is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _MovedModuleLoader(*moved))


_FINDER = _MovedModuleFinder()


def install_moved_module_finder() -> None:
    """Let the old paths of ``MOVED_MODULES`` import (idempotent; ``dex_agents`` calls it)."""
    if _FINDER not in sys.meta_path:
        # Last: a module that does exist at an old path always wins.
        sys.meta_path.append(_FINDER)


def moved_names(
    module_name: str, moved: Mapping[str, str | tuple[str, str]]
) -> Callable[[str], object]:
    """A module ``__getattr__`` serving names that moved out of ``module_name``.

    ``moved`` maps each old name to the module that has it now (under the same name),
    or to that module and the advice the warning gives instead of the new path. The
    name is imported from there when asked for (so an optional extra loads only then),
    with a ``DeprecationWarning``.
    """

    def module_getattr(name: str) -> object:
        entry = moved.get(name)
        if entry is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        home, advice = (entry, _where(f"{entry}.{name}")) if isinstance(entry, str) else entry
        value = getattr(importlib.import_module(home), name)
        warnings.warn(
            f"{module_name}.{name} is deprecated: {advice}", DeprecationWarning, stacklevel=2
        )
        return value

    return module_getattr


def deprecated_aliases(
    module_name: str, aliases: Mapping[str, tuple[str, object]]
) -> Callable[[str], object]:
    """A module ``__getattr__`` that serves each old name with a ``DeprecationWarning``.

    ``aliases`` maps an old name to the new name and its object. Assign the
    result to ``__getattr__`` in the module that used to define the old names.
    """

    def module_getattr(name: str) -> object:
        alias = aliases.get(name)
        if alias is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        new_name, value = alias
        warnings.warn(
            f"{module_name}.{name} is deprecated; use {new_name}",
            DeprecationWarning,
            stacklevel=2,
        )
        return value

    return module_getattr
