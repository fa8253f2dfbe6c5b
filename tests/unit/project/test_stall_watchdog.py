"""The suite's safety net against a stall (tests/stall_watchdog.py), run as `make test` runs: pytest with
pytest-xdist and pytest-timeout in a child process, on a throwaway test folder whose first test hangs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from revenue_platform.paths import REPO_ROOT
from tests.stall_watchdog import stall_report_path

CHILD_TIME_LIMIT_SECONDS = 3


def test_a_stalled_test_fails_once_with_a_report_and_the_rest_of_its_module_still_runs(
    tmp_path: Path,
) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    state_root = tmp_path / "state"
    (suite / "conftest.py").write_text(
        textwrap.dedent(
            f"""
            from pathlib import Path
            from tests.stall_watchdog import StallWatchdog, run_stalls_dir

            def pytest_configure(config):
                watchdog = StallWatchdog(run_stalls_dir(Path({str(state_root)!r})))
                config.pluginmanager.register(watchdog, "stall_watchdog")
            """
        )
    )
    (suite / "test_module.py").write_text(
        textwrap.dedent(
            """
            import time

            def test_hangs():
                time.sleep(600)

            def test_after_the_hang():
                assert True
            """
        )
    )
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(REPO_ROOT / "include")])}
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-n",
            "1",
            "--dist",
            "loadfile",
            "-p",
            "no:cacheprovider",
            "--timeout",
            str(CHILD_TIME_LIMIT_SECONDS),
            "--timeout-method",
            "thread",
            "-o",
            "addopts=",
            str(suite),
        ],
        cwd=suite,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    output = completed.stdout + completed.stderr

    assert completed.returncode == 1, output
    # The stall is reported where a CI log keeps it: which test, the limit, the threads.
    assert "STALLED" in output, output
    assert f"ran past {CHILD_TIME_LIMIT_SECONDS} s" in output, output
    assert "in test_hangs" in output, "the hanging test's Python stack is in the report"
    assert "worker 'gw0' crashed while running 'test_module.py::test_hangs'" in output, output
    # Its replacement does not run it again (a real stall would cost the limit once per restart) ...
    assert "stalled earlier in this run" in output, output
    assert output.count("STALLED") == 2, "one report (its opening and closing line), not one per worker"
    # ... and runs what the stalled worker left.
    assert "1 passed" in output, output
    reports = list((state_root / "stalls").glob("*/*.txt"))
    assert [report.name for report in reports] == [
        stall_report_path(Path(), "test_module.py::test_hangs").name
    ]
