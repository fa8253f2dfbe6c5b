"""The local stack's commands and the demo, run as a user runs them: a clean environment (none of the
test session's Airflow or PySpark settings, no lake root of its own), fresh ports and state folder,
each command a subprocess from the repository root. Shared by the e2e demo test and the cluster test
of the move from the one-broker stack to the cluster."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from revenue_platform import processes
from revenue_platform.local_stack.service_jit import SERVICES_JIT_ENV
from revenue_platform.paths import REPO_ROOT
from spark_apps.engine.session import DRIVER_JIT_ENV

DEMO_SUMMARY = re.compile(r"(\d+) windows, (\d+) orders, revenue (\d+\.\d{2}) \(DECIMAL, exact\)")
"""The demo's last line of windowed revenue: windows, orders, total."""


def user_environment(state_dir: Path, ports: Mapping[str, int]) -> dict[str, str]:
    """The caller's environment minus test-session Airflow settings, pointed at `ports` (variable ->
    port, e.g. KAFKA_PORT) and the state folder `state_dir`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PYSPARK"))}
    env.update({"PLATFORM_STATE_DIR": str(state_dir), **{name: str(port) for name, port in ports.items()}})
    # The lake follows the state folder, as for a user who never set it (nor the cluster's lake switch,
    # which the fault tests' session cluster sets while it runs).
    env.pop("PLATFORM_LAKE_ROOT", None)
    env.pop("CLUSTER_LAKE", None)
    # A user's drivers and services run on the JDK's default JIT, not the test session's (tests/conftest.py).
    env.pop(DRIVER_JIT_ENV, None)
    env.pop(SERVICES_JIT_ENV, None)
    return env


def _run_module(
    arguments: list[str], env: dict[str, str], timeout_s: float
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *arguments],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def run_stack(command: str, env: dict[str, str], timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
    """`make <command>` without make: `python -m revenue_platform.local_stack <command>`."""
    return _run_module(["revenue_platform.local_stack", command], env, timeout_s)


def run_demo(env: dict[str, str], timeout_s: float = 900) -> subprocess.CompletedProcess[str]:
    """The demo against the running stack (`make demo` after its `up`)."""
    return _run_module(["revenue_platform.demo"], env, timeout_s)


def left_running(state_dir: Path, wait_s: float = 10.0) -> list[str]:
    """Processes still alive after `wait_s` that were started for the stack of `state_dir` (their
    environment names it, as every process the stack's commands start and their children inherit:
    services, Airflow's task processes, a task's spark-submit), as "pid: command line"."""
    deadline = time.monotonic() + wait_s
    while True:
        found = [
            f"{pid}: {processes.cmdline(pid)}"
            for pid in (int(path.name) for path in Path("/proc").glob("[0-9]*"))
            if pid != os.getpid()
            and processes.is_alive(pid)
            and processes.environment(pid).get("PLATFORM_STATE_DIR") == str(state_dir)
        ]
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.5)
