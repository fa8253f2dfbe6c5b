"""Checksum files for maintenance's commits on a table Spark writes, so Spark's next commit stays cheap.

Spark writes a `<version>.crc` beside each commit it makes (the table's file count, bytes, a file-size
histogram, its metadata and protocol) and derives the next one from it, so a commit costs its own
actions. delta-rs writes none. After a commit of maintenance's (bronze's compaction, a VACUUM that
deletes files), Spark's next append found no checksum for the version it builds on and rebuilt the
table's whole state first: seconds, in a live batch (docs/performance.md, "Day 30 against day 1").

So maintenance writes the checksum of each commit it made, derived from Spark's checksum of the
version before and the commit's own actions, and only when that derivation is exact:
- the commit is one of maintenance's (delta-rs's OPTIMIZE, VACUUM START or VACUUM END);
- the previous version has a checksum and it holds only fields this module knows;
- the commit holds only `commitInfo`, `add` and `remove` actions, without deletion vectors, and every
  `remove` says its size (metadata, protocol, transactions and domains are then unchanged);
- the derived file count, bytes and size histogram equal those of delta-rs's snapshot of that version.
Otherwise it writes nothing more and Spark rebuilds the state as before: slower, never wrong. A
checksum file already there is never replaced (one it cannot read stops it). The list of all files,
which Spark keeps in a small table's checksum, is left out of a derived one once files change (the app
keeps none: `spark_apps.engine.session.DELTA_CONF`).

Spark's own check of a checksum against the rebuilt state
(`spark.databricks.delta.incremental.commit.verify`, fatal on a mismatch) passes on these:
tests/unit/revenue_platform/test_lake_checksums.py runs Spark's next append with it on.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import uuid
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from revenue_platform.lake_storage import open_lake_table, snapshot_file_sizes
from spark_apps.contract.naming import local_path
from spark_apps.contract.object_store import is_object_store_root
from spark_apps.contract.side_files import object_key, object_store_filesystem

if TYPE_CHECKING:
    from deltalake import DeltaTable

LOG = logging.getLogger(__name__)

# Every field of the checksums Delta 4.4 writes for a table without deletion vectors, row tracking or
# in-commit timestamps (bronze's). A checksum with another field is not derived from.
KNOWN_FIELDS = frozenset(
    {
        "txnId",
        "tableSizeBytes",
        "numFiles",
        "numMetadata",
        "numProtocol",
        "setTransactions",
        "domainMetadata",
        "metadata",
        "protocol",
        "fileSizeHistogram",
        "allFiles",
    }
)
_FILE_ACTIONS = ("add", "remove")


def derive_checksum(
    previous: Mapping[str, Any], actions: Sequence[Mapping[str, Any]]
) -> dict[str, Any] | None:
    """The checksum of a commit of `actions` (its JSON lines, parsed) made on the version `previous` is
    the checksum of; None when it cannot be derived exactly (see the module's conditions)."""
    if not set(previous) <= KNOWN_FIELDS or not {"numFiles", "tableSizeBytes"} <= set(previous):
        return None
    added: list[int] = []
    removed: list[int] = []
    for action in actions:
        if len(action) != 1:
            return None
        kind = next(iter(action))
        if kind == "commitInfo":
            continue
        if kind not in _FILE_ACTIONS:
            return None
        entry = action[kind]
        size = entry.get("size")
        if entry.get("deletionVector") or not isinstance(size, int) or size < 0:
            return None
        (added if kind == "add" else removed).append(size)
    # Spark's list of the table's files (a small table's checksum has one) is not rebuilt here.
    files_changed = bool(added or removed)
    derived = {key: value for key, value in previous.items() if key != "allFiles" or not files_changed}
    derived["txnId"] = str(uuid.uuid4())
    derived["numFiles"] = previous["numFiles"] + len(added) - len(removed)
    derived["tableSizeBytes"] = previous["tableSizeBytes"] + sum(added) - sum(removed)
    if derived["numFiles"] < 0 or derived["tableSizeBytes"] < 0:
        return None
    if "fileSizeHistogram" in previous:
        histogram = _histogram_after(previous["fileSizeHistogram"], added, removed)
        if histogram is None:
            return None
        derived["fileSizeHistogram"] = histogram
    return derived


def _histogram_after(
    histogram: Mapping[str, Any], added: list[int], removed: list[int]
) -> dict[str, Any] | None:
    """Spark's file-size histogram with `added` sizes counted in and `removed` ones out (a file falls in
    the bin of the largest boundary not above its size)."""
    try:
        bounds = list(histogram["sortedBinBoundaries"])
        counts = list(histogram["fileCounts"])
        totals = list(histogram["totalBytes"])
    except (KeyError, TypeError):
        return None
    if not bounds or bounds[0] != 0 or len(counts) != len(bounds) or len(totals) != len(bounds):
        return None
    for sizes, sign in ((added, 1), (removed, -1)):
        for size in sizes:
            index = bisect_right(bounds, size) - 1
            counts[index] += sign
            totals[index] += sign * size
    if min(counts) < 0 or min(totals) < 0:
        return None
    return {**histogram, "fileCounts": counts, "totalBytes": totals}


def checksum_location(table_path: str, version: int) -> str:
    """Where Spark keeps the checksum of the table's commit `version`."""
    return f"{table_path.rstrip('/')}/_delta_log/{version:020d}.crc"


@dataclass(frozen=True)
class ChecksumsWritten:
    """What `write_checksums_since` did: how many it wrote, and why it stopped before the newest
    version (None: it did not)."""

    written: int = 0
    stopped: str | None = None


def write_checksums_since(
    table_path: str, since_version: int, storage_options: Mapping[str, str] | None = None
) -> ChecksumsWritten:
    """Write the checksums of maintenance's own commits after `since_version` that have none, each
    derived from the one before; stop at the first commit that is not maintenance's or cannot be
    derived exactly (see the module). A table Spark never wrote (no checksum at `since_version`) costs
    one read and gets none. A failure is reported, not raised: a missing checksum costs Spark's next
    commit time, never data."""
    written = 0
    try:
        previous = _read_checksum(table_path, since_version, storage_options)
        if previous is None:
            return ChecksumsWritten()
        table = open_lake_table(table_path, storage_options)
        if table is None:
            return ChecksumsWritten()
        for version in range(since_version + 1, table.version() + 1):
            existing = _read_checksum(table_path, version, storage_options)
            if existing is not None:
                previous = existing
                continue
            actions = _commit_actions(table_path, version, storage_options)
            if not _made_by_maintenance(actions):
                # A live append that came between: Spark writes its checksum itself, after its commit.
                return ChecksumsWritten(written, f"version {version} is not maintenance's")
            derived = derive_checksum(previous, actions)
            if derived is None:
                return ChecksumsWritten(written, f"version {version} cannot be derived exactly")
            if not _matches_snapshot(table, version, derived):
                return ChecksumsWritten(written, f"version {version} disagrees with the table")
            _write_new_line(checksum_location(table_path, version), json.dumps(derived), storage_options)
            previous = derived
            written += 1
        return ChecksumsWritten(written)
    except Exception as error:  # the table is intact; Spark rebuilds the state it needs
        LOG.warning("could not write checksum files for %s: %s", table_path, error)
        return ChecksumsWritten(written, f"failed: {error}")


# The operations `maintain_table` commits with delta-rs: a checksum is derived for these only.
MAINTENANCE_OPERATIONS = frozenset({"OPTIMIZE", "VACUUM START", "VACUUM END"})


def _made_by_maintenance(actions: Sequence[Mapping[str, Any]]) -> bool:
    infos = [action["commitInfo"] for action in actions if "commitInfo" in action]
    return len(infos) == 1 and (
        infos[0].get("operation") in MAINTENANCE_OPERATIONS
        and str(infos[0].get("engineInfo", "")).startswith("delta-rs")
    )


def _matches_snapshot(table: DeltaTable, version: int, derived: Mapping[str, Any]) -> bool:
    """The derived file count, bytes and size histogram are those of delta-rs's snapshot of `version`
    (`table` is loaded at it)."""
    table.load_as_version(version)
    sizes = snapshot_file_sizes(table)
    if (len(sizes), sum(sizes)) != (derived["numFiles"], derived["tableSizeBytes"]):
        return False
    histogram = derived.get("fileSizeHistogram")
    if histogram is None:
        return True
    empty = {
        **histogram,
        "fileCounts": [0] * len(histogram["fileCounts"]),
        "totalBytes": [0] * len(histogram["totalBytes"]),
    }
    return bool(_histogram_after(empty, sizes, []) == histogram)


def _read_checksum(
    table_path: str, version: int, storage_options: Mapping[str, str] | None
) -> dict[str, Any] | None:
    """The checksum of `version`; None when there is none. One that is there but unreadable raises
    (it is Spark's, and must not be replaced)."""
    text = _read_text(checksum_location(table_path, version), storage_options)
    if text is None:
        return None
    document = json.loads(text.splitlines()[0] if text else "")
    if not isinstance(document, dict):
        raise ValueError(f"checksum of version {version} is not a JSON object")
    return document


def _commit_actions(
    table_path: str, version: int, storage_options: Mapping[str, str] | None
) -> list[dict[str, Any]]:
    text = _read_text(f"{table_path.rstrip('/')}/_delta_log/{version:020d}.json", storage_options)
    if text is None:
        raise FileNotFoundError(f"commit {version} of {table_path}")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _read_text(location: str, storage_options: Mapping[str, str] | None) -> str | None:
    """The file's text; None when there is none."""
    if is_object_store_root(location):
        from pyarrow import fs

        store = object_store_filesystem(storage_options)
        if store.get_file_info(object_key(location)).type == fs.FileType.NotFound:
            return None
        with store.open_input_stream(object_key(location)) as source:
            return str(source.read().decode("utf-8"))
    try:
        return local_path(location).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def _write_new_line(location: str, line: str, storage_options: Mapping[str, str] | None) -> None:
    """Write `line` as a new file, whole (Spark reads a checksum's first line as its JSON). On a local
    disk a file already there is kept (a hard link refuses to replace it); on the object store it was
    checked for just before (an S3 PUT cannot refuse)."""
    payload = (line + "\n").encode("utf-8")
    if is_object_store_root(location):
        with object_store_filesystem(storage_options).open_output_stream(object_key(location)) as out:
            out.write(payload)
        return
    path = local_path(location)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(payload)
        os.chmod(temporary, 0o644)  # as Spark's own checksums: any reader of the table reads them
        with contextlib.suppress(FileExistsError):  # Spark's, or a concurrent run's: both are right
            os.link(temporary, path)
    finally:
        os.unlink(temporary)
