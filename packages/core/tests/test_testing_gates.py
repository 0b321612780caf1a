"""FileGate and InvocationLog coordinate the test with code in other processes."""

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from dex_agents.testing import FileGate, InvocationLog

# Child processes run these through `python -c`, as a Worker child would run tool code.
RECORD_RUNS = """
import sys
from dex_agents.testing import InvocationLog
log = InvocationLog(sys.argv[1])
for index in range(int(sys.argv[3])):
    log.record(sys.argv[2], idempotency_key=f"key-{index}", details={"index": index})
"""

PASS_GATE = """
import sys
from datetime import timedelta
from pathlib import Path
from dex_agents.testing import FileGate
FileGate(sys.argv[1], sys.argv[2]).pass_through(timedelta(seconds=30))
Path(sys.argv[3]).write_text("passed")
"""


def _python(script: str, *arguments: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", script, *arguments])


async def test_gate_blocks_another_process_until_released(tmp_path: Path) -> None:
    gate = FileGate(tmp_path, "charge_card")
    marker = tmp_path / "passed"
    child = _python(PASS_GATE, str(tmp_path), "charge_card", str(marker))
    try:
        await gate.wait_until_reached(within=timedelta(seconds=30))
        assert gate.reached_count() == 1
        assert not marker.exists()
        assert child.poll() is None
        gate.release()
        assert child.wait(timeout=30) == 0
        assert marker.read_text() == "passed"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


async def test_released_gate_lets_later_arrivals_through_and_counts_them(tmp_path: Path) -> None:
    gate = FileGate(tmp_path, "lookup")
    gate.release()
    gate.pass_through(timedelta(seconds=1))
    await gate.pass_through_async(timedelta(seconds=1))
    assert gate.reached_count() == 2
    await gate.wait_until_reached(count=2, within=timedelta(seconds=1))


async def test_waiting_for_an_unreached_gate_times_out_with_a_clear_message(
    tmp_path: Path,
) -> None:
    gate = FileGate(tmp_path, "never")
    with pytest.raises(TimeoutError, match="'never' was reached 0 of 1"):
        await gate.wait_until_reached(within=timedelta(milliseconds=100))
    with pytest.raises(TimeoutError, match="stayed closed"):
        gate.pass_through(timedelta(milliseconds=100))


@pytest.mark.parametrize("name", ["", "a/b", "../up", "space name"])
def test_gate_names_that_are_not_plain_file_names_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError, match="name must use only"):
        FileGate(tmp_path, name)


def test_invocation_log_counts_runs_from_concurrent_processes(tmp_path: Path) -> None:
    log_path = tmp_path / "runs.jsonl"
    children = [
        _python(RECORD_RUNS, str(log_path), tool, "25") for tool in ["lookup", "lookup", "charge"]
    ]
    for child in children:
        assert child.wait(timeout=60) == 0
    log = InvocationLog(log_path)
    assert log.count("lookup") == 50
    assert log.count("charge") == 25
    assert log.count("other") == 0
    charges = log.invocations("charge")
    assert [run.details["index"] for run in charges] == list(range(25))
    assert charges[0].idempotency_key == "key-0"
    assert charges[0].pid != 0


def test_invocation_log_of_a_missing_file_is_empty_and_refuses_a_blank_tool(
    tmp_path: Path,
) -> None:
    log = InvocationLog(tmp_path / "none" / "runs.jsonl")
    assert log.invocations() == []
    with pytest.raises(ValueError, match="tool_name"):
        log.record("")
    log.record("lookup")
    assert [run.tool_name for run in log.invocations()] == ["lookup"]
    assert log.invocations()[0].pid != sys.maxsize
