"""`make demo` as a user runs it: start the stack, run the demo, read its output, stop the stack.

The stack runs on its own ports and state folder (not the developer's 9092/8080 or .local/),
with a clean environment, so this is the same path a newcomer takes after `git clone`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from revenue_platform.local_stack import processes
from revenue_platform.paths import REPO_ROOT

pytestmark = pytest.mark.e2e


def _user_environment(state_dir: Path) -> dict[str, str]:
    """The caller's environment minus test-session Airflow settings, pointed at fresh ports and state."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PYSPARK"))}
    env.update(
        {
            "PLATFORM_STATE_DIR": str(state_dir),
            "KAFKA_PORT": "19592",
            "KAFKA_CONTROLLER_PORT": "19593",
            "AIRFLOW_PORT": "18580",
        }
    )
    return env


def _stack(command: str, env: dict[str, str], timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "revenue_platform.local_stack", command],
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def test_demo_prints_windowed_revenue_and_down_stops_everything(tmp_path: Path) -> None:
    env = _user_environment(tmp_path / "state")
    try:
        up = _stack("up", env)
        assert up.returncode == 0, up.stdout + up.stderr
        assert "login admin / admin" in up.stdout

        demo = subprocess.run(
            [sys.executable, "-m", "revenue_platform.demo"],
            env=env,
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        output = demo.stdout + demo.stderr
        assert demo.returncode == 0, output[-4000:]
        summary = re.search(r"(\d+) windows, (\d+) orders, revenue (\d+\.\d{2}) \(DECIMAL, exact\)", output)
        assert summary, output[-4000:]
        windows, orders, revenue = int(summary[1]), int(summary[2]), summary[3]
        assert windows > 0
        assert orders == 3000, "each of the demo's distinct orders is counted exactly once"
        assert revenue != "0.00"
        table_rows = re.findall(
            r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \d\d:\d\d:\d\d store_\d+ +(GENERAL|RESTAURANT)", output, re.M
        )
        assert len(table_rows) == windows
    finally:
        down = _stack("down", env)
    assert down.returncode == 0, down.stdout + down.stderr
    for pid_file in (tmp_path / "state").rglob("*.pid"):
        pid = processes.read_live_pid(pid_file, expected_cmdline_fragment="")
        assert pid is None, f"{pid_file} still names a live process {pid}: {processes.cmdline(pid)}"
