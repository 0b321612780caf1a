"""`dex-agents demo` runs unattended: real embedded engine, Worker and scripted model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dex_agents._demo.script import DEMO_HELP, demo_model_reply
from dex_agents.models import ModelRequest, ToolResultItem, UserTextItem
from dex_agents.testing.mcp_server import read_calls


def run_demo(tmp_path: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "DEX_SERVER_ADDRESS")
    }
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "dex_agents",
            "demo",
            "--db",
            str(tmp_path / "demo.sqlite3"),
            *arguments,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=environment,
        check=False,
    )


@pytest.mark.slow
def test_demo_runs_turns_with_tools_and_an_approved_refund_then_resumes(tmp_path: Path) -> None:
    first = run_demo(
        tmp_path,
        "--session",
        "smoke-1",
        "--message",
        "where is order 43",
        "--message",
        "refund order 42",
        "--auto-approve",
    )
    assert first.returncode == 0, first.stdout + first.stderr
    out = first.stdout
    assert "scripted demo model" in out
    assert "session smoke-1 started" in out
    assert "[tool] lookup_order succeeded" in out
    assert "is shipped; it cost 24.50 EUR" in out
    assert "[tool] refund_order requested (non_idempotent_write, needs approval)" in out
    assert "[approval] approved automatically" in out
    assert "Refunded 129.00 EUR for order 42 (refund R-0001)." in out

    # A second run resumes the same session from the database and sees the refund.
    second = run_demo(tmp_path, "--session", "smoke-1", "--message", "list my orders")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "session smoke-1 resumed" in second.stdout
    assert "Earlier in this session:" in second.stdout
    assert "order 42: espresso grinder, refunded" in second.stdout


@pytest.mark.slow
def test_without_auto_approve_an_unattended_refund_is_rejected(tmp_path: Path) -> None:
    result = run_demo(tmp_path, "--message", "refund order 44")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[approval] rejected" in result.stdout
    assert "[tool] refund_order rejected" in result.stdout
    assert "The refund was not made" in result.stdout


def test_demo_script_is_deterministic_and_uses_every_tool_kind() -> None:
    def ask(text: str, *results: ToolResultItem) -> list[str]:
        reply = demo_model_reply(
            ModelRequest(instructions="", items=(UserTextItem(text), *results))
        )
        return [call.name for call in reply.tool_calls]

    assert ask("where is order 7") == ["lookup_order"]
    assert ask("refund order 42") == ["lookup_order"]
    looked_up = ToolResultItem(
        "c1",
        "lookup_order",
        '{"order_id": "42", "item": "x", "total_eur": 1.0, "status": "delivered"}',
    )
    assert ask("refund order 42", looked_up) == ["refund_order"]
    assert ask("help me choose") == ["ask_user"]
    assert ask("wait 2 minutes") == ["durable_wait"]
    wait = demo_model_reply(ModelRequest(instructions="", items=(UserTextItem("wait 2 minutes"),)))
    assert wait.tool_calls[0].arguments == {
        "duration_seconds": 120,
        "reason": "the user asked to wait",
    }
    assert (
        demo_model_reply(ModelRequest(instructions="", items=(UserTextItem("hello"),))).text
        == DEMO_HELP
    )


@pytest.mark.slow
def test_questions_are_answered_and_durable_waits_finish_unattended(tmp_path: Path) -> None:
    result = run_demo(tmp_path, "--message", "help me choose", "--message", "wait 1 second")
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "[question] Which coffee do you like best?" in out
    assert "[question] answered automatically: espresso" in out
    assert "Good choice: espresso." in out
    assert "[wait] durable timer until" in out
    assert '[tool] durable_wait succeeded: {"status":"completed","waited_seconds":1' in out
    assert "I waited 1 seconds on a durable timer." in out


@pytest.mark.slow
def test_a_durable_wait_survives_stopping_the_demo(tmp_path: Path) -> None:
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
    }
    database = str(tmp_path / "demo.sqlite3")
    command = [
        sys.executable,
        "-m",
        "dex_agents",
        "demo",
        "--db",
        database,
        "--session",
        "wait-1",
    ]
    first = subprocess.Popen(
        [*command, "--message", "wait 4 seconds"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=environment,
    )
    assert first.stdout is not None
    seen: list[str] = []
    try:
        for line in first.stdout:
            seen.append(line)
            if "[wait] durable timer until" in line:
                break
        assert any("durable timer until" in line for line in seen), "".join(seen)
        first.send_signal(signal.SIGINT)
        rest, _ = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 130, "".join(seen) + rest
    assert "durable_wait succeeded" not in "".join(seen) + rest

    resumed = subprocess.run(
        command,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
        check=False,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "session wait-1 resumed" in resumed.stdout
    assert "(a turn is still running; following it)" in resumed.stdout
    # The timer may fire while the demo restarts; either way the turn ends with the reply.
    assert "[tool] durable_wait " in resumed.stdout
    assert "I waited 4 seconds on a durable timer." in resumed.stdout


@pytest.mark.slow
def test_interactive_chat_rejects_with_a_reason_and_answers_by_number(tmp_path: Path) -> None:
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
    }
    typed = "refund order 43\nn\nToo early to refund\nhelp me choose\n3\n/quit\n"
    result = subprocess.run(
        [sys.executable, "-m", "dex_agents", "demo", "--db", str(tmp_path / "demo.sqlite3")],
        input=typed,
        capture_output=True,
        text=True,
        timeout=180,
        env=environment,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "Approve? [y]es / [n]o:" in out
    assert "[tool] refund_order rejected: Too early to refund" in out
    assert "The refund was not made: Too early to refund" in out
    assert "3. cold brew" in out
    assert '[tool] ask_user succeeded: {"status":"answered","answer":"cold brew"}' in out
    assert "Good choice: cold brew." in out


@pytest.mark.slow
def test_demo_runs_against_a_separate_dex_server(tmp_path: Path) -> None:
    """--server points the same Worker and Client at another engine; no embedded one starts."""
    engine = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dex_local_engine",
            "serve",
            "--port",
            "0",
            "--db",
            str(tmp_path / "server.sqlite3"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert engine.stdout is not None
        ready = engine.stdout.readline()
        assert ready.startswith("dex-local-engine ready on "), ready
        address = ready.removeprefix("dex-local-engine ready on ").split()[0]
        result = run_demo(tmp_path, "--server", address, "--message", "Where is order 42?")
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"Dex server: {address}" in result.stdout
        assert "engine database:" not in result.stdout
        assert "lookup_order succeeded" in result.stdout
        assert not (tmp_path / "demo.sqlite3").exists()
    finally:
        engine.send_signal(signal.SIGTERM)
        assert engine.wait(timeout=30) == 0


@pytest.mark.slow
def test_demo_plans_executes_the_plan_and_steers(tmp_path: Path) -> None:
    result = run_demo(
        tmp_path,
        "--message",
        "/plan check order 43",
        "--message",
        "/execute",
        "--message",
        "/cancel",
        "--message",
        "/steer where is order 42",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    draft = out.index("[plan] revision 1, draft")
    assert out.index("[ ] Look up order 43") > draft
    # Nothing ran while the plan was a draft; /execute ran it and completed it.
    assert out.index("[tool] lookup_order succeeded") > draft
    assert "[plan] revision 2, completed" in out
    assert "[x] Look up order 43" in out
    assert "(no turn is running)" in out
    assert "Order 42 (espresso grinder) is delivered" in out


@pytest.mark.slow
def test_demo_offers_and_calls_the_tools_of_an_mcp_config_file(tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "servers": [
                    {
                        "transport": "stdio",
                        "name": "files",
                        "command": sys.executable,
                        "args": ["-m", "dex_agents.testing.mcp_server", "--log", str(calls)],
                    }
                ]
            }
        )
    )
    result = run_demo(
        tmp_path, "--mcp-config", str(config), "--message", 'mcp files__lookup {"order_id": "7"}'
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "MCP tools: files__lookup, files__set_value" in result.stdout
    assert "[tool] files__lookup succeeded" in result.stdout
    assert "files__lookup said: order 7: shipped" in result.stdout
    (call,) = read_calls(calls)
    assert call["idempotency_key"].endswith("/turn-1/call_1_1")


def test_demo_rejects_a_bad_mcp_config_file(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text('{"servers": [{"transport": "stdio", "name": "no spaces allowed"}]}')
    result = run_demo(tmp_path, "--mcp-config", str(config), "--message", "hi")
    assert result.returncode == 2
    assert "invalid MCP server configuration" in result.stderr
