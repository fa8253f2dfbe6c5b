"""The deployment registry as Delta tables in the lake, read and written with `deltalake` (no Spark).

`<lake>/_registry/deployments` holds the current row per deployment and is only changed by
MERGE; `<lake>/_registry/events` is an append-only audit log; `<lake>/_registry/releases` holds
one immutable row per published app version (what a release-driven replay deploys). The lake (not Airflow's
metadata DB) is the one store both the control plane and the Spark driver can reach when
they run on different machines. Every read-modify-write reads a snapshot and MERGEs
against that same snapshot with a `row_version` guard, so a concurrent writer makes the
commit fail (`RegistryConflictError`) instead of being silently overwritten: that is what
makes lease acquisition a compare-and-swap. The live pointer is the `is_live` column; a
switch flips the old and the new row in one MERGE, i.e. one atomic Delta commit.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from revenue_platform.errors import ConfigError, PlatformError
from revenue_platform.lake_storage import delta_storage_options, open_lake_table
from revenue_platform.paths import lake_root
from revenue_platform.registry.models import (
    DeploymentRecord,
    RegistryEvent,
    ReleaseRecord,
    deployment_schema,
    event_schema,
    release_schema,
    utc_now,
)
from spark_apps.contract.delta_reads import AnyOf, Condition, read_delta
from spark_apps.contract.naming import RegistryNames
from spark_apps.contract.object_store import delta_rs_uri

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable

LOG = logging.getLogger(__name__)
_CONFLICT_RETRIES = 5
Result = TypeVar("Result")


class RegistryError(PlatformError):
    """The registry is unusable or inconsistent."""


class DeploymentNotFoundError(RegistryError):
    """No deployment with that id is registered."""


class RegistryConflictError(RegistryError):
    """Someone else changed the deployment between our read and our write (a lost race, by design)."""


class ReleaseNotFoundError(RegistryError):
    """No app release with that version was published."""


def registry_lake_root() -> str:
    """Lake root of the registry: $PLATFORM_LAKE_ROOT, else `<state dir>/lake`."""
    return lake_root()


class DeploymentRegistry:
    """Read and change deployment rows and their audit trail under one lake root."""

    def __init__(self, lake_root: str | None = None, storage_options: Mapping[str, str] | None = None):
        self.lake_root = lake_root or registry_lake_root()
        self.names = RegistryNames(self.lake_root)
        # An object-store lake's settings come from the one place that knows them (`lake_storage`).
        self.storage_options = dict(
            delta_storage_options(self.lake_root) if storage_options is None else storage_options
        )

    # --- tables -------------------------------------------------------------------------------
    def _existing(self, path: str) -> DeltaTable | None:
        return open_lake_table(path, self.storage_options)

    def _table(self, path: str, schema: pa.Schema) -> DeltaTable:
        """The table at `path`, created empty with `schema` on first use (writers only)."""
        from deltalake import DeltaTable, write_deltalake
        from deltalake.exceptions import DeltaError

        existing = self._existing(path)
        if existing is not None:
            return existing
        if "://" not in path:
            os.makedirs(path, exist_ok=True)
        try:
            # "ignore": a writer that lost the creation race leaves the winner's table alone.
            write_deltalake(
                delta_rs_uri(path), schema.empty_table(), mode="ignore", storage_options=self.storage_options
            )
        except DeltaError as error:
            LOG.info("registry table %s created concurrently (%s)", path, error)
        return DeltaTable(delta_rs_uri(path), storage_options=self.storage_options)

    def _deployments(self) -> DeltaTable:
        return self._table(self.names.deployments_table, deployment_schema())

    @property
    def releases_table(self) -> str:
        # Next to the other registry tables (spark_apps.contract.naming.RegistryNames names those two; the
        # Spark app never reads releases, so the name lives with the control plane).
        return f"{self.names.root.rstrip('/')}/releases"

    @staticmethod
    def _rows(table: DeltaTable) -> list[DeploymentRecord]:
        return [DeploymentRecord.from_row(row) for row in read_delta(table).to_pylist()]

    # --- reads --------------------------------------------------------------------------------
    def deployments(self) -> list[DeploymentRecord]:
        """Every registered deployment, sorted by id (reading never creates the tables)."""
        table = self._existing(self.names.deployments_table)
        return sorted(self._rows(table), key=lambda r: r.deployment_id) if table is not None else []

    def find(self, deployment_id: str) -> DeploymentRecord | None:
        return next((r for r in self.deployments() if r.deployment_id == deployment_id), None)

    def registered(self, deployment_id: str, purpose: str) -> DeploymentRecord:
        """The row of `deployment_id` for a trigger that needs its registered config; ConfigError
        naming the field (and `purpose`, why it must be registered) when it is not."""
        record = self.find(deployment_id)
        if record is None:
            raise ConfigError(
                f"deployment_id: {deployment_id!r} is not registered in the lake {self.lake_root}; {purpose}"
            )
        return record

    def get(self, deployment_id: str) -> DeploymentRecord:
        record = self.find(deployment_id)
        if record is None:
            raise DeploymentNotFoundError(
                f"deployment {deployment_id!r} is not registered in {self.names.deployments_table}; "
                "deploy it with the deploy_streaming_app DAG first."
            )
        return record

    def events(
        self,
        deployment_id: str | None = None,
        *,
        involving: Collection[str] | None = None,
    ) -> list[RegistryEvent]:
        """Audit events, oldest first: all, or those of one deployment, or those `involving` any of some
        deployments (theirs, or a switch away from one). The filters go to the Delta
        scan, which skips every file whose column statistics rule it out (each append writes its own
        file): a reader of a few deployments does not read the whole log."""
        table = self._existing(self.names.events_table)
        if table is None:
            return []
        rows = read_delta(table, None, _event_filter(deployment_id, involving)).to_pylist()
        return sorted((RegistryEvent.from_row(row) for row in rows), key=lambda e: e.at)

    def live_deployment(self) -> str | None:
        live = [r.deployment_id for r in self.deployments() if r.is_live]
        if len(live) > 1:
            raise RegistryError(f"more than one live deployment in {self.names.deployments_table}: {live}")
        return live[0] if live else None

    # --- writes -------------------------------------------------------------------------------
    def append_events(self, events: Iterable[RegistryEvent]) -> None:
        import pyarrow as pa
        from deltalake import write_deltalake

        rows = [event.to_row() for event in events]
        if not rows:
            return
        self._table(self.names.events_table, event_schema())
        write_deltalake(
            delta_rs_uri(self.names.events_table),
            pa.Table.from_pylist(rows, schema=event_schema()),
            mode="append",
            storage_options=self.storage_options,
        )

    def _merge(
        self,
        table: DeltaTable,
        rows: list[DeploymentRecord],
        columns: list[str] | None,
        insert: bool,
        expected_versions: dict[str, int],
    ) -> dict[str, Any]:
        """One MERGE (one commit) of `rows` against the snapshot `table` was read from."""
        import pyarrow as pa
        from deltalake.exceptions import CommitFailedError

        source = pa.Table.from_pylist([r.to_row() for r in rows], schema=deployment_schema())
        expected = [expected_versions.get(r.deployment_id, -1) for r in rows]
        source = source.append_column("expected_version", pa.array(expected, pa.int64()))
        merger = table.merge(
            source, predicate="t.deployment_id = s.deployment_id", source_alias="s", target_alias="t"
        )
        if insert:
            merger = merger.when_not_matched_insert({name: f"s.{name}" for name in deployment_schema().names})
        else:
            updated = columns or deployment_schema().names
            merger = merger.when_matched_update(
                {name: f"s.{name}" for name in updated if name != "deployment_id"},
                predicate="t.row_version = s.expected_version",
            )
        try:
            metrics: dict[str, Any] = merger.execute()
        except CommitFailedError as error:
            raise _CommitLost(f"concurrent registry change: {error}") from error
        return metrics

    def register(self, record: DeploymentRecord, actor: str, events: Iterable[RegistryEvent] = ()) -> None:
        """Insert a new deployment row; RegistryConflictError if one with that id exists."""
        record.row_version, record.updated_at, record.updated_by = 1, utc_now(), actor
        metrics = _retried_on_lost_commits(
            lambda: self._merge(self._deployments(), [record], None, insert=True, expected_versions={})
        )
        if metrics.get("num_target_rows_inserted", 0) != 1:
            raise RegistryConflictError(f"deployment {record.deployment_id!r} is already registered")
        self.append_events([RegistryEvent(record.deployment_id, "registered", actor), *events])

    def update(
        self,
        deployment_id: str,
        changes: Mapping[str, Any],
        actor: str,
        *,
        expected_version: int | None = None,
        expected_lease: str | None = None,
        events: Iterable[RegistryEvent] = (),
    ) -> DeploymentRecord:
        """Change some columns of one row; return the new row.

        With `expected_version` or `expected_lease` the write is a compare-and-swap that raises
        RegistryConflictError if the row moved on; without them a lost race is re-read and retried.
        A commit that lost to another row's change (the table's one file holds every row, so Delta
        refuses any overlapping commit) is retried either way: the guard is checked again on the
        re-read row, and the MERGE only updates the row at the version it read.
        """
        unknown = set(changes) - set(deployment_schema().names)
        if unknown:
            raise RegistryError(f"unknown registry columns: {sorted(unknown)}")
        for attempt in range(_CONFLICT_RETRIES):
            table = self._deployments()
            current = next((r for r in self._rows(table) if r.deployment_id == deployment_id), None)
            if current is None:
                raise DeploymentNotFoundError(f"deployment {deployment_id!r} is not registered")
            if expected_version is not None and current.row_version != expected_version:
                raise RegistryConflictError(
                    f"deployment {deployment_id!r} changed (version {current.row_version}, "
                    f"expected {expected_version})"
                )
            if expected_lease is not None and current.lease_token != expected_lease:
                raise RegistryConflictError(
                    f"deployment {deployment_id!r} is held by lease {current.lease_token!r}, not ours "
                    f"({expected_lease!r})"
                )
            new = DeploymentRecord.from_row({**current.to_row(), **changes})
            new.row_version, new.updated_at, new.updated_by = current.row_version + 1, utc_now(), actor
            columns = [*changes, "row_version", "updated_at", "updated_by"]
            try:
                metrics = self._merge(
                    table,
                    [new],
                    columns,
                    insert=False,
                    expected_versions={deployment_id: current.row_version},
                )
            except _CommitLost:
                if attempt == _CONFLICT_RETRIES - 1:
                    raise
                time.sleep(0.1 * (attempt + 1))
                continue
            if metrics.get("num_target_rows_updated", 0) != 1:
                raise RegistryConflictError(f"deployment {deployment_id!r} changed during the update")
            self.append_events(events)
            return new
        raise RegistryConflictError(f"deployment {deployment_id!r}: too many concurrent changes")

    def acquire_lease(
        self, deployment_id: str, expected_version: int, actor: str, changes: Mapping[str, Any], reason: str
    ) -> DeploymentRecord:
        """Issue a new fencing token (compare-and-swap on `expected_version`) together with `changes`."""
        current = self.get(deployment_id)
        epoch = current.lease_epoch + 1
        token = f"{epoch}-{uuid.uuid4().hex[:12]}"
        return self.update(
            deployment_id,
            {**changes, "lease_epoch": epoch, "lease_token": token, "lease_acquired_at": utc_now()},
            actor,
            expected_version=expected_version,
            events=[
                RegistryEvent(
                    deployment_id,
                    "lease_acquired",
                    actor,
                    current.lease_token,
                    token,
                    reason,
                    {"epoch": epoch},
                )
            ],
        )

    def switch_live(self, deployment_id: str, actor: str, reason: str) -> str | None:
        """Point `live` at `deployment_id` in one Delta commit; return the previous live deployment."""
        return _retried_on_lost_commits(lambda: self._switch_live(deployment_id, actor, reason))

    def _switch_live(self, deployment_id: str, actor: str, reason: str) -> str | None:
        table = self._deployments()
        records = self._rows(table)
        if not any(r.deployment_id == deployment_id for r in records):
            raise DeploymentNotFoundError(f"cannot make unregistered deployment {deployment_id!r} live")
        previous = [r for r in records if r.is_live]
        if [r.deployment_id for r in previous] == [deployment_id]:
            return deployment_id
        now = utc_now()
        changed = []
        for record in records:
            if record.is_live == (record.deployment_id == deployment_id):
                continue
            expected = record.row_version
            record.is_live = record.deployment_id == deployment_id
            record.row_version, record.updated_at, record.updated_by = expected + 1, now, actor
            changed.append((record, expected))
        metrics = self._merge(
            table,
            [r for r, _ in changed],
            ["is_live", "row_version", "updated_at", "updated_by"],
            insert=False,
            expected_versions={r.deployment_id: v for r, v in changed},
        )
        if metrics.get("num_target_rows_updated", 0) != len(changed):
            # Cannot happen against one snapshot unless the table was rewritten underneath us.
            raise RegistryConflictError(f"live switch to {deployment_id!r} raced with another change")
        before = previous[0].deployment_id if previous else None
        self.append_events(
            [RegistryEvent(deployment_id, "live_switched", actor, before, deployment_id, reason)]
        )
        return before

    # --- releases -----------------------------------------------------------------------------
    def releases(self) -> list[ReleaseRecord]:
        """Every published release, oldest first (reading never creates the table)."""
        table = self._existing(self.releases_table)
        rows = read_delta(table).to_pylist() if table is not None else []
        return sorted((ReleaseRecord.from_row(row) for row in rows), key=lambda r: r.published_at)

    def find_release(self, version: str) -> ReleaseRecord | None:
        return next((r for r in self.releases() if r.version == version), None)

    def get_release(self, version: str) -> ReleaseRecord:
        release = self.find_release(version)
        if release is None:
            raise ReleaseNotFoundError(
                f"app version {version!r} was never published in {self.releases_table}; publish it with "
                "the publish_app_version DAG (make release VERSION=...) first."
            )
        return release

    def publish_release(self, release: ReleaseRecord) -> tuple[ReleaseRecord, bool]:
        """Record a release (one MERGE: insert unless the version exists); return it and whether it is new.

        Versions are immutable: publishing a version again with the same config returns the existing
        row (a retried task, or a deliberate re-run of its replay); with another config it is refused.
        """
        import pyarrow as pa
        from deltalake.exceptions import CommitFailedError

        source = pa.Table.from_pylist([release.to_row()], schema=release_schema())
        try:
            metrics = (
                self._table(self.releases_table, release_schema())
                .merge(source, predicate="t.version = s.version", source_alias="s", target_alias="t")
                .when_not_matched_insert({name: f"s.{name}" for name in release_schema().names})
                .execute()
            )
        except CommitFailedError as error:
            raise RegistryConflictError(f"concurrent release of {release.version!r}: {error}") from error
        if metrics.get("num_target_rows_inserted", 0) == 1:
            return release, True
        existing = self.get_release(release.version)
        if existing.config_hash != release.config_hash:
            raise RegistryConflictError(
                f"app version {release.version!r} was already published by {existing.published_by} at "
                f"{existing.published_at:%Y-%m-%d %H:%M:%S} UTC with another config "
                f"({existing.config_overrides_json}); versions are immutable, publish a new version"
            )
        return existing, False


class _CommitLost(RegistryConflictError):
    """A registry MERGE lost its commit to a concurrent one. Every row lives in one small file, so Delta
    refuses any commit that overlaps another, also one that changed a different deployment: the
    caller reads the table again and retries (its own checks then decide whether its row moved)."""


def _retried_on_lost_commits(step: Callable[[], Result]) -> Result:
    """`step` (a read of the table and one MERGE against what it read), again after a lost commit."""
    for attempt in range(_CONFLICT_RETRIES - 1):
        try:
            return step()
        except _CommitLost:
            time.sleep(0.1 * (attempt + 1))
    return step()


def resolve_live_deployment(lake_root: str | None = None) -> str | None:
    """The deployment whose outputs readers must use, or None: THE one way to read the live pointer."""
    return DeploymentRegistry(lake_root).live_deployment()


def _event_filter(deployment_id: str | None, involving: Collection[str] | None) -> list[Condition | AnyOf]:
    """The conditions of `DeploymentRegistry.events` (none: every event)."""
    conditions: list[Condition | AnyOf] = []
    if deployment_id is not None:
        conditions.append(("deployment_id", "=", deployment_id))
    if involving is not None:
        ids = sorted(involving)
        conditions.append(AnyOf((("deployment_id", "in", ids), ("from_value", "in", ids))))
    return conditions
