"""Run-time shims that let Dex's Python example applications run on dex-python-sdk 1.23.0.

The examples are written for dex-python-sdk 0.2.0, whose wire protocol the engine
does not speak. The harness copies this file (and the SDK scenarios' shims, which it
builds on) into a temporary export of the examples, never into this repository's copy,
and a generated root ``conftest.py`` installs both before the examples are imported:

* everything ``_local_engine_shims.install()`` adds (the Client calls 0.2.0 had,
  ``go_to_multi``, Step instances where 1.23.0 takes Step classes, ...);
* ``FlowConfig(attribute_store_name=...)``, which 1.23.0 spells
  ``attribute_store_names=[...]``.
"""

from __future__ import annotations

import functools
from typing import Any, cast

import dex
from _local_engine_shims import install as install_sdk_shims  # type: ignore[import-not-found]


def _accept_attribute_store_name() -> bool:
    config = cast(Any, dex.FlowConfig)
    original = config.__init__
    if getattr(original, "_local_engine_shim", False):
        return False

    @functools.wraps(original)
    def __init__(
        self: Any, *args: Any, attribute_store_name: str | None = None, **kwargs: Any
    ) -> None:
        if attribute_store_name is not None:
            kwargs["attribute_store_names"] = [attribute_store_name]
        original(self, *args, **kwargs)

    __init__._local_engine_shim = True  # type: ignore[attr-defined]
    config.__init__ = __init__
    return True


def install() -> list[str]:
    """Install the SDK scenarios' shims and the examples' own; return what was added."""
    added: list[str] = list(install_sdk_shims())
    if _accept_attribute_store_name():
        added.append("FlowConfig(attribute_store_name=...) as attribute_store_names=[...]")
    return added
