"""Lake maintenance: what keeps a deployment's tables as cheap to read on day 30 as on day 1 (issue 57).

Every live batch commits to gold and bronze. Gold's MERGE leaves the file it rewrote behind (one
superseded file per batch, bounded by an hour of windows in gold's hourly layout); bronze appends
small files; Delta keeps every superseded file until VACUUM removes it and every log entry until log
cleanup does. Nothing else removes them, so without this the lake's disk grows with every batch.

`maintain_lake` runs over each registered deployment's gold and bronze, and the lake's registry and
quality tables, with delta-rs (no Spark), beside running apps:
- compaction of *closed* partitions only: gold hours ended `GOLD_CLOSED_AFTER` ago, bronze days
  before today (UTC). A live batch writes only open hours and today's bronze, so compaction and
  the app never rewrite the same files (Delta's conflict check would retry the app's MERGE if they
  did: `storage.gold.retry_concurrent_gold_write`). Compaction commits change no data
  (`dataChange=false`): readers and the revenue numbers see the same rows.
- VACUUM of files no snapshot newer than the table's retention references; the retentions are the
  readers' needs (docs/operations.md): gold 24 h (a reader of gold holds a snapshot for seconds to
  minutes: the query API, quality checks, a reprocess), bronze 7 days (reprocess and blue-green
  replays read bronze's current snapshot; the retention bounds how far back an audit can time-travel
  it), the registry and quality results 7 days.
- a log checkpoint and the removal of log entries older than the table's log retention (Delta's
  `delta.logRetentionDuration`, 30 days unless the table says otherwise), and of the checksum files
  of the entries removed, Spark's hidden Hadoop ones on a local disk included
  (`remove_orphan_checksums`; VACUUM in full mode removes those of data files);
- on a table Spark writes (bronze), the checksum file of each commit it made itself
  (`lake_checksums`): without one, the app's next bronze append rebuilds the table's whole state.

A replay's frozen history table is never touched: a replay reads it as a stream from version 0, and
a VACUUM after compaction would delete files that stream has not read yet.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from revenue_platform.errors import ConfigError
from revenue_platform.forms import FORM_MODEL_CONFIG, OptionalDeploymentId, validated
from revenue_platform.lake_checksums import ChecksumsWritten, write_checksums_since
from revenue_platform.lake_storage import delta_storage_options, open_lake_table, snapshot_size
from spark_apps.contract.gold_layout import GOLD_HOUR_COLUMN, window_hour
from spark_apps.contract.naming import DeploymentNames, local_path
from spark_apps.contract.object_store import is_object_store_root
from spark_apps.contract.side_files import object_key, object_store_filesystem, write_json

if TYPE_CHECKING:
    from deltalake import DeltaTable

LOG = logging.getLogger(__name__)

PartitionFilters = list[tuple[str, str, Any]]
"""delta-rs partition filters: (column, operator, value), all of them."""
ClosedPartitions = Callable[["DeltaTable"], "PartitionFilters | None"]
"""A table's partitions no live batch writes any more (None: compact nothing)."""

# A gold hour is compacted once no live batch writes it: windows of the hour have ended and the
# watermark (minutes behind) has passed them. Late orders for it are not counted any more.
GOLD_CLOSED_AFTER = timedelta(hours=2)
# Bounds of what a form may ask for. Below the minimum, a reader that opened a snapshot just before
# the VACUUM could find its files gone (the platform's longest gold reader takes minutes).
MIN_RETENTION = timedelta(hours=1)
MAX_RETENTION = timedelta(days=365)
# Compaction writes files up to this size: large enough that a day of bronze is a few files,
# small enough that one file is read in well under a second.
TARGET_FILE_BYTES = 128 * 1024 * 1024


@dataclass(frozen=True)
class MaintenancePolicy:
    """How long each kind of table keeps the files its current snapshot no longer references."""

    gold_retention: timedelta = timedelta(hours=24)
    bronze_retention: timedelta = timedelta(days=7)
    control_retention: timedelta = timedelta(days=7)  # the registry's and quality results' tables
    target_file_bytes: int = TARGET_FILE_BYTES

    def __post_init__(self) -> None:
        for name in ("gold_retention", "bronze_retention", "control_retention"):
            value = getattr(self, name)
            if not timedelta(0) <= value <= MAX_RETENTION:
                raise ConfigError(f"{name}: {value} is outside 0 .. {MAX_RETENTION}")
        if self.target_file_bytes < 1024 * 1024:
            raise ConfigError(f"target_file_bytes: {self.target_file_bytes} is below 1 MiB")


_HOUR = timedelta(hours=1)


class MaintenanceRequest(BaseModel):
    """The maintain_lake trigger form (its schedule runs the defaults), validated: which deployment (or
    all), the retentions in whole hours between MIN_RETENTION and MAX_RETENTION, dry run or not."""

    model_config = FORM_MODEL_CONFIG

    deployment_id: OptionalDeploymentId = None
    """Maintain this deployment's gold and bronze only; empty = every registered deployment."""
    gold_retention_hours: int = Field(
        MaintenancePolicy.gold_retention // _HOUR, ge=MIN_RETENTION // _HOUR, le=MAX_RETENTION // _HOUR
    )
    """Gold keeps files its snapshot stopped referencing for this many hours (time travel this far
    back; readers of gold hold a snapshot for minutes)."""
    bronze_retention_hours: int = Field(
        MaintenancePolicy.bronze_retention // _HOUR, ge=MIN_RETENTION // _HOUR, le=MAX_RETENTION // _HOUR
    )
    """The same for bronze, the registry and quality results (an audit can time-travel bronze this far
    back)."""
    dry_run: bool = False
    """Measure and list; compact and delete nothing."""

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> MaintenanceRequest:
        """The request in a run's params; ConfigError names each bad field."""
        return validated(cls, params)

    @property
    def policy(self) -> MaintenancePolicy:
        """The retentions as a policy; the registry and quality tables keep bronze's."""
        return MaintenancePolicy(
            gold_retention=timedelta(hours=self.gold_retention_hours),
            bronze_retention=timedelta(hours=self.bronze_retention_hours),
            control_retention=timedelta(hours=self.bronze_retention_hours),
        )


@dataclass
class TableMaintenance:
    """What maintenance found and did on one table (sizes of the current snapshot's files)."""

    table: str
    role: str
    kind: str = ""  # gold, bronze, registry_deployments, ... (the metrics' `table` label)
    deployment: str = ""  # the deployment whose table it is; "" for the lake's own tables
    files_before: int = 0
    bytes_before: int = 0
    files_after: int = 0
    bytes_after: int = 0
    files_compacted: int = 0
    files_written_by_compaction: int = 0
    files_vacuumed: int = 0
    checksums_removed: int = 0  # checksum files of log entries the cleanup removed
    checksums_written: int = 0  # `.crc` files of maintenance's own commits on a table Spark writes
    skipped: str | None = None
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        if self.skipped:
            return f"{self.role} {self.table}: skipped ({self.skipped})"
        return (
            f"{self.role} {self.table}: {self.files_before} files / {_mib(self.bytes_before)} -> "
            f"{self.files_after} files / {_mib(self.bytes_after)}; compacted {self.files_compacted} into "
            f"{self.files_written_by_compaction}; vacuumed {self.files_vacuumed} unreferenced files; "
            f"removed {self.checksums_removed} checksums of expired log entries; "
            f"wrote {self.checksums_written} checksums of its own commits"
        ) + "".join(f"; {note}" for note in self.notes)


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MiB"


def maintain_table(
    table_path: str,
    role: str,
    retention: timedelta,
    closed_partitions: ClosedPartitions | None,
    *,
    kind: str = "",
    deployment: str = "",
    target_file_bytes: int = TARGET_FILE_BYTES,
    storage_options: Mapping[str, str] | None = None,
    dry_run: bool = False,
) -> TableMaintenance:
    """Compact the partitions `closed_partitions` selects (it gives the table's delta-rs partition
    filters, or None; None instead of it: no compaction), VACUUM what the current snapshot stopped
    referencing more than `retention` ago, checkpoint the log and drop its expired entries.
    `dry_run`: measure and list, change nothing."""
    report = TableMaintenance(table=table_path, role=role, kind=kind, deployment=deployment)
    table = open_lake_table(table_path, storage_options)
    if table is None:
        report.skipped = "no table yet"
        return report
    report.files_before, report.bytes_before = snapshot_size(table)
    filters = closed_partitions(table) if closed_partitions is not None else None
    if filters is not None and not dry_run:
        version_before = table.version()
        metrics = table.optimize.compact(partition_filters=filters, target_size=target_file_bytes)
        report.files_compacted = int(metrics.get("numFilesRemoved", 0))
        report.files_written_by_compaction = int(metrics.get("numFilesAdded", 0))
        # At once, before the VACUUM's listing: a live append between the two rebuilds Spark's state.
        _count_checksums(report, write_checksums_since(table_path, version_before, storage_options))
    version_before = table.version()
    vacuumed = table.vacuum(
        retention_hours=_whole_hours(retention),
        dry_run=dry_run,
        # The platform's own bound (MIN_RETENTION, checked on the form); delta-rs would otherwise
        # refuse anything under the table's 7-day default.
        enforce_retention_duration=False,
        # Every file the snapshot does not reference, by its age: gold's and bronze's tombstones expire
        # after an hour (`storage.tables.LIVE_TABLE_PROPERTIES`), and the default (lite) VACUUM finds
        # only files whose tombstone is still in the snapshot: the rest would stay on disk for good.
        # A tombstone still in the snapshot protects its file until `retention` after its removal.
        full=True,
    )
    report.files_vacuumed = len(vacuumed)
    if not dry_run:
        table.update_incremental()
        if table.version() != version_before:  # a VACUUM that deleted files committed its start and end
            _count_checksums(report, write_checksums_since(table_path, version_before, storage_options))
        table.create_checkpoint()
        table.cleanup_metadata()
        report.checksums_removed = remove_orphan_checksums(table_path, storage_options)
    table.update_incremental()
    report.files_after, report.bytes_after = snapshot_size(table)
    return report


def _count_checksums(report: TableMaintenance, outcome: ChecksumsWritten) -> None:
    report.checksums_written += outcome.written
    if outcome.stopped:
        report.notes.append(f"checksums: stopped, {outcome.stopped}")


def orphan_checksums(log_names: Iterable[str]) -> list[str]:
    """The checksum files of a Delta log (names in `_delta_log`) older than its oldest commit left,
    whose file is gone: checksums of entries the log cleanup removed. Two kinds, both left by Spark:
    - Delta's `<version>.crc`, one per commit. delta-rs's cleanup removes expired commits and
      checkpoints but not these, and Spark's own cleanup cuts at the start of a day: left alone, a
      table written every 2 s keeps ~17,500 a day, and every commit lists them all.
    - Hadoop's hidden `.<name>.crc` beside every file Spark writes on a local disk (its checksummed
      local file system: `.<version>.json.crc`, `.<version>.crc.crc`, a checkpoint's): nothing removes
      them, so without this they grow by two per commit for good (bronze's log after a two-hour soak:
      5,114 of its 8,310 files, 1,966 of them beside entries the cleanup had removed).
    None of them when the log has no commit file (nothing to compare with)."""
    names = list(log_names)
    commits = [int(name[:-5]) for name in names if name.endswith(".json") and name[:-5].isdigit()]
    if not commits:
        return []
    oldest = min(commits)
    delta_checksums = {
        name for name in names if name.endswith(".crc") and name[:-4].isdigit() and int(name[:-4]) < oldest
    }
    staying = set(names) - delta_checksums
    hidden = set()
    for name in names:
        version = name[1:].split(".", 1)[0]
        if (
            name.startswith(".")
            and name.endswith(".crc")
            and version.isdigit()
            and int(version) < oldest
            and name[1:-4] not in staying
        ):
            hidden.add(name)
    return sorted(delta_checksums | hidden)


def remove_orphan_checksums(table_path: str, storage_options: Mapping[str, str] | None = None) -> int:
    """Remove `orphan_checksums` of the table's log, on a local disk or the object store; how many.
    A failure is logged, not raised: a checksum left behind costs a listing entry, never data."""
    log_dir = f"{table_path.rstrip('/')}/_delta_log"
    try:
        if not is_object_store_root(table_path):
            folder = local_path(log_dir)
            orphans = orphan_checksums(os.listdir(folder))
            for name in orphans:
                (folder / name).unlink(missing_ok=True)
            return len(orphans)
        from pyarrow import fs

        store = object_store_filesystem(storage_options)
        listed = store.get_file_info(fs.FileSelector(object_key(log_dir)))
        orphans = orphan_checksums(info.base_name for info in listed)
        for name in orphans:
            store.delete_file(f"{object_key(log_dir)}/{name}")
        return len(orphans)
    except Exception as error:  # the table's data and log are intact; the next run tries again
        LOG.warning("could not remove old checksum files of %s: %s", log_dir, error)
        return 0


def _whole_hours(retention: timedelta) -> int:
    return int(retention // timedelta(hours=1))


def _gold_closed_hours(now: datetime) -> ClosedPartitions:
    """Gold's hours no live batch writes any more; nothing for a table in the layout before hours (one
    file that live batches rewrite: nothing to compact)."""

    def closed(table: DeltaTable) -> PartitionFilters | None:
        if GOLD_HOUR_COLUMN not in table.metadata().partition_columns:
            return None
        return [(GOLD_HOUR_COLUMN, "<", window_hour(now - GOLD_CLOSED_AFTER))]

    return closed


def _bronze_closed_days(today: date) -> ClosedPartitions:
    """Bronze's ingest days before today (UTC): live batches append to today's only."""
    return lambda table: [("ingest_date", "<", today.isoformat())]


def maintain_lake(
    lake_root: str,
    deployment_ids: Iterable[str],
    policy: MaintenancePolicy | None = None,
    *,
    now: datetime | None = None,
    dry_run: bool = False,
    say: Callable[[str], None] = LOG.info,
) -> list[TableMaintenance]:
    """Maintain the gold and bronze tables of `deployment_ids` and the lake's registry and quality
    tables; one line per table through `say` as it finishes. A table that fails is reported and the
    others are still maintained; the failures are raised together at the end."""
    from revenue_platform.quality.results import failing_windows_table_path, results_table_path
    from revenue_platform.registry.store import DeploymentRegistry

    policy = policy or MaintenancePolicy()
    now = now or datetime.now(UTC)
    options = delta_storage_options(lake_root) or None
    closed_hours = _gold_closed_hours(now)
    closed_days = _bronze_closed_days(now.date())
    # (path, kind, deployment, retention, closed partitions)
    tables: list[tuple[str, str, str, timedelta, ClosedPartitions | None]] = []
    for deployment_id in deployment_ids:
        names = DeploymentNames(lake_root, deployment_id)
        tables.append((names.gold_revenue_table, "gold", deployment_id, policy.gold_retention, closed_hours))
        tables.append(
            (names.bronze_orders_table, "bronze", deployment_id, policy.bronze_retention, closed_days)
        )
    registry = DeploymentRegistry(lake_root)
    for kind, path in (
        ("registry_deployments", registry.names.deployments_table),
        ("registry_events", registry.names.events_table),
        ("registry_releases", registry.releases_table),
        ("quality_results", results_table_path(lake_root)),
        ("quality_failing_windows", failing_windows_table_path(lake_root)),
    ):
        tables.append((path, kind, "", policy.control_retention, None))

    reports, failures = [], []
    for path, kind, deployment, retention, closed in tables:
        role = f"{kind}[{deployment}]" if deployment else kind
        try:
            report = maintain_table(
                path,
                role,
                retention,
                closed,
                kind=kind,
                deployment=deployment,
                target_file_bytes=policy.target_file_bytes,
                storage_options=options,
                dry_run=dry_run,
            )
        except Exception as error:  # one broken table must not keep the others from maintenance
            report = TableMaintenance(
                table=path, role=role, kind=kind, deployment=deployment, skipped=f"FAILED: {error}"
            )
            failures.append(f"{role} {path}: {error}")
        say(("[dry run] " if dry_run else "") + report.summary())
        reports.append(report)
    if failures:
        raise RuntimeError("lake maintenance failed on " + "; ".join(failures))
    if not dry_run:
        write_json(maintenance_record(lake_root), _record(reports, datetime.now(UTC)), options)
    return reports


def maintenance_record(lake_root: str) -> str:
    """Where the last successful run says when it finished and what each table holds (the metrics
    endpoint serves it: `revenue_lake_maintenance_last_success_timestamp_seconds`, table sizes)."""
    return f"{lake_root.rstrip('/')}/_maintenance/last_run.json"


def _record(reports: list[TableMaintenance], finished_at: datetime) -> dict[str, Any]:
    return {
        "finished_at": finished_at.isoformat(),
        "tables": [
            {"kind": r.kind, "deployment": r.deployment, "files": r.files_after, "bytes": r.bytes_after}
            for r in reports
            if not r.skipped
        ],
    }


def reports_as_dicts(reports: list[TableMaintenance]) -> list[dict[str, Any]]:
    return [asdict(report) for report in reports]
