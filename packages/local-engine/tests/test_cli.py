"""The command line: the ready line, clean stops, and clear start-up errors."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from conftest import EngineProcess, free_port

from dex_local_engine import EngineStartError, LocalEngine


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dex_local_engine", "serve", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_ready_line_then_clean_stop_on_sigterm(tmp_path: Path) -> None:
    database = str(tmp_path / "cli.db")
    engine = EngineProcess(database)
    host, port = engine.address.rsplit(":", 1)
    assert host == "127.0.0.1"
    assert int(port) > 0
    assert engine.ready_line == f"dex-local-engine ready on {engine.address} (database {database})"
    assert engine.stop() == 0
    assert engine.process.stdout is not None
    assert engine.process.stdout.read() == ""  # exactly one line on stdout
    assert Path(database).exists()


def test_ctrl_c_stops_cleanly() -> None:
    engine = EngineProcess(":memory:")
    engine.process.send_signal(signal.SIGINT)
    assert engine.process.wait(30) == 0


def test_busy_port_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        finished = _serve("--port", str(port))
        assert finished.returncode == 2
        assert finished.stdout == ""
        assert f"cannot listen on 127.0.0.1:{port}" in finished.stderr
        with pytest.raises(EngineStartError, match="cannot listen"):
            LocalEngine(port=port).start()


def test_unusable_database_is_a_clear_error(tmp_path: Path) -> None:
    not_a_db = tmp_path / "junk.db"
    not_a_db.write_bytes(b"this is not a database" * 100)
    finished = _serve("--port", "0", "--db", str(not_a_db))
    assert finished.returncode == 2
    assert "cannot use database" in finished.stderr
    missing_dir = tmp_path / "missing" / "x.db"
    with pytest.raises(EngineStartError, match="cannot use database"):
        LocalEngine(database=missing_dir).start()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--port", "70000"], "out of range"),
        (["--port", "abc"], "is not a port number"),
        (["--nope"], "unrecognized arguments"),
    ],
)
def test_bad_flags_are_rejected(args: list[str], message: str) -> None:
    finished = _serve(*args)
    assert finished.returncode == 2
    assert message in finished.stderr


def test_embedded_engine_context_manager(tmp_path: Path) -> None:
    with LocalEngine(database=tmp_path / "embedded.db") as engine:
        assert engine.address.startswith("127.0.0.1:")
    with pytest.raises(RuntimeError):
        _ = engine.address


def _probe(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            return response.status, response.read().decode().strip()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode().strip()


def test_health_port_serves_liveness_and_readiness_probes() -> None:
    health_port = free_port()
    engine = EngineProcess(":memory:", extra_args=["--health-port", str(health_port)])
    try:
        assert _probe(health_port, "/livez") == (200, "ok")
        assert _probe(health_port, "/readyz") == (200, "ok")
        assert _probe(health_port, "/metrics")[0] == 404
    finally:
        assert engine.stop() == 0


def test_a_busy_health_port_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        finished = _serve("--port", "0", "--health-port", str(port))
    assert finished.returncode == 2
    assert f"cannot serve health probes on 127.0.0.1:{port}" in finished.stderr
