"""Durability modes: the SQLite sync setting each one uses, on every way to start."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import EngineProcess

from dex_local_engine import Durability, EngineServer, EngineStartError, LocalEngine
from dex_local_engine._store.store import Store

SYNCHRONOUS = {1: "NORMAL", 2: "FULL"}


def _synchronous(store: Store) -> str:
    # The pragma is per connection, so ask the engine's own connection.
    connection: sqlite3.Connection = store._db  # pyright: ignore[reportPrivateUsage]
    return SYNCHRONOUS[connection.execute("PRAGMA synchronous").fetchone()[0]]


def test_process_crash_safe_is_the_default(tmp_path: Path) -> None:
    store = Store(tmp_path / "default.db")
    assert store.durability is Durability.PROCESS_CRASH
    assert _synchronous(store) == "NORMAL"
    store.close()


def test_power_loss_safe_syncs_every_commit(tmp_path: Path) -> None:
    store = Store(tmp_path / "full.db", Durability.POWER_LOSS)
    assert _synchronous(store) == "FULL"
    with store.transaction():
        store.put_attribute("flow", "key", b"value")
    store.close()
    reopened = Store(tmp_path / "full.db", Durability.POWER_LOSS)
    assert reopened.attributes("flow") == [("key", b"value")]
    reopened.close()


def test_local_engine_takes_the_mode_by_name(tmp_path: Path) -> None:
    with LocalEngine(tmp_path / "named.db", durability="power-loss") as engine:
        assert engine.durability is Durability.POWER_LOSS
        assert engine.address
    with pytest.raises(ValueError, match="unknown durability mode 'disk'"):
        LocalEngine(durability="disk")


def test_serve_accepts_both_modes_and_refuses_others(tmp_path: Path) -> None:
    for mode in ("power-loss", "process-crash"):
        engine = EngineProcess(str(tmp_path / f"{mode}.db"), extra_args=("--durability", mode))
        assert engine.stop() == 0
    refused = subprocess.run(
        [sys.executable, "-m", "dex_local_engine", "serve", "--durability", "disk"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2
    assert "invalid choice: 'disk'" in refused.stderr
    with pytest.raises(EngineStartError, match="unknown durability mode"):
        EngineServer(":memory:", "127.0.0.1", 0, "disk")
