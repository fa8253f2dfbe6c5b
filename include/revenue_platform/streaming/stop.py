"""Stop a deployment: record the intent, stop the driver gracefully, force it after a timeout.

The registry's desired state becomes `stopped` first, so the supervisor does not restart
what is being stopped. A local driver's Python process gets SIGTERM, which makes the app
stop each query between micro-batches (the batch in flight finishes and commits); if the
driver's process group is still there after `timeout_s`, it is SIGKILLed. The lease is
released, so a driver that somehow survived fences itself off at its next lease check.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import time
from collections.abc import Callable
from typing import Any

from revenue_platform import processes
from revenue_platform.errors import PlatformError
from revenue_platform.registry import (
    DeploymentRegistry,
    DesiredState,
    ObservedState,
    RegistryEvent,
)
from revenue_platform.spark_submit import spark_submit_command, spark_submit_env
from revenue_platform.streaming.launcher import driver_python_pid, local_process_alive

LOG = logging.getLogger(__name__)


class StopError(PlatformError):
    """The driver could not be stopped from here."""


def cluster_kill_command(master: str, submission_id: str) -> list[str]:
    """`spark-submit --kill` for standalone / Kubernetes submissions (YARN: `yarn application -kill`)."""
    spark_submit = spark_submit_command("orders_streaming_app.py", [], master=master)[0]
    return [spark_submit, "--master", master, "--kill", submission_id]


def stop_deployment(
    registry: DeploymentRegistry,
    deployment_id: str,
    timeout_s: float,
    actor: str,
    reason: str = "stop requested",
    progress: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Stop `deployment_id` (graceful, then forced after `timeout_s`); return how it went."""
    record = registry.get(deployment_id)
    if record.desired_state != DesiredState.STOPPED.value:
        record = registry.update(
            deployment_id,
            {"desired_state": DesiredState.STOPPED.value},
            actor,
            events=[
                RegistryEvent(deployment_id, "desired_state", actor, record.desired_state, "stopped", reason)
            ],
        )
    started = time.monotonic()
    if record.driver_kind == "cluster" and record.submission_id and record.spark_master:
        completed = subprocess.run(
            cluster_kill_command(record.spark_master, record.submission_id),
            capture_output=True,
            text=True,
            env=spark_submit_env(),
            check=False,
            timeout=120,
        )
        if completed.returncode != 0:
            raise StopError(
                f"could not kill {record.submission_id}: {(completed.stdout + completed.stderr)[-2000:]}"
            )
        how = "killed via the cluster manager"
    else:
        how = "not running"
        alive = local_process_alive(record)
        if alive is None and record.driver_kind == "local" and record.driver_pid is not None:
            raise StopError(
                f"the driver of {deployment_id!r} runs on host {record.driver_host!r}, not here "
                f"({socket.gethostname()!r}); run the stop there (desired state is already 'stopped')"
            )
        if alive and record.driver_pid is not None:
            python_pid = driver_python_pid(record)
            progress(
                f"[stop] {deployment_id}: SIGTERM to driver pid {python_pid or record.driver_pid} "
                f"(graceful: the current micro-batch finishes), forced kill after {timeout_s:.0f}s"
            )
            forced = processes.terminate(record.driver_pid, timeout_s, signal_pid=python_pid)
            how = "forced (SIGKILL after timeout)" if forced else "graceful"
    elapsed = time.monotonic() - started
    stopped = registry.update(
        deployment_id,
        {
            "observed_state": ObservedState.STOPPED.value,
            "driver_pid": None,
            "lease_token": None,
            "heartbeat_at": None,
        },
        actor,
        events=[
            RegistryEvent(
                deployment_id,
                "stopped",
                actor,
                record.observed_state,
                ObservedState.STOPPED.value,
                reason,
                {"how": how, "seconds": round(elapsed, 1), "lease_token": record.lease_token},
            )
        ],
    )
    progress(f"[stop] {deployment_id}: stopped ({how}) in {elapsed:.1f}s")
    return {
        "deployment_id": deployment_id,
        "how": how,
        "seconds": round(elapsed, 1),
        "desired_state": stopped.desired_state,
        "observed_state": stopped.observed_state,
    }


def stop_streaming_apps(
    lake_root: str | None = None, timeout_s: float = 60.0, progress: Callable[[str], None] = print
) -> list[str]:
    """Stop every local driver of this machine found in the registry (used by `make down`)."""
    registry = DeploymentRegistry(lake_root)
    stopped = []
    for record in registry.deployments():
        if local_process_alive(record):
            stop_deployment(
                registry, record.deployment_id, timeout_s, "local-stack down", "make down", progress
            )
            stopped.append(record.deployment_id)
    if not stopped:
        progress("[streaming] no streaming apps running")
    return stopped
