"""Airflow under the local stack's settings really sends its StatsD metrics to the configured port.

A UDP socket on a free loopback port stands in for statsd_exporter; its port goes in through
`AirflowLocalSettings.statsd_port` (what AIRFLOW_STATSD_PORT sets). `airflow dags test` of a
one-task DAG then runs in a subprocess under `airflow_environment` (the variables every process
of `make up` gets), so Airflow reads its [metrics] settings at start exactly as the stack's do.
The only change to the stack's environment is the DAGs folder: a one-task DAG runs in seconds.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from revenue_platform.local_stack.airflow_local import AirflowLocalSettings, airflow_environment

pytestmark = pytest.mark.integration

DAG_ID = "statsd_probe"
TASK_ID = "say_hello"
ONE_TASK_DAG = f'''
import pendulum
from airflow.sdk import dag, task


@dag(dag_id="{DAG_ID}", schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"))
def statsd_probe():
    @task
    def {TASK_ID}() -> str:
        return "hello"

    {TASK_ID}()


statsd_probe()
'''


@pytest.fixture
def statsd_listener() -> Iterator[socket.socket]:
    """A UDP socket on a free 127.0.0.1 port: what a statsd_exporter would receive."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.settimeout(1.0)
        yield listener


def _datagrams(listener: socket.socket) -> list[str]:
    """Every datagram that arrived, until none came for a second (the sender has exited by now)."""
    received = []
    while True:
        try:
            received.append(listener.recv(65535).decode())
        except TimeoutError:
            return received


def test_a_dag_run_under_the_stack_settings_sends_statsd_metrics(
    airflow_db: AirflowLocalSettings, statsd_listener: socket.socket, tmp_path: Path
) -> None:
    settings = dataclasses.replace(airflow_db, statsd_port=statsd_listener.getsockname()[1])
    (tmp_path / "statsd_probe.py").write_text(ONE_TASK_DAG)
    env = {**os.environ, **airflow_environment(settings), "AIRFLOW__CORE__DAGS_FOLDER": str(tmp_path)}

    completed = subprocess.run(
        [sys.executable, "-m", "airflow", "dags", "test", DAG_ID],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert completed.returncode == 0, (completed.stdout + completed.stderr)[-3000:]
    # StatsD lines are `<name>:<value>|<type>`, one metric per datagram (the client does not batch).
    metrics = {line.split(":")[0]: line for line in _datagrams(statsd_listener)}
    # The counters Airflow documents, under the stack's prefix: the legacy name with the DAG and task
    # ids in it (what include/monitoring/statsd_mapping.yml turns into labels) and the plain one.
    assert metrics.get(f"airflow.ti.finish.{DAG_ID}.{TASK_ID}.success") == (
        f"airflow.ti.finish.{DAG_ID}.{TASK_ID}.success:1|c"
    ), sorted(metrics)
    assert metrics.get("airflow.ti_successes") == "airflow.ti_successes:1|c", sorted(metrics)
    assert metrics[f"airflow.dag.{DAG_ID}.{TASK_ID}.duration"].endswith("|ms")
