"""Is this driver process still ours and running? A deploy asks it a second after the launch, while
spark-submit's bash is still exec'ing into java: a live process then shows an empty command line for a
moment, and that moment once failed a healthy deploy as "exited at start" (a busy CI machine)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from revenue_platform import processes


def test_an_empty_command_line_of_a_live_process_is_read_again_not_taken_for_another_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads = iter(["", "", "java -cp x org.apache.spark.deploy.SparkSubmit --lease 1-abc"])
    monkeypatch.setattr(processes, "is_alive", lambda pid: True)
    monkeypatch.setattr(processes, "cmdline", lambda pid: next(reads))
    assert processes.runs_command_with(4242, "1-abc")

    monkeypatch.setattr(processes, "cmdline", lambda pid: "python other_program.py")
    assert not processes.runs_command_with(4242, "1-abc"), "a reused pid: another command line"

    monkeypatch.setattr(processes, "cmdline", lambda pid: "")
    started = time.monotonic()
    assert not processes.runs_command_with(4242, "1-abc"), "empty for good: not ours"
    assert time.monotonic() - started < 5

    monkeypatch.setattr(processes, "is_alive", lambda pid: False)
    assert not processes.runs_command_with(4242, "1-abc")


def test_a_process_this_one_spawned_is_judged_by_its_own_exit_status(tmp_path: Path) -> None:
    pid = processes.spawn_detached(
        [sys.executable, "-c", "import time; time.sleep(0.5)"], tmp_path / "child.pid", tmp_path / "child.log"
    )
    assert processes.spawned_and_running(pid) is True
    deadline = time.monotonic() + 30
    while processes.spawned_and_running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert processes.spawned_and_running(pid) is False
    assert processes.exit_code(pid) == 0
    assert processes.spawned_and_running(1) is None, "a process another one started: no answer here"
