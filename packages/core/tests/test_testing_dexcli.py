"""``PrivateDexEngine`` in ``dexcli`` mode: the binaries it finds, the ``-zd-config`` file and
the command line it runs. No ``dexcli`` exists here, so a stand-in records what it was
given and serves the local engine instead."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from dex_agents.testing import PrivateDexEngine
from dex_agents.testing._engine import (
    PROCESS_CRASH_SAFE_ZD_CONFIG,
    PROCESS_CRASH_SAFE_ZD_CONFIG_NAME,
    SERVER_ZD_BINARY_VARIABLE,
    DexcliEngine,
)

STAND_IN_DEXCLI = """#!{python}
# Records its arguments, DEX_SERVER_ZD_BINARY and the -zd-config file's text, then
# serves the local engine on the requested port and database.
import json, os, sys
arguments = sys.argv[1:]
value = lambda flag: arguments[arguments.index(flag) + 1]
with open({record!r}, "a") as record:
    record.write(json.dumps({{
        "arguments": arguments,
        "server_zd": os.environ.get("DEX_SERVER_ZD_BINARY"),
        "zd_config": open(value("-zd-config")).read(),
    }}) + "\\n")
os.execv(sys.executable, [sys.executable, "-m", "dex_local_engine.cli", "serve",
    "--host", value("--bind-address"), "--port", value("--dex-port"),
    "--db", value("--sqlite-db-filename")])
"""


def _executable(path: Path, text: str = "#!/bin/sh\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


@pytest.fixture
def binaries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A stand-in ``dexcli`` (set as ``DEXCLI``) with ``dex-server-zd`` next to it."""
    record = tmp_path / "dexcli-calls.jsonl"
    dexcli = _executable(
        tmp_path / "bin" / "dexcli",
        STAND_IN_DEXCLI.format(python=sys.executable, record=str(record)),
    )
    _executable(tmp_path / "bin" / "dex-server-zd")
    monkeypatch.setenv("DEXCLI", str(dexcli))
    monkeypatch.delenv(SERVER_ZD_BINARY_VARIABLE, raising=False)
    return dexcli, record


def test_the_command_line_of_dexcli_dev(tmp_path: Path) -> None:
    dexcli = _executable(tmp_path / "bin" / "dexcli")
    server_zd = _executable(tmp_path / "bin" / "dex-server-zd")
    engine = DexcliEngine.resolve(str(dexcli), tmp_path / "state", environment={})
    assert engine.server_zd_binary == server_zd.resolve()
    assert engine.zd_config_path == tmp_path / "state" / PROCESS_CRASH_SAFE_ZD_CONFIG_NAME
    assert engine.writes_zd_config
    assert engine.command(
        port=7001,
        web_port=7002,
        database_path=tmp_path / "state" / "dex.sqlite.db",
        blob_store_directory=tmp_path / "state" / "blobs",
    ) == [
        str(dexcli.resolve()),
        "dev",
        "--engine",
        "zd",
        "-zd-config",
        str(tmp_path / "state" / PROCESS_CRASH_SAFE_ZD_CONFIG_NAME),
        "--bind-address",
        "127.0.0.1",
        "--dex-port",
        "7001",
        "--web-port",
        "7002",
        "--open=false",
        "--sqlite-db-filename",
        str(tmp_path / "state" / "dex.sqlite.db"),
        "--blob-store-dir",
        str(tmp_path / "state" / "blobs"),
    ]
    assert engine.environment == {SERVER_ZD_BINARY_VARIABLE: str(server_zd.resolve())}


def test_dex_server_zd_binary_and_an_own_config_file_take_precedence(tmp_path: Path) -> None:
    dexcli = _executable(tmp_path / "bin" / "dexcli")
    _executable(tmp_path / "bin" / "dex-server-zd")
    elsewhere = _executable(tmp_path / "other" / "dex-server-zd-1.2")
    overrides = tmp_path / "zd.yaml"
    overrides.write_text(
        "dev:\n  durabilityMode: processCrashSafe\nstreamStore:\n  backend: disabled\n"
    )
    engine = DexcliEngine.resolve(
        str(dexcli),
        tmp_path / "state",
        server_zd_config_path=overrides,
        environment={SERVER_ZD_BINARY_VARIABLE: str(elsewhere)},
    )
    assert engine.server_zd_binary == elsewhere.resolve()
    assert engine.zd_config_path == overrides.resolve()
    assert not engine.writes_zd_config


def test_a_missing_binary_or_config_file_says_what_to_set(tmp_path: Path) -> None:
    dexcli = _executable(tmp_path / "bin" / "dexcli")
    with pytest.raises(FileNotFoundError, match=r"DEXCLI=/no/dexcli names no executable file"):
        DexcliEngine.resolve("/no/dexcli", tmp_path, environment={})
    with pytest.raises(
        FileNotFoundError,
        match=r"needs dex-server-zd: none at .*bin/dex-server-zd.*set DEX_SERVER_ZD_BINARY",
    ):
        DexcliEngine.resolve(str(dexcli), tmp_path, environment={})
    with pytest.raises(
        FileNotFoundError, match=r"DEX_SERVER_ZD_BINARY=/no/zd names no executable file"
    ):
        DexcliEngine.resolve(
            str(dexcli), tmp_path, environment={SERVER_ZD_BINARY_VARIABLE: "/no/zd"}
        )
    _executable(tmp_path / "bin" / "dex-server-zd")
    with pytest.raises(
        FileNotFoundError, match=r"server_zd_config_path .*missing.yaml is not a file"
    ):
        DexcliEngine.resolve(
            str(dexcli), tmp_path, server_zd_config_path=tmp_path / "missing.yaml", environment={}
        )


def test_start_refuses_a_missing_dex_server_zd_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEXCLI", str(_executable(tmp_path / "bin" / "dexcli")))
    monkeypatch.delenv(SERVER_ZD_BINARY_VARIABLE, raising=False)
    with pytest.raises(FileNotFoundError, match="set DEX_SERVER_ZD_BINARY"):
        PrivateDexEngine.start(tmp_path / "engine")
    assert not (tmp_path / "engine" / "engine.log").exists()


def test_the_engine_runs_dexcli_with_the_process_crash_safe_config(
    tmp_path: Path, binaries: tuple[Path, Path]
) -> None:
    dexcli, record = binaries
    with PrivateDexEngine.start(tmp_path / "engine") as engine:
        assert engine.uses_dexcli
        engine.restart()
    calls = [json.loads(line) for line in record.read_text().splitlines()]
    assert len(calls) == 2
    for call in calls:
        arguments = call["arguments"]
        assert arguments[:5] == [
            "dev",
            "--engine",
            "zd",
            "-zd-config",
            str(tmp_path / "engine" / PROCESS_CRASH_SAFE_ZD_CONFIG_NAME),
        ]
        assert call["zd_config"] == PROCESS_CRASH_SAFE_ZD_CONFIG
        assert call["server_zd"] == str((dexcli.parent / "dex-server-zd").resolve())


def test_server_zd_config_path_replaces_the_engine_s_own_file(
    tmp_path: Path, binaries: tuple[Path, Path]
) -> None:
    _, record = binaries
    overrides = tmp_path / "zd-overrides.yaml"
    overrides.write_text(
        "dev:\n  durabilityMode: processCrashSafe\nstreamStore:\n  backend: disabled\n"
    )
    with PrivateDexEngine.start(tmp_path / "engine", server_zd_config_path=overrides):
        pass
    (call,) = [json.loads(line) for line in record.read_text().splitlines()]
    assert call["arguments"][3:5] == ["-zd-config", str(overrides.resolve())]
    assert call["zd_config"] == overrides.read_text()
    assert not (tmp_path / "engine" / PROCESS_CRASH_SAFE_ZD_CONFIG_NAME).exists()
