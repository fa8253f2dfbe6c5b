"""The month-two phase's pure parts: the seeded lake is what a reader opens at its newest version, the
commits after the seed are what the live run wrote, and the summary puts each history against the first."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from bench.month_two import (
    SEEDED_DLQ_REASON,
    UNCOMPACTED_BRONZE_FILES,
    append_noop_commits,
    commits_after,
    disk_use,
    seed_deployment,
)
from bench.phases.month_two import batches_beside
from bench.report import derive, markdown, month_two_figures


def test_a_seeded_deployment_is_opened_at_its_newest_version_with_every_row(tmp_path: Path) -> None:
    gold, bronze = tmp_path / "gold", tmp_path / "bronze"
    seed = seed_deployment(gold, bronze, 2, 2, datetime(2026, 12, 3, 10, 30, tzinfo=UTC), 1, 40)
    assert seed["log_entries_per_table"] == 40  # one day of log entries kept, not two
    opened = DeltaTable(str(gold))
    assert opened.version() == seed["gold_version"]
    rows = opened.to_pyarrow_table()
    assert rows.num_rows == seed["gold_rows"] == 2 * 24 * 240 * 2 * 2
    assert len(opened.file_uris()) == 48  # one file per hour, as maintenance leaves closed hours
    hours = set(rows["window_hour"].to_pylist())
    assert (min(hours), max(hours)) == ("2026-12-01T10", "2026-12-03T09")  # up to the hour before now
    archived = DeltaTable(str(bronze)).to_pyarrow_table()
    assert set(archived["dlq_reason"].to_pylist()) == {SEEDED_DLQ_REASON}  # nothing counts them
    assert sorted({str(day) for day in archived["ingest_date"].to_pylist()}) == ["2026-12-01", "2026-12-02"]
    # Yesterday as live batches leave it before maintenance: small files, one row each.
    files = pa.table(DeltaTable(str(bronze)).get_add_actions(flatten=True))
    per_day = pa.TableGroupBy(files, "partition.ingest_date").aggregate([("path", "count")]).to_pylist()
    assert {str(d["partition.ingest_date"]): d["path_count"] for d in per_day} == {
        "2026-12-01": 1,
        "2026-12-02": UNCOMPACTED_BRONZE_FILES,
    }
    assert seed["gold_until"] == "2026-12-03T10:00:00+00:00"
    assert disk_use(tmp_path)["delta_log_files"] >= 2 * 40


def test_the_commits_after_the_seed_are_what_a_writer_added(tmp_path: Path) -> None:
    table = tmp_path / "t"
    write_deltalake(str(table), pa.table({"a": [1, 2]}))
    seeded = append_noop_commits(table, 25, 1, int(time.time() * 1000))
    assert seeded == 25
    assert commits_after(table, seeded) == []
    write_deltalake(str(table), pa.table({"a": [3, 4, 5]}), mode="append")
    [added] = commits_after(table, seeded)
    assert (added["version"], added["rows_added"], added["files_removed"]) == (26, 3, 0)
    assert added["bytes_added"] > 0
    assert DeltaTable(str(table)).to_pyarrow_table().num_rows == 5


def _phase(days: int, wall_ms: int, gold_bytes: int, restart_s: float) -> dict[str, object]:
    return {
        "seed": {"days": days, "log_entries_per_table": days * 34_560},
        "live": {"latency": {"p50_s": 2.0, "p99_s": 4.0}},
        "revenue_batches": {"batches": 20, "wall_ms_median": wall_ms, "wall_ms_p90": wall_ms + 100},
        "gold_commits": {"bytes_per_commit_median": gold_bytes},
        "bronze_commits": {"bytes_per_commit_median": 50_000, "rows_per_commit_median": 1_000},
        "restart_ready_s": restart_s,
        "disk_after_live": {"gold": {"bytes": 2**20}, "bronze": {"bytes": 2**20}},
    }


def test_the_summary_puts_each_history_against_the_first() -> None:
    results = {
        "stamp": "s",
        "label": "quick",
        "phases": {
            "month_two_1d": _phase(1, 2_000, 9_000, 30.0),
            "month_two_30d": _phase(30, 3_000, 9_000, 60.0),
        },
        "memory_peaks_mib": {"month_two_1d": {"spark": 1_000}, "month_two_30d": {"spark": 1_100}},
    }
    text = markdown(results, derive(results))
    assert (
        "| 30 d | 1,036,800 | 20 | 3,000 / 3,100 | 9,000 | 50.0 | 2.00 / 4.00 | 60.0 | 1,100 | 2.0 |" in text
    )
    assert (
        "30 days against 1: batch_wall_ms 1.50x, gold_bytes_per_batch 1.00x, bronze_bytes_per_order 1.00x, "
        "restart_ready_s 2.00x" in text
    )
    figures = month_two_figures({}, {})  # a phase that failed before its commits
    assert figures["gold_bytes_per_batch"] is None
    assert figures["bronze_bytes_per_order"] is None


def _batch(started_s: float, wall_ms: int, rows: int = 10) -> dict[str, object]:
    stamp = datetime.fromtimestamp(started_s, UTC).isoformat().replace("+00:00", "Z")
    return {
        "name": "blue__revenue",
        "timestamp": stamp,
        "numInputRows": rows,
        "durationMs": {"triggerExecution": wall_ms},
    }


def test_the_batches_beside_maintenance_are_those_that_overlapped_it() -> None:
    t0 = 1_800_000_000.0
    events = [
        _batch(t0, 2_000),  # ends before maintenance starts
        _batch(t0 + 2.5, 7_000),  # overlaps it
        _batch(t0 + 9.6, 3_000),  # starts after it ended
        _batch(t0 + 13, 1_000, rows=0),  # read nothing: not a batch of orders
    ]
    beside = {
        "started_ms": int((t0 + 3) * 1000),
        "ended_ms": int((t0 + 5) * 1000),
        "result": {"seconds": 2.0},
    }
    summary = batches_beside(events, beside)
    assert summary["batches_during"] == {"batches": 1, "wall_ms_median": 7_000, "wall_ms_max": 7_000}
    assert summary["batches_otherwise"] == {"batches": 2, "wall_ms_median": 2_500.0, "wall_ms_max": 3_000}
    assert summary["maintenance"] == {"seconds": 2.0}
    assert batches_beside(events, {"error": "RuntimeError: x"}) == {
        "error": "RuntimeError: x",
        "maintenance": None,
    }
