"""The driver's side of deployment fencing and liveness: check the lease, stamp the commits, publish a
heartbeat.

The control plane issues a fencing token per launch (`<epoch>-<12 hex>`) and records it in the
registry's Delta table (`spark_apps.contract.naming.RegistryNames`). A driver started with
`--lease-token` refuses to run unless that token is still the registry's current one, and `LeaseFence`
checks it again before each batch's writes, so a driver that was presumed dead and replaced stops
at its next batch. A check before a write cannot stop a driver that stalls between the check and the
write (a GC pause, SIGSTOP), so the fence is also in the commits themselves (docs/architecture.md,
"Fencing is in the commits"): each gold MERGE carries the lease epoch as a Delta application
transaction (`CommitStamp`, refused against a snapshot that records a newer epoch), and the revenue
topic's Kafka transactions use one `transactional.id` per deployment, so the successor's producer
fences the old one (`spark_apps.storage.revenue_topic`).
The heartbeat file (`DeploymentNames.driver_status_file`) is rewritten every few seconds
by the driver's main loop, independently of whether micro-batches have data, so the
supervisor can tell an idle app from a dead one.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from spark_apps.contract.delta_reads import open_delta, read_delta
from spark_apps.contract.naming import DeploymentNames, RegistryNames
from spark_apps.contract.side_files import write_json


class LeaseRejectedError(RuntimeError):
    """This driver's lease token is not (or no longer) the registry's token for its deployment."""


GOLD_COMMIT_APP_ID = "revenue-platform-lease"
"""Delta application transaction id each gold commit of a leased driver carries (`CommitStamp`)."""
_LEASE_TOKEN_EPOCH = re.compile(r"([0-9]{1,18})-[0-9a-f]{12}")


def lease_epoch(token: str | None) -> int | None:
    """The epoch of a lease token as the registry issues it (`<epoch>-<12 hex>`), else None."""
    match = _LEASE_TOKEN_EPOCH.fullmatch(token or "")
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class CommitStamp:
    """What a gold commit records of the driver that made it: its lease epoch and micro-batch.

    The fence in the commit itself: a lease check before a write cannot stop a driver that stalls
    between the check and its commit (a GC pause, SIGSTOP, a frozen VM) from committing after its
    successor. So each gold commit carries a Delta application transaction (`GOLD_COMMIT_APP_ID`,
    `version`), and a commit is refused when the table already records a newer epoch: delta-rs reads
    the recorded version from the very snapshot it commits against (a successor's commit after that
    snapshot is a conflict, and the retry reads again); Spark's Delta skips a write whose version is
    not above the recorded one (idempotent DML). Within an epoch the version grows with the batch.
    """

    epoch: int
    batch_id: int

    @property
    def version(self) -> int:
        return (self.epoch << 32) | self.batch_id

    def refusal(self, recorded_version: int | None) -> LeaseRejectedError | None:
        """Why a table whose gold commits record `recorded_version` refuses this commit (None: it takes
        it): a newer lease has written it."""
        if recorded_version is None or recorded_version >> 32 <= self.epoch:
            return None
        return LeaseRejectedError(
            f"gold was already committed by lease epoch {recorded_version >> 32}, newer than this "
            f"driver's {self.epoch}: its successor owns the deployment, and this batch's totals "
            f"(batch {self.batch_id}) are not written"
        )


def current_lease_token(
    registry_root: str, deployment_id: str, storage_options: Mapping[str, str] | None = None
) -> str | None:
    """The registry's current lease token of `deployment_id` (None if unregistered or never leased);
    `storage_options`: delta-rs's, for a registry on an object store."""
    table = open_delta(RegistryNames(registry_root).deployments_table, storage_options)
    if table is None:
        return None
    rows = read_delta(table, ["lease_token"], [("deployment_id", "=", deployment_id)]).to_pylist()
    return next((row["lease_token"] for row in rows), None)


def verify_lease(
    registry_root: str, deployment_id: str, token: str, storage_options: Mapping[str, str] | None = None
) -> None:
    """Raise LeaseRejectedError unless `token` is the registry's current token for the deployment."""
    current = current_lease_token(registry_root, deployment_id, storage_options)
    if current != token:
        raise LeaseRejectedError(
            f"lease token {token!r} of deployment {deployment_id!r} is not the registry's current token "
            f"({current!r} in {RegistryNames(registry_root).deployments_table}): another driver holds "
            "this deployment, or it was not deployed through the control plane. Refusing to run."
        )


class LeaseFence:
    """The lease check in front of every write of one driver.

    `check` reads the registry's current token (a Delta snapshot read, no Spark job) and
    raises LeaseRejectedError when it changed; the error fails the micro-batch before its
    commit, so its offsets are never marked done and the successor redoes the batch. The
    first rejection is kept in `rejected` so the driver can exit as superseded rather than
    as crashed. A fence without a token (a bounded run outside the control plane) never refuses.
    """

    def __init__(
        self,
        registry_root: str,
        deployment_id: str,
        token: str | None,
        storage_options: Mapping[str, str] | None = None,
    ) -> None:
        self.registry_root = registry_root
        self.storage_options = dict(storage_options or {})
        self.deployment_id = deployment_id
        self.token = token
        self.rejected: LeaseRejectedError | None = None
        self.checks = 0
        self._table: Any = None
        self._verified_version: int | None = None

    def _registry_moved(self) -> bool:
        """Whether the registry has a commit this fence has not verified against yet.

        Reading the rows costs tens of milliseconds, several times per batch; catching up with the
        Delta log costs well under one. Any change of a lease is a new registry version, so an
        unchanged version means an unchanged token."""
        from deltalake.exceptions import TableNotFoundError

        try:
            if self._table is None:
                self._table = open_delta(
                    RegistryNames(self.registry_root).deployments_table, self.storage_options
                )
            else:
                self._table.update_incremental()
        except TableNotFoundError:
            return True  # verify_lease reports the missing registry
        if self._table is None:
            return True
        return bool(self._table.version() != self._verified_version)

    def stamp(self, batch_id: int) -> CommitStamp | None:
        """The stamp this driver's gold commit of `batch_id` carries (None without a lease)."""
        epoch = lease_epoch(self.token)
        return None if epoch is None else CommitStamp(epoch, batch_id)

    def refused(self, error: LeaseRejectedError) -> LeaseRejectedError:
        """Record a refusal the storage made (a stale commit), so the driver exits as superseded."""
        if self.rejected is None:
            self.rejected = error
        return error

    def check(self, before: str) -> None:
        """Raise LeaseRejectedError unless this driver still holds the lease; `before` names the write."""
        if self.token is None:
            return
        self.checks += 1
        if not self._registry_moved():
            return
        try:
            version = self._table.version() if self._table is not None else None
            verify_lease(self.registry_root, self.deployment_id, self.token, self.storage_options)
            self._verified_version = version
        except LeaseRejectedError as error:
            rejected = LeaseRejectedError(f"{error} (checked before {before})")
            if self.rejected is None:
                self.rejected = rejected
            raise rejected from error


def write_driver_status(
    names: DeploymentNames,
    lease_token: str | None,
    started_at: datetime,
    queries: list[dict[str, Any]],
    ready: bool,
    storage_options: Mapping[str, str] | None = None,
) -> None:
    """Rewrite the driver heartbeat file: pid/host (to signal it), lease token, readiness, query states.

    `ready` turns true once every query got through its first trigger (sources initialised);
    `storage_options`: delta-rs's, for a lake on an object store (`spark_apps.contract.side_files`).
    """
    write_json(
        names.driver_status_file,
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
        storage_options,
    )
