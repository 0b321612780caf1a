"""The deployment guide and the files under ``deploy/`` work as written.

- The guide's topology block (engine with a token, two Worker-only processes, a
  client-only process, the probes) runs in bash as written, on free ports.
- The guide's backup commands copy a running engine's database.
- The systemd units pass ``systemd-analyze verify`` (when installed) and their
  ExecStart commands, run as processes with the units' environment, serve a session.
- The compose file's commands, environment and health checks name real CLI flags,
  variables, ports and files.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from dex_agents.testing import PrivateDexEngine, find_free_loopback_ports
from dex_agents.testing._processes import ChildProcess
from dex_local_engine.cli import build_parser

ROOT = Path(__file__).resolve().parents[3]
GUIDE = ROOT / "docs" / "deployment.md"
DEPLOY = ROOT / "deploy"
APP = DEPLOY / "app"
SYSTEMD = DEPLOY / "systemd"
BIN = Path(sys.executable).parent
GUIDE_PORTS = ("8801", "8802", "8811", "8812")
REPLY = "Good news: order 42 shipped on Monday."
WAIT = timedelta(seconds=120)
HOST_VARIABLES = {"DEX_SERVER_ADDRESS", "DEX_SERVER_TOKEN"}
"""The variables ``AgentHost`` reads."""


def _guide_block(name: str) -> str:
    """The shell block after ``<!-- deployment-test: name -->`` in the guide."""
    match = re.search(
        rf"<!-- deployment-test: {name} -->\n```sh\n(.*?)\n```", GUIDE.read_text(), re.DOTALL
    )
    assert match is not None, f"the guide has no {name} block"
    return match.group(1)


def _on_free_ports(text: str) -> str:
    for guide_port, port in zip(
        GUIDE_PORTS, find_free_loopback_ports(len(GUIDE_PORTS)), strict=True
    ):
        text = text.replace(guide_port, str(port))
    return text


def _environment() -> dict[str, str]:
    """This interpreter's environment, its ``bin`` first on PATH, no host variables."""
    environment = {k: v for k, v in os.environ.items() if k not in HOST_VARIABLES}
    environment["PATH"] = f"{BIN}{os.pathsep}{environment.get('PATH', '')}"
    return environment


# Stops the background jobs newest first (Workers before the engine); each must exit 0.
_STOP_JOBS = """
pids=($(jobs -p))
for ((i=${#pids[@]}-1; i>=0; i--)); do
  kill -TERM "${pids[i]}"
  status=0; wait "${pids[i]}" || status=$?
  echo "job ${i} exited ${status}"
done
"""


@pytest.mark.skipif(shutil.which("curl") is None, reason="the guide's probes use curl")
def test_the_guides_topology_runs_as_written(tmp_path: Path) -> None:
    block = _on_free_ports(_guide_block("topology"))
    assert "dex-local-engine serve" in block
    assert block.count("python worker.py &") == 2
    script = block.replace("--db dex.sqlite3", f"--db {tmp_path / 'dex.sqlite3'}")
    done = subprocess.run(
        ["bash", "-c", f"set -euo pipefail\n{script}\n{_STOP_JOBS}"],
        cwd=ROOT,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=WAIT.total_seconds(),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert REPLY in lines, done.stdout + done.stderr
    assert lines.count("ok") == 3  # both Workers' and the engine's /readyz
    assert [line for line in lines if line.startswith("job ")] == [
        "job 2 exited 0",
        "job 1 exited 0",
        "job 0 exited 0",
    ]
    assert "Traceback" not in done.stderr


def test_the_guides_backup_commands_copy_a_running_engines_database(tmp_path: Path) -> None:
    with PrivateDexEngine.start(tmp_path / "engine") as engine:
        # A session's worth of state through the guide's own client and a Worker.
        environment = {**_environment(), "DEX_SERVER_ADDRESS": engine.server_address}
        worker = ChildProcess.spawn(
            [sys.executable, "worker.py"],
            log_path=tmp_path / "worker.log",
            environment=environment,
            cwd=APP,
        )
        try:
            said = subprocess.run(
                [sys.executable, "client.py", "backup-1", "Where is order 42?"],
                cwd=APP,
                env=environment,
                capture_output=True,
                text=True,
                timeout=WAIT.total_seconds(),
                check=True,
            )
            assert said.stdout.strip() == REPLY
            block = _guide_block("backup").replace(
                "sqlite3 dex.sqlite3", f"sqlite3 {engine.database_path}"
            )
            block = block.replace("'dex.sqlite3'", f"'{engine.database_path}'")
            assert str(engine.database_path) in block
            for command in block.splitlines():
                if command.startswith("sqlite3 ") and shutil.which("sqlite3") is None:
                    continue
                subprocess.run(
                    ["bash", "-c", command], cwd=tmp_path, env=_environment(), check=True
                )
        finally:
            worker.terminate()
        copies = list(tmp_path.glob("dex-backup*.sqlite3"))
        assert copies
        with sqlite3.connect(engine.database_path) as live:
            tables = live.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
            flows = live.execute("SELECT count(*) FROM flows").fetchone()
        for copy in copies:
            with sqlite3.connect(copy) as backup:
                assert backup.execute("PRAGMA integrity_check").fetchone() == ("ok",)
                assert (
                    backup.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
                    == tables
                )
                assert backup.execute("SELECT count(*) FROM flows").fetchone() == flows


# --- systemd ------------------------------------------------------------------------------


def _unit(name: str) -> dict[str, dict[str, list[str]]]:
    """A unit file's sections, each key with its values in order."""
    sections: dict[str, dict[str, list[str]]] = {}
    section: dict[str, list[str]] = {}
    for raw in (SYSTEMD / name).read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        section.setdefault(key, []).append(value)
    return sections


def _environment_file(path: Path) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        key, separator, value = raw.strip().partition("=")
        if separator and not key.startswith("#"):
            pairs[key] = value
    return pairs


UNITS = ("dex-engine.service", "dex-agents-worker@.service", "dex-agents-smoke-check.service")


class Installed:
    """The units as installed on this machine: paths into the checkout and a temporary
    directory, the guide's ports replaced by free ones."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.ports = dict(zip(GUIDE_PORTS, find_free_loopback_ports(4), strict=True))
        self.state = directory / "state"
        self.state.mkdir()
        self.environment_file = directory / "dex-agents.env"
        self.environment_file.write_text(
            self.localize((SYSTEMD / "dex-agents.env").read_text()), encoding="utf-8"
        )

    def localize(self, text: str) -> str:
        text = (
            text.replace("/opt/dex-agents/venv/bin", str(BIN))
            .replace("/opt/dex-agents/app", str(APP))
            .replace("/etc/dex-agents/dex-agents.env", str(self.environment_file))
            .replace("/var/lib/dex-agents", str(self.state))
        )
        for guide_port, port in self.ports.items():
            text = text.replace(guide_port, str(port))
        return text

    def unit_file(self, name: str, instance: str | None = None) -> Path:
        text = self.localize((SYSTEMD / name).read_text())
        text = "\n".join(line for line in text.splitlines() if not line.startswith("User="))
        path = self.directory / (name.replace("@", f"@{instance}") if instance else name)
        path.write_text(text + "\n", encoding="utf-8")
        return path

    def spawn(self, name: str, instance: str | None = None) -> ChildProcess:
        """Run the unit's ExecStart with its EnvironmentFile, Environment= and directory."""
        service = _unit(name)["Service"]
        environment = {**_environment(), **_environment_file(self.environment_file)}
        for assignment in service.get("Environment", []):
            key, _, value = self.localize(assignment).partition("=")
            environment[key] = value.replace("%i", instance or "")
        (command,) = service["ExecStart"]
        directory = service.get("WorkingDirectory")
        return ChildProcess.spawn(
            shlex.split(self.localize(command)),
            log_path=self.directory / f"{name}{instance or ''}.log",
            environment=environment,
            cwd=Path(self.localize(directory[0])) if directory else None,
        )


def _wait_logged(process: ChildProcess, text: str) -> None:
    deadline = time.monotonic() + WAIT.total_seconds()
    while text not in process.read_log():
        assert process.is_running(), process.read_log()
        assert time.monotonic() < deadline, process.read_log()
        time.sleep(0.05)


def _exit_status(process: ChildProcess) -> int | None:
    """The status a process that ends on its own exits with."""
    deadline = time.monotonic() + WAIT.total_seconds()
    while process.is_running():
        assert time.monotonic() < deadline, process.read_log()
        time.sleep(0.05)
    return process.returncode


@pytest.fixture
def installed(tmp_path: Path) -> Installed:
    return Installed(tmp_path)


def test_the_systemd_units_name_real_flags_and_drain_within_their_stop_timeout() -> None:
    engine = _unit("dex-engine.service")["Service"]
    (command,) = engine["ExecStart"]
    arguments = shlex.split(command)
    assert Path(arguments[0]).name == "dex-local-engine"
    parsed = build_parser().parse_args(arguments[1:])
    assert (parsed.command, parsed.durability, parsed.health_port) == ("serve", "power-loss", 8802)
    settings = _environment_file(SYSTEMD / "dex-agents.env")
    assert settings["DEX_SERVER_ADDRESS"] == f"{parsed.host}:{parsed.port}"
    assert settings["DEX_SERVER_TOKEN"] == settings["DEX_LOCAL_ENGINE_TOKEN"]
    worker = _unit("dex-agents-worker@.service")["Service"]
    assert int(worker["TimeoutStopSec"][0]) > float(settings["WORKER_DRAIN_SECONDS"])
    assert (APP / shlex.split(worker["ExecStart"][0])[1]).is_file()
    documented = (APP / "worker.py").read_text()
    for name in settings:
        assert name in HOST_VARIABLES | {"DEX_LOCAL_ENGINE_TOKEN"} or name in documented


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze")
def test_the_systemd_units_pass_systemd_analyze_verify(installed: Installed) -> None:
    files = [
        installed.unit_file(name, "1" if name.endswith("@.service") else None) for name in UNITS
    ]
    done = subprocess.run(
        ["systemd-analyze", "verify", *map(str, files)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Unknown key" not in done.stderr, done.stderr


def test_the_systemd_units_exec_start_commands_serve_a_session(installed: Installed) -> None:
    engine = installed.spawn("dex-engine.service")
    workers: list[ChildProcess] = []
    try:
        engine.wait_for_log_line("dex-local-engine ready on ", WAIT)
        workers = [installed.spawn("dex-agents-worker@.service", n) for n in ("1", "2")]
        for worker in workers:
            _wait_logged(worker, "Worker registered")
        check = installed.spawn("dex-agents-smoke-check.service")
        assert _exit_status(check) == 0, check.read_log()
        assert REPLY in check.read_log().splitlines()
        statuses = [worker.terminate(WAIT) for worker in workers]
        assert statuses == [0, 0], [worker.read_log() for worker in workers]
    finally:
        for worker in workers:
            worker.kill()
        assert engine.terminate(WAIT) == 0, engine.read_log()


# --- docker compose -----------------------------------------------------------------------


def _compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())


def _probe_port(service: dict[str, Any]) -> int:
    (url,) = re.findall(
        r"http://127\.0\.0\.1:(\d+)/readyz", " ".join(service["healthcheck"]["test"])
    )
    return int(url)


def _seconds(text: str) -> float:
    match = re.fullmatch(r"(\d+)s", text)
    assert match is not None, text
    return float(match.group(1))


def test_the_compose_file_names_real_flags_variables_ports_and_files() -> None:
    compose = _compose()
    services = compose["services"]
    assert set(services) == {"engine", "worker", "smoke-check"}
    for service in services.values():
        build = service["build"]
        assert (DEPLOY / build["context"] / build["dockerfile"]).resolve() == DEPLOY / "Dockerfile"

    engine = services["engine"]
    assert engine["command"][0] == "dex-local-engine"
    flags = build_parser().parse_args(engine["command"][1:])
    assert flags.command == "serve"
    assert flags.durability == "power-loss"
    assert _probe_port(engine) == flags.health_port
    # Listening on 0.0.0.0 needs the token, which the engine reads from its variable.
    assert flags.host == "0.0.0.0"
    assert "DEX_LOCAL_ENGINE_TOKEN" in engine["environment"]
    volume = engine["volumes"][0].split(":")
    assert volume[0] in compose["volumes"]
    assert Path(flags.db).parent == Path(volume[1])

    token = engine["environment"]["DEX_LOCAL_ENGINE_TOKEN"]
    documented = (APP / "worker.py").read_text() + (APP / "client.py").read_text()
    for name in ("worker", "smoke-check"):
        service = services[name]
        environment = service["environment"]
        assert environment["DEX_SERVER_ADDRESS"] == f"engine:{flags.port}"
        assert environment["DEX_SERVER_TOKEN"] == token
        for variable in environment:
            assert variable in HOST_VARIABLES or variable in documented
        assert service["working_dir"] == "/app/deploy/app"  # the Dockerfile copies the repo to /app
        assert service["command"][0] == "python"
        assert (APP / service["command"][1]).is_file()
        for dependency, condition in service["depends_on"].items():
            assert condition["condition"] == "service_healthy"
            assert "healthcheck" in services[dependency]

    worker = services["worker"]
    assert _probe_port(worker) == int(worker["environment"]["WORKER_HEALTH_PORT"])
    drain = float(worker["environment"]["WORKER_DRAIN_SECONDS"])
    assert _seconds(worker["stop_grace_period"]) > drain
    assert worker["deploy"]["replicas"] == 2
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert "WORKDIR /app" in dockerfile
    assert "--package dex-agents" in dockerfile
