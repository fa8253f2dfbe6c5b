"""The soak phase's pure parts: latency and batch wall per slice, the batches maintenance overlapped,
and the report's table with the last slice held against the first warm one."""

from __future__ import annotations

from typing import Any

import pytest

from bench.phases.soak_live import (
    SOAK_DEPLOYMENT,
    batches_beside_maintenance,
    slice_batch_walls,
    slice_latencies,
)
from bench.report import soak_lines
from spark_apps.contract.naming import REVENUE_QUERY_ROLE, DeploymentNames

START_MS = 1_000_000


def revenue_event(started_ms: int, wall_ms: int, rows: int = 10) -> dict[str, Any]:
    from datetime import UTC, datetime

    stamp = datetime.fromtimestamp(started_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    return {
        "name": DeploymentNames("/lake", SOAK_DEPLOYMENT).query_name(REVENUE_QUERY_ROLE),
        "timestamp": stamp,
        "numInputRows": rows,
        "durationMs": {"triggerExecution": wall_ms},
    }


def test_each_record_counts_in_the_slice_it_was_appended_in() -> None:
    pairs = [(START_MS + 5_000, 1_000), (START_MS + 9_999, 3_000), (START_MS + 10_000, 2_000)]
    # Appended after the last slice (the producer's last moment) or before the first: the edge slices.
    pairs += [(START_MS + 25_000, 4_000), (START_MS - 1, 500)]
    first, second = slice_latencies(pairs, START_MS, 10, 2)
    assert first["count"] == 3
    assert first["p50_s"] == pytest.approx(1.0)
    assert first["max_s"] == pytest.approx(3.0)
    assert second["count"] == 2
    assert second["p99_s"] == pytest.approx(4.0)


def test_a_slice_without_records_says_so() -> None:
    assert slice_latencies([], START_MS, 10, 2) == [{"count": 0}, {"count": 0}]


def test_batch_walls_per_slice_leave_out_batches_that_read_nothing() -> None:
    events = [
        revenue_event(START_MS + 1_000, 800),
        revenue_event(START_MS + 3_000, 1_200),
        revenue_event(START_MS + 5_000, 9_000, rows=0),  # an idle batch: not a cost of orders
        revenue_event(START_MS + 12_000, 2_000),
        {**revenue_event(START_MS + 13_000, 7_000), "name": "bench-soak__ingest"},  # not revenue
    ]
    first, second = slice_batch_walls(events, START_MS, 10, 2)
    assert (first["batches"], first["wall_ms_median"], first["wall_ms_p99"]) == (2, 1_000, 1_200)
    assert (second["batches"], second["wall_ms_p99"]) == (1, 2_000)


def test_each_slice_reports_the_most_ids_and_timers_the_dedupe_evicted_in_one_batch() -> None:
    def evicting(started_ms: int, wall_ms: int, removed: int, timers: int) -> dict[str, Any]:
        operators = [
            {"operatorName": "stateStoreSave", "numRowsRemoved": 10**9, "customMetrics": {}},  # windows
            {"operatorName": "transformWithStateExec", "numRowsRemoved": removed,
             "customMetrics": {"numExpiredTimers": timers}},
        ]  # fmt: skip
        return {**revenue_event(started_ms, wall_ms), "stateOperators": operators}

    events = [
        evicting(START_MS + 1_000, 800, 5, 1),
        evicting(START_MS + 3_000, 30_000, 1_053_992, 2_395),
        revenue_event(START_MS + 12_000, 700),  # no state operators: nothing evicted
    ]
    first, second = slice_batch_walls(events, START_MS, 10, 2)
    assert (first["wall_ms_max"], first["ids_evicted_max"], first["timers_fired_max"]) == (
        30_000,
        1_053_992,
        2_395,
    )
    assert (second["ids_evicted_max"], second["timers_fired_max"]) == (0, 0)


def test_a_batch_overlapping_a_maintenance_run_counts_as_beside_it() -> None:
    events = [
        revenue_event(START_MS, 1_000),  # ends before the run starts
        revenue_event(START_MS + 1_500, 1_000),  # overlaps its start
        revenue_event(START_MS + 4_000, 3_000),  # inside
        revenue_event(START_MS + 6_000, 500),  # after it
    ]
    runs = [{"started_ms": START_MS + 2_000, "ended_ms": START_MS + 5_000}, {"started_ms": START_MS + 9_000}]
    beside = batches_beside_maintenance(events, runs)
    assert beside["during"] == {"batches": 2, "wall_ms_median": 2_000, "wall_ms_max": 3_000}
    assert beside["otherwise"]["batches"] == 2
    assert beside["otherwise"]["wall_ms_max"] == 1_000


def sample(disk_mib: int, data_mib: int) -> dict[str, Any]:
    return {
        "driver_rss_mib": 900.0,
        "disk": {
            "gold": {"bytes": disk_mib * 2**20 - 2**21, "delta_log_files": 12},
            "checkpoints": {"bytes": 2**21, "delta_log_files": 0},
        },
        "snapshot_bytes": {"gold": data_mib * 2**20, "bronze": None},
        "state": [{"operator": "dedupe", "memory_bytes": 2**20, "sst_bytes": 3 * 2**20}],
    }


@pytest.mark.parametrize(("last_p99", "ratio"), [(2.4, "1.20x"), (3.0, "1.50x")])
def test_the_report_holds_the_last_slice_against_the_first_warm_one(last_p99: float, ratio: str) -> None:
    soak = {
        "rate_per_s": 2_000,
        "seconds": 1_800.0,
        "slice_s": 600.0,
        "maintain_every_s": 1_200.0,
        "samples": [sample(100, 60), sample(150, 90), sample(160, 120)],
        # The cold first slice is not the reference: the second is.
        "slice_latency": [
            {"count": 9, "p50_s": 9.0, "p99_s": 20.0},
            {"count": 9, "p99_s": 2.0},
            {"p99_s": last_p99},
        ],
        "slice_batches": [{"batches": 3}, {"batches": 3}, {"batches": 3}],
        "maintenance": [{"result": {"seconds": 2.5}}, {"error": "OSError: disk"}],
        "batches_beside_maintenance": {"during": {"batches": 1}, "otherwise": {"batches": 8}},
    }
    text = "\n".join(soak_lines(soak))
    assert f"Last slice's p99 against the first warm slice's: {ratio}" in text
    assert f"| 20-30 | — | — / {last_p99:.2f} | 3 |" in text
    assert "| 0-10 | 9 | 9.00 / 20.00 | 3 |" in text
    # Disk - data of the first slice, log files of gold / bronze (none here), state.
    assert "| 100 | 60 | 40 | 12 / — | 2 | 1 / 3 |" in text
    assert "2 runs (2.5 s), 1 failed: OSError: disk" in text


def test_no_samples_no_section() -> None:
    assert soak_lines({}) == []
