"""Checksum files for maintenance's commits on a table Spark writes, so Spark's next commit stays cheap.

Spark writes a `<version>.crc` beside each commit it makes (the table's file count, bytes, a file-size
histogram, its metadata and protocol) and derives the next one from it: a commit then costs its own
actions. delta-rs writes none. After a commit of maintenance's (bronze's compaction, a VACUUM that
deletes files), Spark's next append finds no checksum for the version it builds on and rebuilds the
table's whole state first (a handful of Spark jobs over every file entry): measured with a bronze of
4,100 files, 0.2 s per append before, 3.9 s for the first after the compaction; in the two-hour soak,
13 s for the live batch after a day's compaction, where the issue's bound is one 2-s trigger.

So maintenance writes the checksum of each commit it made, derived from Spark's checksum of the
version before and the commit's own actions, and only when that derivation is exact:
- the previous version has a checksum and it holds only fields this module knows;
- the commit holds only `commitInfo`, `add` and `remove` actions, without deletion vectors, and every
  `remove` says its size (metadata, protocol, transactions and domains are then unchanged);
- the derived file count and bytes equal those of delta-rs's snapshot of that version.
Otherwise it writes nothing and Spark rebuilds the state as before: slower, never wrong. A checksum
file already there is never replaced. The list of all files, which Spark keeps in small tables'
checksums, is left out of a derived one (Spark then reads the file list from the log when it needs it).

Spark's own check of a checksum against the rebuilt state
(`spark.databricks.delta.incremental.commit.verify`) passes on these: the test of this module runs
Spark's next append with it on.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import uuid
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from typing import Any

from revenue_platform.lake_storage import open_lake_table, snapshot_size
from spark_apps.contract.naming import local_path
from spark_apps.contract.object_store import is_object_store_root
from spark_apps.contract.side_files import object_key, object_store_filesystem

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
    derived = {key: value for key, value in previous.items() if key != "allFiles" or not (added or removed)}
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
    return f"{table_path.rstrip('/')}/_delta_log/{version:020d}.crc"


def write_checksums_since(
    table_path: str, since_version: int, storage_options: Mapping[str, str] | None = None
) -> int:
    """Write the checksums of the table's commits after `since_version` that have none, each derived
    from the one before; stop at the first that cannot be derived (see the module). How many it wrote.
    A table Spark never wrote (no checksum at `since_version`) costs one read and gets none. A failure
    is logged, not raised: a missing checksum costs Spark's next commit time, never data."""
    try:
        previous = _read_checksum(table_path, since_version, storage_options)
        if previous is None:
            return 0
        table = open_lake_table(table_path, storage_options)
        if table is None:
            return 0
        written = 0
        for version in range(since_version + 1, table.version() + 1):
            existing = _read_checksum(table_path, version, storage_options)
            if existing is not None:
                previous = existing
                continue
            derived = derive_checksum(previous, _commit_actions(table_path, version, storage_options))
            if derived is None or not _matches_snapshot(table_path, version, derived, storage_options):
                LOG.info(
                    "%s: no checksum derived for version %d; Spark's next commit rebuilds it",
                    table_path,
                    version,
                )
                return written
            _write_line(checksum_location(table_path, version), json.dumps(derived), storage_options)
            previous = derived
            written += 1
        return written
    except Exception as error:  # the table is intact; Spark rebuilds the state it needs
        LOG.warning("could not write checksum files for %s: %s", table_path, error)
        return 0


def _matches_snapshot(
    table_path: str, version: int, derived: Mapping[str, Any], storage_options: Mapping[str, str] | None
) -> bool:
    """The derived file count and bytes are those of delta-rs's snapshot of `version`."""
    table = open_lake_table(table_path, storage_options)
    if table is None:
        return False
    table.load_as_version(version)
    return snapshot_size(table) == (derived["numFiles"], derived["tableSizeBytes"])


def _read_checksum(
    table_path: str, version: int, storage_options: Mapping[str, str] | None
) -> dict[str, Any] | None:
    text = _read_text(checksum_location(table_path, version), storage_options)
    if text is None:
        return None
    try:
        document = json.loads(text)
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


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


def _write_line(location: str, line: str, storage_options: Mapping[str, str] | None) -> None:
    """Write `line` as the whole file, at once (Spark reads a checksum's first line as its JSON)."""
    payload = (line + "\n").encode("utf-8")
    if is_object_store_root(location):
        with object_store_filesystem(storage_options).open_output_stream(object_key(location)) as out:
            out.write(payload)
        return
    path = local_path(location)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(handle, "wb") as out:
        out.write(payload)
    os.replace(temporary, path)
