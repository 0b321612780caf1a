"""Child processes lead their own group: kill() reaches grandchildren; exit kills leftovers."""

import os
import shutil
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from pathlib import Path

import pytest

from dex_agents.testing._processes import ChildProcess


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); read its state to tell.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def _wait_dead(pid: int) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


SPAWN_GRANDCHILD = textwrap.dedent(
    """
    import subprocess, sys, time, signal
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    print(f"grandchild {grandchild.pid}", flush=True)
    time.sleep(300)
    """
)


def test_kill_reaches_the_whole_process_group(tmp_path: Path) -> None:
    child = ChildProcess.spawn(
        [sys.executable, "-c", SPAWN_GRANDCHILD], log_path=tmp_path / "child.log"
    )
    line = child.wait_for_log_line("grandchild ", timedelta(seconds=30))
    grandchild_pid = int(line.split()[1])
    assert os.getpgid(child.pid) == child.pid
    child.kill()
    assert not child.is_running()
    assert child.returncode == -9
    assert _wait_dead(grandchild_pid)


def test_terminate_lets_the_child_exit_cleanly_then_clears_the_group(tmp_path: Path) -> None:
    child = ChildProcess.spawn(
        [sys.executable, "-c", SPAWN_GRANDCHILD], log_path=tmp_path / "child.log"
    )
    grandchild_pid = int(child.wait_for_log_line("grandchild ", timedelta(seconds=30)).split()[1])
    assert child.terminate(timedelta(seconds=10)) == 0
    assert _wait_dead(grandchild_pid)


def test_waiting_for_a_line_fails_at_once_when_the_child_exits(tmp_path: Path) -> None:
    child = ChildProcess.spawn(
        [sys.executable, "-c", "print('boom'); raise SystemExit(3)"],
        log_path=tmp_path / "child.log",
    )
    with pytest.raises(RuntimeError, match=r"(?s)exited with code 3.*boom"):
        child.wait_for_log_line("ready", timedelta(seconds=30))


def test_a_restarted_child_reads_only_its_own_part_of_a_shared_log(tmp_path: Path) -> None:
    log_path = tmp_path / "shared.log"
    first = ChildProcess.spawn([sys.executable, "-c", "print('ready 1')"], log_path=log_path)
    first.wait_for_log_line("ready", timedelta(seconds=30))
    first.terminate()
    second = ChildProcess.spawn(
        [sys.executable, "-c", "import time; time.sleep(0.3); print('ready 2')"],
        log_path=log_path,
    )
    assert second.wait_for_log_line("ready", timedelta(seconds=30)) == "ready 2"
    second.terminate()


def test_children_still_running_when_the_test_process_exits_are_killed(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        from datetime import timedelta
        from pathlib import Path
        from dex_agents.testing._processes import ChildProcess
        child = ChildProcess.spawn(
            [sys.executable, "-c", {SPAWN_GRANDCHILD!r}], log_path=Path({str(tmp_path)!r}) / "c.log"
        )
        line = child.wait_for_log_line("grandchild ", timedelta(seconds=30))
        print(child.pid, line.split()[1], flush=True)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    child_pid, grandchild_pid = (int(value) for value in result.stdout.split())
    assert _wait_dead(child_pid)
    assert _wait_dead(grandchild_pid)


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or shutil.which("setpriv") is None,
    reason="the parent-death signal needs Linux and setpriv",
)
def test_children_die_with_a_test_process_that_is_killed(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys, time
        from datetime import timedelta
        from pathlib import Path
        from dex_agents.testing._processes import ChildProcess
        child = ChildProcess.spawn(
            [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(300)"],
            log_path=Path({str(tmp_path)!r}) / "c.log",
        )
        child.wait_for_log_line("up", timedelta(seconds=30))
        print(child.pid, flush=True)
        time.sleep(300)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child_pid = int(parent.stdout.readline())
    assert _alive(child_pid)
    parent.kill()
    parent.wait(timeout=10)
    assert _wait_dead(child_pid)
