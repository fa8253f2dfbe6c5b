"""How a launched driver's end reaches the control plane: its exit status and its last error line."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from revenue_platform import processes
from revenue_platform.streaming.launcher import last_error_line
from spark_apps.contract.driver_exit import DRIVER_REFUSED


def _ended(pid: int, timeout_s: float = 10.0) -> int | None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        code = processes.exit_code(pid)
        if code is not None:
            return code
        time.sleep(0.05)
    return None


def test_the_exit_status_of_a_spawned_process_is_kept_for_its_launcher(tmp_path: Path) -> None:
    command = [sys.executable, "-c", f"import sys, time; time.sleep(0.3); sys.exit({DRIVER_REFUSED})"]
    pid = processes.spawn_detached(command, tmp_path / "app.pid", tmp_path / "app.log")
    assert processes.exit_code(pid) is None  # still running
    assert _ended(pid) == DRIVER_REFUSED
    # What is seen of a process this one did not start: nothing (its status went to its parent).
    assert processes.exit_code(os.getppid()) is None


def test_the_launcher_keeps_the_newest_ended_processes_and_every_running_one(tmp_path: Path) -> None:
    sleeper = processes.spawn_detached(
        [sys.executable, "-c", "import time; time.sleep(30)"], tmp_path / "s.pid", tmp_path / "s.log"
    )
    try:
        ended = []
        for index in range(processes._KEEP_ENDED + 5):
            pid = processes.spawn_detached(["true"], tmp_path / f"{index}.pid", tmp_path / f"{index}.log")
            assert _ended(pid) == 0
            ended.append(pid)
        processes.spawn_detached(["true"], tmp_path / "last.pid", tmp_path / "last.log")
        # Counted over ended processes only: earlier tests of the same session may have left their
        # own launches running (a broker, a driver), and those are kept too.
        still_known_ended = [pid for pid, process in processes._SPAWNED.items() if process.poll() is not None]
        assert len(still_known_ended) <= processes._KEEP_ENDED + 1  # plus the last launch, ended by now
        assert processes.exit_code(ended[-1]) == 0  # the newest ended ones are still known
        assert processes.exit_code(ended[0]) is None  # the oldest are forgotten
        assert sleeper in processes._SPAWNED  # a running process is never dropped
    finally:
        os.kill(sleeper, 9)


def test_the_last_error_line_is_the_drivers_own_message() -> None:
    log = "\n".join(
        [
            "26/11/26 20:00:01 WARN Utils: Your hostname resolves to a loopback address",
            "ERROR: deployment 'demo' may not start: its checkpoints hold offsets of Kafka cluster 'a'",
            "26/11/26 20:00:02 INFO ShutdownHookManager: Shutdown hook called",
        ]
    )
    assert last_error_line(log) == (
        "ERROR: deployment 'demo' may not start: its checkpoints hold offsets of Kafka cluster 'a'"
    )
    assert last_error_line("all well\n") is None
