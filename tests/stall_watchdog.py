"""A test that runs past the suite's time limit is a stall: report it with the JVM's threads, then end
the worker, so the run goes on without it.

pytest-timeout counts the limit (`timeout` in pyproject.toml: setup, call and teardown of one test) and
calls this plugin's timer instead of its own. Its thread method would dump only Python stacks, and a
stall in this suite sits in a JVM (the one the run had to be killed for: a Kafka sink task parked in
`KafkaProducer.flush()`, both task slots of the worker's SparkSession held; docs/testing.md). So on
expiry this writes the test's id, every Python thread's stack and a `jstack` of the session's Spark
JVM to a report under the worker's state folder, prints where it is on stderr (which pytest-xdist
passes through), and exits the worker process. pytest-xdist reports the test as failed ("worker
crashed") and starts a fresh worker, with a fresh SparkSession, broker and Airflow DB, for the rest.
"""

from __future__ import annotations

import faulthandler
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

# How long one `jstack` may take before the report goes without it: a JVM whose safepoint is stuck
# would never answer.
JSTACK_TIMEOUT_SECONDS = 60


def stall_report_path(stalls_dir: Path, nodeid: str) -> Path:
    """The report of a stalled test: one file per test and run, a name safe on any disk. Its existence
    is also what tells a replacement worker that the test stalled before (see `StallWatchdog`)."""
    return stalls_dir / (re.sub(r"[^A-Za-z0-9_.-]+", "_", nodeid)[:200] + ".txt")


def run_stalls_dir(state_root: Path) -> Path:
    """This run's folder of stall reports, shared by its workers (pytest-xdist gives them one run id)."""
    run_id = (
        os.environ.get("PYTEST_XDIST_TESTRUNUID")
        or f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}"
    )
    return state_root / "stalls" / run_id


def _spark_jvm_pid() -> int | None:
    """PID of the SparkSession's JVM in this process, if one was started (never starts one)."""
    if "pyspark" not in sys.modules:
        return None
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None) if gateway is not None else None
    return getattr(process, "pid", None)


def _jstack(pid: int) -> str:
    jstack = shutil.which("jstack") or (
        str(Path(os.environ["JAVA_HOME"], "bin", "jstack")) if "JAVA_HOME" in os.environ else None
    )
    if jstack is None or not Path(jstack).exists():
        return "jstack not found (put a JDK's bin on PATH or set JAVA_HOME)\n"
    try:
        completed = subprocess.run(
            [jstack, str(pid)], capture_output=True, text=True, timeout=JSTACK_TIMEOUT_SECONDS, check=False
        )
    except subprocess.TimeoutExpired:
        return f"jstack {pid} gave no answer in {JSTACK_TIMEOUT_SECONDS} s\n"
    return completed.stdout + completed.stderr


def write_stall_report(report: Path, nodeid: str, timeout: float) -> None:
    report.parent.mkdir(parents=True, exist_ok=True)
    with report.open("w") as out:
        out.write(
            f"{nodeid} ran past the suite's limit of {timeout:.0f} s per test (setup + call + teardown)\n\n"
        )
        out.write("== Python threads ==\n")
        out.flush()
        faulthandler.dump_traceback(file=out, all_threads=True)
        pid = _spark_jvm_pid()
        out.write(
            f"\n== Spark JVM (pid {pid}) ==\n" if pid else "\n== no SparkSession JVM in this worker ==\n"
        )
        if pid:
            out.write(_jstack(pid))


def _stall(item: pytest.Item, timeout: float, stalls_dir: Path) -> None:
    from pytest_timeout import is_debugging

    if is_debugging():
        return
    report = stall_report_path(stalls_dir, item.nodeid)
    try:
        write_stall_report(report, item.nodeid, timeout)
        details = report.read_text()
    except Exception as error:  # the exit below must happen whatever the report does
        details = f"no report ({type(error).__name__}: {error})\n"
    # The worker's fd 2 is pytest's capture file until capture is suspended; after it, the terminal.
    capture = item.config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.suspend_global_capture(in_=True)
    message = (
        f"\n{'+' * 30} STALLED {'+' * 30}\n{details}{'+' * 30} STALLED {'+' * 30}\n"
        f"{item.nodeid} ran past {timeout:.0f} s (the suite's per-test limit, pyproject.toml `timeout`); "
        f"the report above is in {report}. This worker exits: pytest-xdist reports the test as failed "
        f"and goes on with a fresh worker.\n"
    )
    os.write(2, message.encode(errors="replace"))
    os._exit(1)


class StallWatchdog:
    """The pytest-timeout timer of the suite (thread method only; `--timeout-method=signal` keeps
    pytest-timeout's own)."""

    def __init__(self, stalls_dir: Path) -> None:
        self.stalls_dir = stalls_dir

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        # pytest-xdist hands a crashed worker's unfinished tests to its replacement, the stalled one
        # included: run again, a stall that is not a fluke would cost the limit once per worker restart.
        report = stall_report_path(self.stalls_dir, item.nodeid)
        if report.exists():
            pytest.fail(f"stalled earlier in this run (its worker was replaced); see {report}", pytrace=False)

    @pytest.hookimpl(tryfirst=True)
    def pytest_timeout_set_timer(self, item: pytest.Item, settings: Any) -> bool | None:
        if settings.method != "thread":
            return None
        timer = threading.Timer(settings.timeout, _stall, (item, settings.timeout, self.stalls_dir))
        timer.name = f"stall watchdog {item.nodeid}"
        timer.daemon = True

        def cancel() -> None:
            timer.cancel()
            timer.join()

        # pytest-timeout's own pytest_timeout_cancel_timer calls this when the test ends.
        item.cancel_timeout = cancel  # type: ignore[attr-defined]
        timer.start()
        return True
