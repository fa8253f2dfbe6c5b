"""Maintenance removes the checksum files of log entries the log cleanup removed: delta-rs's cleanup
drops expired commits but not their `.crc` files (Spark writes one per commit), so a table written every
two seconds kept every one of them until Spark's next-day cleanup (2 hours of soak: 3,489 of them); nor
the hidden `.<name>.crc` Hadoop's local file system writes beside each of Spark's log files, which
nothing removed at all."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from revenue_platform.lake_maintenance import maintain_table, orphan_checksums


def test_only_checksums_older_than_the_oldest_commit_left_are_orphans() -> None:
    names = [
        "00003.json",
        "00004.json",
        "00002.crc",
        "00003.crc",
        "00004.crc",
        "00000.crc",
        "_last_checkpoint",
    ]
    names += ["00002.checkpoint.parquet", "x.crc"]
    # Hadoop's hidden checksums (Spark on a local disk): orphans when older than the oldest commit
    # and their file is gone or is an orphan itself.
    names += [".00000.json.crc", ".00000.crc.crc", ".00002.crc.crc", ".00002.checkpoint.parquet.crc"]
    names += [".00003.json.crc", ".00003.crc.crc", "._last_checkpoint.crc", "..00001.json.1a2b.tmp.crc"]
    assert orphan_checksums(names) == [
        ".00000.crc.crc",
        ".00000.json.crc",
        ".00002.crc.crc",
        "00000.crc",
        "00002.crc",
    ]
    assert orphan_checksums(["00000.crc", "00001.crc"]) == []  # no commit to compare with: keep all


def test_maintenance_removes_the_checksums_of_expired_commits_and_keeps_the_rest(tmp_path: Path) -> None:
    table = tmp_path / "bronze"
    for value in range(6):
        write_deltalake(
            str(table),
            pa.table({"a": [value]}),
            mode="append",
            configuration={"delta.logRetentionDuration": "interval 1 hours"},
        )
    log = table / "_delta_log"
    for version in range(6):  # what Spark leaves beside each of its commits
        (log / f"{version:020d}.crc").write_text("{}")
    # As the log cleanup leaves it (delta-rs's, Spark's): a checkpoint, the commits before it gone,
    # their checksums still there.
    DeltaTable(str(table)).create_checkpoint()
    for version in range(4):
        (log / f"{version:020d}.json").unlink()

    report = maintain_table(str(table), "bronze[t]", timedelta(hours=1), None)

    left = sorted(p.name for p in log.iterdir())
    assert [name for name in left if name.endswith(".crc")] == [f"{v:020d}.crc" for v in (4, 5)]
    assert report.checksums_removed == 4
    assert "removed 4 checksums of expired log entries" in report.summary()
    assert DeltaTable(str(table)).to_pyarrow_table().num_rows == 6
