"""A quiet, machine-sized local stack: executor slots from the cores, no CLI graphviz warning, a
Spark driver log at WARN, and rotation of a driver log that a live process keeps appending to."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from revenue_platform.local_stack.airflow_local import (
    AirflowLocalSettings,
    airflow_environment,
    cli_environment,
    local_parallelism,
)
from revenue_platform.processes import rotate_copytruncate
from revenue_platform.spark_submit import DRIVER_LOG4J2_CONFIG, spark_submit_command


def _settings(tmp_path: Path) -> AirflowLocalSettings:
    return AirflowLocalSettings(home=tmp_path / "airflow", secrets_dir=tmp_path / "secrets")


@pytest.mark.parametrize(("cpus", "slots"), [(1, 4), (2, 4), (4, 8), (8, 16), (64, 32)])
def test_executor_slots_follow_the_cores(cpus: int, slots: int) -> None:
    assert local_parallelism(cpus) == slots


def test_the_stack_sets_parallelism_unless_the_user_did(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AIRFLOW__CORE__PARALLELISM", raising=False)
    assert airflow_environment(_settings(tmp_path))["AIRFLOW__CORE__PARALLELISM"] == str(local_parallelism())
    monkeypatch.setenv("AIRFLOW__CORE__PARALLELISM", "12")
    assert airflow_environment(_settings(tmp_path))["AIRFLOW__CORE__PARALLELISM"] == "12"


def test_the_airflow_cli_runs_without_the_graphviz_warning(tmp_path: Path) -> None:
    # What `make airflow CMD=...` imports on every call (the `dags` command module).
    code = "import airflow.cli.commands.dag_command"
    env = {**os.environ, **cli_environment(_settings(tmp_path))}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "graphviz" not in (done.stdout + done.stderr).lower()


def test_spark_drivers_log_warnings_only_from_the_jvm() -> None:
    command = spark_submit_command("orders_streaming_app.py", [])
    option = command[command.index("--driver-java-options") + 1]
    assert option.split()[0] == f"-Dlog4j2.configurationFile=file:{DRIVER_LOG4J2_CONFIG}"
    settings = dict(
        line.split(" = ", 1)
        for line in DRIVER_LOG4J2_CONFIG.read_text().splitlines()
        if line and not line.startswith("#")
    )
    assert settings["rootLogger.level"] == "warn"
    assert settings["appender.console.target"] == "SYSTEM_ERR"


def test_a_log_held_open_by_a_running_process_is_rotated_in_place(tmp_path: Path) -> None:
    log = tmp_path / "driver.log"
    # A real writer with the file open O_APPEND, as spawn_detached leaves the driver.
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "for i in range(400):\n"
            "    sys.stdout.write(f'line {i:04d} ' + 'x' * 100 + '\\n')\n"
            "    sys.stdout.flush(); time.sleep(0.005)\n",
        ],
        stdout=log.open("ab"),
    )
    try:
        rotations = 0
        while writer.poll() is None:
            rotations += rotate_copytruncate(log, max_bytes=8_000, backups=2)
            time.sleep(0.05)
    finally:
        writer.wait(timeout=30)
    assert rotations >= 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["driver.log", "driver.log.1", "driver.log.2"]
    # Written from the truncated file's new end: no hole of NUL bytes, the last line is the writer's last.
    current = log.read_bytes()
    assert b"\0" not in current
    assert current.decode().splitlines()[-1].startswith("line 0399")
    assert not rotate_copytruncate(tmp_path / "missing.log", 1, 2)
