"""Stopping a service with everything it started: Airflow runs each task in a process group of its own
(and a task's spark-submit in that group), so stopping Airflow's process group left a reprocess job's
driver running after `make down`. `terminate(..., whole_session=True)` stops the whole session; a
process that started a session of its own (a deployed streaming app) is not part of it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from revenue_platform import processes
from revenue_platform.paths import REPO_ROOT

# A leader that starts two children in process groups of their own (bash job control, as Airflow's
# setpgid per task) and one in a session of its own (setsid, as a deployed streaming app; started
# first, while job control is off, so that it is no group leader and setsid need not fork), then waits.
# Each child records its pid; SIGINT ends only the leader.
_SCRIPT = """
setsid sleep 300 & echo $! > {dir}/own-session
set -m
sleep 300 & echo $! > {dir}/grouped-1
sleep 300 & echo $! > {dir}/grouped-2
wait
"""


def _start(tmp_path: Path) -> tuple[int, dict[str, int]]:
    leader = processes.spawn_detached(
        ["bash", "-c", _SCRIPT.format(dir=tmp_path)], tmp_path / "leader.pid", tmp_path / "leader.log"
    )
    names = ("grouped-1", "grouped-2", "own-session")
    deadline = time.monotonic() + 10
    while not all((tmp_path / n).exists() and (tmp_path / n).read_text().strip() for n in names):
        assert time.monotonic() < deadline, (tmp_path / "leader.log").read_text()
        time.sleep(0.05)
    children = {n: int((tmp_path / n).read_text()) for n in names}
    # The setsid child may still be between fork and setsid; wait until it leads its own session.
    while os.getsid(children["own-session"]) != children["own-session"]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return leader, children


def _kill(*pids: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_the_whole_session_stops_but_not_a_process_with_a_session_of_its_own(tmp_path: Path) -> None:
    leader, children = _start(tmp_path)
    try:
        assert os.getpgid(children["grouped-1"]) != os.getpgid(leader)  # groups of their own, as tasks
        in_session = {leader, children["grouped-1"], children["grouped-2"]}
        assert set(processes.session_members(leader)) >= in_session

        processes.terminate(leader, 2.0, signal.SIGINT, whole_session=True)

        assert processes.session_members(leader) == []
        assert not processes.is_alive(children["grouped-1"])
        assert not processes.is_alive(children["grouped-2"])
        assert processes.is_alive(children["own-session"])
    finally:
        _kill(leader, *children.values())


def test_stopping_only_the_group_leaves_children_in_groups_of_their_own(tmp_path: Path) -> None:
    """What `make down` did before: the leader's process group only."""
    leader, children = _start(tmp_path)
    try:
        processes.terminate(leader, 2.0, signal.SIGINT)

        assert not processes.is_alive(leader)
        assert processes.is_alive(children["grouped-1"])
        assert processes.is_alive(children["grouped-2"])
    finally:
        _kill(leader, *children.values())


def test_a_stopped_process_is_continued_to_shut_down_on_its_signal(tmp_path: Path) -> None:
    """A frozen process (SIGSTOP) keeps SIGTERM pending: `terminate` continues it, so it runs its own
    shutdown within the grace period instead of waiting all of it out for SIGKILL."""
    shut_down = tmp_path / "shut-down"
    script = (
        f"trap 'echo clean > {shut_down}; exit 0' TERM; echo > {tmp_path}/ready; while :; do sleep 0.1; done"
    )
    pid = processes.spawn_detached(["bash", "-c", script], tmp_path / "p.pid", tmp_path / "p.log")
    try:
        deadline = time.monotonic() + 10
        while not (tmp_path / "ready").exists():
            assert time.monotonic() < deadline, (tmp_path / "p.log").read_text()
            time.sleep(0.05)
        os.kill(pid, signal.SIGSTOP)
        while not processes.is_stopped(pid):
            assert time.monotonic() < deadline
            time.sleep(0.01)

        had_to_kill = processes.terminate(pid, 30.0)

        assert not had_to_kill
        assert shut_down.read_text().strip() == "clean"
        assert not processes.is_alive(pid)
    finally:
        _kill(pid, *processes.group_members(pid))


# Python that waits for Ctrl-C and says how it ended; `take` first takes SIGINT back like the stack's
# standalone does (revenue_platform.airflow.standalone).
_WAITS_FOR_CTRL_C = """
import sys, time
from pathlib import Path
if sys.argv[1] == "take":
    from revenue_platform.airflow.standalone import take_interrupts
    take_interrupts()
Path(sys.argv[2]).write_text("ready")
try:
    time.sleep(300)
except KeyboardInterrupt:
    Path(sys.argv[2]).write_text("interrupted")
"""


def _started_with_sigint_ignored(tmp_path: Path, mode: str) -> tuple[subprocess.Popen[bytes], Path]:
    """A Python process started as from a background job of a script (`make up &`, nohup, a CI
    runner): it inherits SIGINT ignored."""
    marker = tmp_path / f"{mode}.state"
    # `trap "" INT` ignores SIGINT and exec keeps it ignored, as a background job's shell does (no
    # preexec_fn: this worker process has threads, and code between fork and exec can deadlock on them).
    ignoring_sigint = ["bash", "-c", 'trap "" INT; exec "$0" "$@"', sys.executable]
    process = subprocess.Popen(
        [*ignoring_sigint, "-c", _WAITS_FOR_CTRL_C, mode, str(marker)],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while not (marker.exists() and marker.read_text()):
        assert process.poll() is None, f"{mode}: exited before it was ready"
        assert time.monotonic() < deadline, f"{mode}: not ready within 30 s"
        time.sleep(0.05)
    return process, marker


def test_standalone_stops_on_sigint_even_when_started_with_it_ignored(tmp_path: Path) -> None:
    """`make down` stops Airflow standalone with SIGINT (its Ctrl-C: it stops its components and waits for
    them). Started from a background job, standalone inherited SIGINT ignored, ignored it, and `down`
    waited out its 30-s grace to SIGKILL every component. The control case shows the inheritance is real:
    without taking SIGINT back, the process ignores it and is killed at the grace's end."""
    control, control_state = _started_with_sigint_ignored(tmp_path, "inherit")
    taken, taken_state = _started_with_sigint_ignored(tmp_path, "take")
    try:
        assert processes.terminate(control.pid, 1.0, signal.SIGINT) is True, "SIGINT ignored: killed"
        assert control_state.read_text() == "ready"

        assert processes.terminate(taken.pid, 10.0, signal.SIGINT) is False, "stopped on SIGINT, not killed"
        assert taken_state.read_text() == "interrupted"
    finally:
        _kill(control.pid, taken.pid)
        for process in (control, taken):  # reaped here, not left to the garbage collector's warning
            process.wait(timeout=10)
