"""The driver's side of deployment fencing and liveness: check the lease, publish a heartbeat.

The control plane issues a fencing token per launch and records it in the registry's
Delta table (`spark_apps.naming.RegistryNames`). A driver started with `--lease-token`
refuses to run unless that token is still the registry's current one, and re-checks it
while running, so a driver that was presumed dead and replaced stops itself instead of
writing next to its successor. The heartbeat file (`DeploymentNames.driver_status_file`)
is rewritten every few seconds by the driver's main loop, independently of whether
micro-batches have data, so the supervisor can tell an idle app from a dead one.
"""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime
from typing import Any

from spark_apps.naming import DeploymentNames, RegistryNames, local_path
from spark_apps.observability import write_json_atomically


class LeaseRejectedError(RuntimeError):
    """This driver's lease token is not (or no longer) the registry's token for its deployment."""


def current_lease_token(registry_root: str, deployment_id: str) -> str | None:
    """The registry's current lease token of `deployment_id` (None if unregistered or never leased)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        table = DeltaTable(RegistryNames(registry_root).deployments_table)
    except TableNotFoundError:
        return None
    rows = table.to_pyarrow_table(columns=["deployment_id", "lease_token"]).to_pylist()
    return next((row["lease_token"] for row in rows if row["deployment_id"] == deployment_id), None)


def verify_lease(registry_root: str, deployment_id: str, token: str) -> None:
    """Raise LeaseRejectedError unless `token` is the registry's current token for the deployment."""
    current = current_lease_token(registry_root, deployment_id)
    if current != token:
        raise LeaseRejectedError(
            f"lease token {token!r} of deployment {deployment_id!r} is not the registry's current token "
            f"({current!r} in {RegistryNames(registry_root).deployments_table}): another driver holds "
            "this deployment, or it was not deployed through the control plane. Refusing to run."
        )


def write_driver_status(
    names: DeploymentNames,
    lease_token: str | None,
    started_at: datetime,
    queries: list[dict[str, Any]],
    ready: bool,
) -> None:
    """Rewrite the driver heartbeat file: pid/host (to signal it), lease token, readiness, query states.

    `ready` turns true once every query got through its first trigger (sources initialised).
    """
    write_json_atomically(
        local_path(names.driver_status_file),
        {
            "deployment_id": names.deployment_id,
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "lease_token": lease_token,
            "started_at": started_at.isoformat(),
            "heartbeat_at": datetime.now(UTC).isoformat(),
            "ready": ready,
            "queries": queries,
        },
    )
