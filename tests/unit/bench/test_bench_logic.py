"""The benchmark's pure arithmetic: percentiles, per-record latency, pacing, verdicts, report building.

These never run the benchmark; they check the rules its report relies on with hand-computed cases.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bench import datagen, stats
from bench import spark_profile as profile_module
from bench.report import derive, markdown
from revenue_platform.orders_generator import GeneratorSettings, generate_orders, record_count


@pytest.mark.parametrize(
    ("fraction", "expected"),
    [(0.5, 5.0), (0.9, 9.0), (0.95, 10.0), (0.99, 10.0), (0.1, 1.0), (1.0, 10.0)],
)
def test_nearest_rank_percentile_returns_a_real_sample(fraction: float, expected: float) -> None:
    values = [float(v) for v in range(1, 11)]
    assert stats.percentile(values, fraction) == expected


def test_percentile_rejects_empty_and_out_of_range() -> None:
    with pytest.raises(ValueError, match="no values"):
        stats.percentile([], 0.5)
    with pytest.raises(ValueError, match="fraction"):
        stats.percentile([1.0], 0)


def test_latency_summary_of_known_values() -> None:
    summary = stats.latency_summary([3.0, 1.0, 2.0, 4.0])
    assert summary == {"count": 4, "p50_s": 2.0, "p95_s": 4.0, "p99_s": 4.0, "max_s": 4.0, "mean_s": 2.5}
    assert stats.latency_summary([]) == {"count": 0}


def test_each_record_is_visible_at_the_first_batch_that_covers_its_offset() -> None:
    appended = {0: [1000, 1100, 1200], 1: [1050, 1150]}
    batches = [
        # out of order on purpose: visibility order decides
        stats.VisibleBatch({0: 3, 1: 2}, visible_at_ms=5000),
        stats.VisibleBatch({0: 2, 1: 0}, visible_at_ms=2000),
    ]
    pairs, invisible = stats.record_latencies_ms(appended, {0: 0, 1: 0}, batches)
    assert sorted(pairs) == [(1000, 1000), (1050, 3950), (1100, 900), (1150, 3850), (1200, 3800)]
    assert invisible == 0


def test_records_after_the_last_batch_are_counted_invisible_and_first_offsets_respected() -> None:
    appended = {0: [10, 20, 30, 40]}  # offsets 100..103
    pairs, invisible = stats.record_latencies_ms(appended, {0: 100}, [stats.VisibleBatch({0: 102}, 50)])
    assert pairs == [(10, 40), (20, 30)]
    assert invisible == 2


def test_visibility_is_the_last_gold_commit_inside_the_batch_else_its_end() -> None:
    assert stats.gold_visible_at_ms(1000, 2000, [500, 1400, 1700, 2500]) == 1700
    assert stats.gold_visible_at_ms(1000, 2000, [500, 2500]) == 2000


@pytest.mark.parametrize(
    ("rate", "elapsed", "sent", "total", "due"),
    [
        (1000, 0.5, 0, 10_000, 500),
        (1000, 0.5, 400, 10_000, 100),
        (1000, 0.5, 600, 10_000, 0),  # ahead of schedule: wait
        (1000, 30.0, 9_990, 10_000, 10),  # never beyond the total
        (0, 5.0, 0, 10, 0),
    ],
)
def test_pacing_sends_what_is_due(rate: float, elapsed: float, sent: int, total: int, due: int) -> None:
    assert stats.records_due(rate, elapsed, sent, total) == due


def test_sustained_needs_the_rate_all_records_and_bounded_latency_growth() -> None:
    assert stats.judge_sustained(20_000, 19_900, 0, 4.0, 6.0, 5).sustained
    assert not stats.judge_sustained(20_000, 15_000, 0, 4.0, 4.0, 5).sustained
    assert not stats.judge_sustained(20_000, 20_000, 3, 4.0, 4.0, 5).sustained
    growing = stats.judge_sustained(20_000, 20_000, 0, 4.0, 30.0, 5)
    assert not growing.sustained
    assert "grew by 26.0s" in growing.reason


def test_quarter_medians_follow_append_time_not_list_order() -> None:
    pairs = [(4, 9000), (1, 1000), (3, 8000), (2, 2000), (5, 9500), (6, 9800), (7, 9900), (8, 10_000)]
    assert stats.quarter_medians_s(pairs) == (1.0, 9.9)


def test_the_measured_window_starts_a_warm_up_after_the_first_append() -> None:
    pairs = [(10_000, 900), (25_000, 800), (39_999, 700), (40_000, 300), (90_000, 200)]
    assert stats.after_warmup(pairs, 30) == [(40_000, 300), (90_000, 200)]
    assert stats.after_warmup(pairs, 0) == pairs
    assert stats.after_warmup([], 30) == []


def test_a_query_that_reads_kafka_itself_is_positioned_by_its_own_offsets() -> None:
    """The engine's query reads Kafka itself: its end offsets are what gold reflects."""
    from bench.phases.live import revenue_positions

    event = {
        "name": "bench-live__revenue",
        "batchId": 3,
        "sources": [
            {"description": "KafkaV2[Subscribe[orders_live]]", "endOffset": {"orders_live": {"0": 7}}}
        ],
    }
    assert revenue_positions([event]) == [(event, {"orders_live": {"0": 7}})]


def test_a_live_batch_is_visible_at_its_gold_commit_and_other_topics_batches_are_skipped() -> None:
    from bench.phases.live import visible_batches

    def event(topic: str, offset: int) -> dict:
        return {
            "name": "bench-live__revenue",
            "timestamp": "2026-11-26T07:00:00.000Z",
            "durationMs": {"triggerExecution": 2000},
            "sources": [{"description": f"KafkaV2[Subscribe[{topic}]]", "endOffset": {topic: {"0": offset}}}],
        }

    started_ms = int(datetime(2026, 11, 26, 7, tzinfo=UTC).timestamp() * 1000)
    batches = visible_batches(
        [event("orders_live", 7), event("orders", 9)], "orders_live", [started_ms + 1500]
    )
    assert batches == [stats.VisibleBatch({0: 7}, started_ms + 1500)]


def test_highest_sustained_rate_and_ratio() -> None:
    assert stats.highest_sustained_rate({5000.0: True, 20_000.0: True, 50_000.0: False}) == pytest.approx(
        20_000
    )
    assert stats.highest_sustained_rate({5000.0: False}) is None
    assert stats.ratio(50.0, 200.0) == pytest.approx(0.25)
    assert stats.ratio(None, 200.0) is None
    assert stats.ratio(5.0, 0) is None


def test_chunks_are_deterministic_contiguous_and_cover_every_order(tmp_path: Path) -> None:
    settings = GeneratorSettings(orders=10, stores=3, start=datetime(2026, 1, 1), span_seconds=100, seed=7)
    chunks = datagen.plan_chunks(settings, 4, tmp_path)
    assert [c.settings.orders for c in chunks] == [4, 4, 2]
    assert [c.settings.first_order_id for c in chunks] == [1, 5, 9]
    assert [c.settings.start for c in chunks] == [
        datetime(2026, 1, 1, 0, 0, 0),
        datetime(2026, 1, 1, 0, 0, 40),
        datetime(2026, 1, 1, 0, 1, 20),
    ]
    assert datagen.plan_chunks(settings, 4, tmp_path) == chunks
    for chunk in chunks:
        datagen._write_chunk(chunk)
    records = list(datagen.read_records([c.path for c in chunks]))
    ids = [json.loads(value)["orderId"] for _, value, _ in records]
    assert ids == list(range(1, 11))
    times = [json.loads(value)["orderedDateTime"] for _, value, _ in records]
    assert times == sorted(times), "event time must rise through the chunks"


def test_record_count_matches_the_generator() -> None:
    settings = GeneratorSettings(orders=103, duplicate_every=10, bad_every=25)
    assert record_count(settings) == len(list(generate_orders(settings))) == 103 + 10 + 4


def test_live_stamper_gives_valid_seed_json_with_fresh_ids_and_time() -> None:
    stamper = datagen.LiveOrderStamper(seed=1, stores=3, pool_size=5, first_order_id=100)
    stamp = datagen.time_stamp(datetime.fromisoformat("2026-11-22T10:11:12+00:00"))
    orders = [json.loads(stamper.next(stamp)[1]) for _ in range(7)]
    assert [o["orderId"] for o in orders] == list(range(100, 107))
    assert {o["orderedDateTime"] for o in orders} == {"2026-11-22T10:11:12"}
    assert all(o["locationId"].startswith("store_") for o in orders)


def _results(p99: float, sustained_20k: bool, replay_per_s: float = 100_000.0) -> dict:
    live = {
        f"live_{rate}": {
            "target_per_s": rate,
            "trigger_interval_s": 5,
            "latency": {"count": 10, "p50_s": 3.0, "p95_s": 5.0, "p99_s": p99, "max_s": 9.0},
            "producer": {"achieved_per_s": float(rate)},
            "sustained": ok,
            "verdict": "x" if ok else "latency grew by 9.0s",
        }
        for rate, ok in ((5000, True), (20_000, sustained_20k))
    }
    return {
        "stamp": "t",
        "label": "unit",
        "phases": {
            "raw_ceiling": {"best": {"records": 1000, "records_per_s": 400_000.0, "mb_per_s": 100.0}},
            "work_ceiling": {
                "window": {"size": "15 seconds", "slide": None},
                "best": {
                    "records": 1000,
                    "seconds": 0.005,
                    "records_per_s": 200_000.0,
                    "valid": 990,
                    "duplicates": 5,
                    "invalid": 10,
                    "windows": 40,
                    "window_orders": 985,
                    "total_cents": 1_234_567,
                },
            },
            "replay": {
                "records_per_s_excl_start": replay_per_s,
                "records_per_s_incl_start": replay_per_s / 2,
                "gold": {"rows": 40, "orders_counted": 985, "revenue_cents": 1_234_567, "version": 3},
            },
            **live,
        },
        "memory_peaks_mib": {"replay": {"broker": 900.0, "spark": 2000.0, "total": 3100.0}},
    }


def test_derive_ratios_to_both_ceilings_and_target_verdicts() -> None:
    derived = derive(_results(p99=7.5, sustained_20k=True))
    assert derived["raw_ceiling_records_per_s"] == pytest.approx(400_000)
    assert derived["work_ceiling_records_per_s"] == pytest.approx(200_000)
    assert derived["work_ceiling_ratio_to_raw_ceiling"] == pytest.approx(0.5)
    assert derived["replay_ratio_excl_start"] == pytest.approx(0.25)
    assert derived["replay_ratio_incl_start"] == pytest.approx(0.125)
    assert derived["replay_ratio_to_work_ceiling_excl_start"] == pytest.approx(0.5)
    assert derived["replay_ratio_to_work_ceiling_incl_start"] == pytest.approx(0.25)
    assert derived["highest_sustained_live_rate"] == 20_000
    assert derived["sustained_live_ratio"] == pytest.approx(0.05)
    assert derived["sustained_live_ratio_to_work_ceiling"] == pytest.approx(0.1)
    verdicts = {t["target"].split(" ")[0]: t for t in derived["targets"]}
    assert set(verdicts) == {"replay", "live", "peak"}
    # Absolute targets now: 100,000 records/s replay meets 30,000 whatever the ceilings are.
    assert verdicts["replay"]["met"] is True
    assert verdicts["replay"]["by"] == "met with 70,000 records/s (233% of the limit)"
    assert verdicts["live"]["met"] is True  # sustained, 7.5 s <= 8 s
    assert verdicts["live"]["limit"] == pytest.approx(8.0)
    assert verdicts["peak"]["met"] is True


def test_replay_below_30000_records_per_s_misses_however_close_to_the_ceilings() -> None:
    derived = derive(_results(p99=7.5, sustained_20k=True, replay_per_s=3_600.0))
    replay = next(t for t in derived["targets"] if t["target"].startswith("replay"))
    assert replay["met"] is False
    assert replay["by"] == "missed by 26,400 records/s (88% of the limit)"
    text = markdown(_results(p99=7.5, sustained_20k=True, replay_per_s=3_600.0), derived)
    assert "| replay ≥ 30,000 records/s (excl. start) | 3,600 | 30,000 | **no** |" in text
    assert "For information, not a target: the replay (excluding start) runs at 0.0090 x the raw" in text


def test_derive_when_live_misses_and_markdown_names_it() -> None:
    results = _results(p99=12.0, sustained_20k=True)
    derived = derive(results)
    live = next(t for t in derived["targets"] if t["target"].startswith("live"))
    assert live["met"] is False
    assert "missed by 4.00 s" in live["by"]
    text = markdown(results, derived)
    assert "| 20,000 | 20,000 |" in text
    assert "**no**" in text


def test_markdown_puts_the_revenue_topic_s_latency_under_gold_s() -> None:
    results = _results(p99=6.0, sustained_20k=True)
    results["phases"]["live_5000"]["latency_revenue_topic"] = {
        "p50_s": 3.25,
        "p95_s": 5.5,
        "p99_s": 6.75,
        "max_s": 9.5,
    }
    results["phases"]["live_5000"]["latency_revenue_topic_from_cold_start"] = {"p99_s": 12.5}

    text = markdown(results, derive(results))

    assert "| 5,000 | 3.25 | 5.50 | 6.75 | 9.50 | 12.50 |" in text
    # A run from before the revenue topic was measured has no such row.
    assert "| 20,000 | 3.25 |" not in text


def test_a_low_p99_does_not_meet_the_live_target_when_the_rate_was_not_sustained() -> None:
    derived = derive(_results(p99=6.0, sustained_20k=False))
    live = next(t for t in derived["targets"] if t["target"].startswith("live"))
    assert live["met"] is False
    assert live["by"].startswith("not sustained (latency grew by 9.0s); p99 met with 2.00 s")
    assert derived["highest_sustained_live_rate"] == 5000


def test_markdown_shows_the_work_ceiling_and_its_agreement_with_gold() -> None:
    results = _results(p99=7.5, sustained_20k=True)
    text = markdown(results, derive(results))
    assert "| ÷ raw read ceiling | ÷ work-equivalent ceiling |" in text
    assert "| 1,000 | 0.0 | 200,000 | 0.500 | 1.00 |" in text  # the work ceiling's row
    assert "| raw read ceiling (plain consumer; 100.0 MB/s) | 1,000 | — | 400,000 | 1.00 | 2.000 |" in text
    assert "| 100,000 | 0.250 | 0.500 |" in text  # replay excl. start, to both ceilings
    assert "cents equal (1,234,567); orders equal (985); windows equal (40)" in text


def test_a_gold_that_disagrees_with_the_work_ceiling_is_reported_with_both_numbers() -> None:
    results = _results(p99=7.5, sustained_20k=True)
    results["phases"]["replay"]["gold"]["revenue_cents"] = 1_234_500
    derived = derive(results)
    assert derived["work_ceiling_vs_gold"]["cents"] == {
        "work_ceiling": 1_234_567,
        "gold": 1_234_500,
        "match": False,
    }
    assert derived["work_ceiling_vs_gold"]["orders"]["match"] is True
    text = markdown(results, derived)
    assert "cents **differ**: work ceiling 1,234,567, gold 1,234,500" in text


def test_results_from_before_the_work_ceiling_still_derive_and_render() -> None:
    results = _results(p99=7.5, sustained_20k=True)
    del results["phases"]["work_ceiling"]
    del results["phases"]["replay"]["gold"]["revenue_cents"]
    derived = derive(results)
    assert derived["work_ceiling_records_per_s"] is None
    assert derived["replay_ratio_to_work_ceiling_excl_start"] is None
    assert derived["work_ceiling_vs_gold"] is None
    assert "| work-equivalent ceiling" in markdown(results, derived)


def test_not_sustained_when_the_app_did_not_catch_up() -> None:
    verdict = stats.judge_sustained(1000, 1000, 0, 70.0, 60.0, 5, drained=False)
    assert not verdict.sustained
    assert "caught up" in verdict.reason


def test_stage_profile_sums_wall_and_task_time_per_call_site() -> None:
    def stage(stage_id: int, name: str, start: int, end: int, rdds: tuple[str, ...] = ()) -> str:
        info = {
            "Stage ID": stage_id,
            "Stage Name": name,
            "Submission Time": start,
            "Completion Time": end,
            "RDD Info": [{"Name": rdd} for rdd in rdds],
        }
        return json.dumps({"Event": "SparkListenerStageCompleted", "Stage Info": info})

    def task(stage_id: int, run_ms: int) -> str:
        metrics = {"Executor Run Time": run_ms}
        return json.dumps({"Event": "SparkListenerTaskEnd", "Stage ID": stage_id, "Task Metrics": metrics})

    lines = [
        task(1, 300),
        task(1, 500),
        stage(1, "start at X:0", 0, 1000, ("MapPartitionsRDD", "mergeMaterializedSource")),
        task(2, 100),
        stage(2, "count at app.py:75", 1000, 1250, ("MapPartitionsRDD",)),
        stage(3, "start at X:0", 2000, 3000, ("mergeMaterializedSource",)),
        '{"Event": "SparkListenerJobStart"}',
    ]
    profile = profile_module.stage_profile(lines)
    # Stages are grouped by what their RDDs did; an unrecognised stage keeps its call site.
    assert [p["work"] for p in profile] == ["Delta MERGE into gold", "count at app.py:75"]
    assert profile[0] == {
        "work": "Delta MERGE into gold",
        "stages": 2,
        "wall_s": pytest.approx(2.0),
        "task_run_s": pytest.approx(0.8),
        "share_of_stage_time": pytest.approx(2000 / 2250),
    }
    assert profile[1]["task_run_s"] == pytest.approx(0.1)


def test_executor_usage_counts_executors_added_and_the_tasks_each_ran() -> None:
    def added(executor: str, cores: int) -> str:
        info = {"Host": "127.0.0.1", "Total Cores": cores}
        return json.dumps(
            {"Event": "SparkListenerExecutorAdded", "Executor ID": executor, "Executor Info": info}
        )

    def task(executor: str, run_ms: int) -> str:
        return json.dumps(
            {
                "Event": "SparkListenerTaskEnd",
                "Task Info": {"Executor ID": executor, "Host": "127.0.0.1"},
                "Task Metrics": {"Executor Run Time": run_ms},
            }
        )

    two_workers = [added("0", 1), added("1", 1), task("1", 400), task("0", 250), task("1", 100)]
    assert profile_module.executor_usage(two_workers) == {
        "executors_added": 2,
        "executor_cores": 2,
        "executors_with_tasks": 2,
        "per_executor": {"0": {"tasks": 1, "task_run_s": 0.25}, "1": {"tasks": 2, "task_run_s": 0.5}},
    }
    # An executor that registered but got no task did not work for the run.
    idle_one = profile_module.executor_usage([added("0", 1), added("1", 1), task("0", 10)])
    assert (idle_one["executors_added"], idle_one["executors_with_tasks"]) == (2, 1)


def test_a_standalone_master_s_event_log_is_found_like_a_local_one(tmp_path: Path) -> None:
    # Spark names a single event log file after the application id: local-<n> or, on a standalone
    # master, app-<time>-<n>; the file still being written is not read.
    (tmp_path / "app-20261126172000-0001").write_text('{"Event": "SparkListenerLogStart"}\n')
    (tmp_path / "app-20261126172500-0002.inprogress").write_text("")
    (tmp_path / "driver.log").write_text("")
    assert profile_module.event_log_files(tmp_path) == [tmp_path / "app-20261126172000-0001"]
    assert list(profile_module.event_log_lines(tmp_path)) == ['{"Event": "SparkListenerLogStart"}\n']


def test_progress_lines_being_written_are_skipped(tmp_path: Path) -> None:
    from bench.spark_app import read_events

    (tmp_path / "events.jsonl").write_text('{"batchId": 0}\n{"batchId": 1}\n{"batchId": 2, "na')
    assert read_events(tmp_path) == [{"batchId": 0}, {"batchId": 1}]


def test_memory_peaks_are_per_group_and_of_the_simultaneous_sum() -> None:
    from bench.memory import Sample, peaks_by_phase

    mib = 2**20
    samples = [
        Sample(0.0, "replay", {"broker": 400 * mib, "spark": 1000 * mib}),
        Sample(0.5, "replay", {"broker": 500 * mib, "spark": 200 * mib}),
        Sample(1.0, "live", {"broker": 450 * mib}),
    ]
    # The whole-stack peak is the largest sum at one instant (1400), not the sum of peaks (1500).
    assert peaks_by_phase(samples) == {
        "replay": {"broker": 500.0, "spark": 1000.0, "total": 1400.0},
        "live": {"broker": 450.0, "total": 450.0},
    }


def test_window_heavy_stores_give_about_five_orders_per_store_type_and_window() -> None:
    from bench.phases.history import WINDOW_HEAVY_ORDERS_PER_WINDOW, window_heavy_stores

    # 15 s windows over an hour: 240 windows x 2 order types per store.
    stores = window_heavy_stores(1_000_000, 15)
    assert stores == 417
    assert 1_000_000 / (stores * 2 * 240) == pytest.approx(WINDOW_HEAVY_ORDERS_PER_WINDOW, rel=0.01)
    assert window_heavy_stores(10, 15) == 1  # never zero stores


def test_phases_select_what_runs_and_live_selects_every_rate() -> None:
    from bench.run import BenchSettings, selected

    every = BenchSettings()
    assert all(selected(every, step) for step in ("replay", "history", "live_20000", "restart"))
    some = BenchSettings(phases=("replay", "live"))
    assert [selected(some, step) for step in ("replay", "live_5000", "live_50000")] == [True, True, True]
    assert [selected(some, step) for step in ("history", "window_heavy")] == [False, False]
    # The month-two phase seeds gigabytes of log files: only when asked for.
    assert not selected(every, "month_two")
    assert selected(BenchSettings(phases=("month_two",)), "month_two")


def test_markdown_reports_the_window_heavy_replay_next_to_the_main_one() -> None:
    results = _results(p99=7.5, sustained_20k=True)
    results["phases"]["window_heavy"] = {
        "records": 100_600,
        "batches": 1,
        "largest_batch_records": 100_600,
        "stores": 42,
        "gold": {"rows": 20_000, "orders_counted": 100_000, "revenue_cents": 1},
        "orders_per_window": 5.0,
        "records_per_s_excl_start": 12_345.0,
        "gold_equals_the_tally": True,
    }
    text = markdown(results, derive(results))
    assert "| window-heavy replay: stores / windows in gold / orders per window | 42 / 20,000 / 5.0 |" in text
    assert "| window-heavy replay: records/s excl. start (the main replay's) | 12,345 (100,000) |" in text
    assert "| window-heavy replay: gold equals the tally (windows, orders, cents) | True |" in text


def test_command_line_options_override_the_variant_and_unknown_phases_are_named() -> None:
    from bench.__main__ import QUICK, argument_parser, selected_phases, with_arguments

    args = argument_parser().parse_args(["--quick", "--rates", "", "--orders", "500", "--no-airflow"])
    settings = with_arguments(QUICK, args)
    assert (settings.live_rates, settings.orders, settings.with_airflow) == ((), 500, False)
    assert settings.live_seconds == QUICK.live_seconds
    assert selected_phases(" replay , live ") == ("replay", "live")
    with pytest.raises(ValueError, match=r"unknown phases \['bogus'\]"):
        selected_phases("replay,bogus")


def test_a_dedupe_horizon_reaches_every_app_the_bench_starts() -> None:
    from bench.__main__ import QUICK, argument_parser, with_arguments
    from bench.run import BenchRun
    from bench.spark_app import app_overrides

    shipped = BenchRun(QUICK, "stamp")
    assert "dedupe.horizon" not in app_overrides(shipped, "d", "orders", "available_now")
    args = argument_parser().parse_args(["--quick", "--dedupe-horizon", "2 seconds"])
    scaled = BenchRun(with_arguments(QUICK, args), "stamp")
    assert app_overrides(scaled, "d", "orders", "available_now")["dedupe.horizon"] == "2 seconds"


def test_app_settings_reach_every_app_the_bench_starts_and_need_a_value() -> None:
    from bench.__main__ import QUICK, argument_parser, with_arguments
    from bench.run import BenchRun
    from bench.spark_app import app_overrides

    args = argument_parser().parse_args(
        [
            "--quick",
            *("--app-set", "kafka.max_offsets_per_trigger=100000"),
            *("--app-set", "trigger.interval=1 second"),
        ]
    )
    run = BenchRun(with_arguments(QUICK, args), "stamp")
    overrides = app_overrides(run, "d", "orders", "processing_time")
    assert overrides["kafka.max_offsets_per_trigger"] == "100000"
    # The bench's own value gives way to the named one.
    assert overrides["trigger.interval"] == "1 second"
    assert overrides["deployment_id"] == "d"
    with pytest.raises(SystemExit, match="KEY=VALUE"):
        with_arguments(QUICK, argument_parser().parse_args(["--quick", "--app-set", "warm"]))


def test_chunk_records_carry_their_place_on_the_event_time_line(tmp_path: Path) -> None:
    settings = GeneratorSettings(
        orders=40,
        stores=3,
        start=datetime(2026, 1, 1),
        span_seconds=400,
        seed=7,
        duplicate_every=5,
        bad_every=7,
    )
    chunks = datagen.plan_chunks(settings, 10, tmp_path)
    for chunk in chunks:
        datagen._write_chunk(chunk)
    records = list(datagen.read_records([c.path for c in chunks]))
    stamps = [stamp for _, _, stamp in records]
    start_ms = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1000)
    assert stamps == sorted(stamps)
    assert stamps[0] == start_ms
    assert stamps[-1] < start_ms + 400_000
    generated = [record for chunk in chunks for record in generate_orders(chunk.settings)]
    assert len(generated) == len(records)
    valid = [(r.order, stamp) for r, (_, _, stamp) in zip(generated, records, strict=True) if r.order]
    assert len(valid) >= 40
    for order, stamp in valid:
        event_ms = int(
            datetime.fromisoformat(order["orderedDateTime"]).replace(tzinfo=UTC).timestamp() * 1000
        )
        # Within an order's share of the span (10 s) of its event time: far inside the app's
        # future-skew rule (the watermark delay, 30 s), so no valid order becomes a dead letter.
        assert abs(stamp - event_ms) <= 10_000


def test_the_lake_comparison_puts_each_figure_of_both_runs_next_to_its_ratio() -> None:
    from bench.lakes import compare_lakes, lakes_markdown

    def run(stamp: str, replay_per_s: float, p99: float, counted: int) -> dict[str, Any]:
        return {
            "stamp": stamp,
            "phases": {
                "replay": {
                    "records_per_s_excl_start": replay_per_s,
                    "gold": {"orders_counted": counted},
                    "expected_orders_counted": 1000,
                },
                "live_20000": {"target_per_s": 20000, "latency": {"p50_s": 1.0, "p99_s": p99}},
            },
            "memory_peaks_mib": {"replay": {"total": 2000.0}, "live_20000": {"total": 2500.0}},
        }

    comparison = compare_lakes(run("A", 30_000.0, 4.0, 1000), run("B", 24_000.0, 6.0, 999))
    by_name = {row["figure"]: row for row in comparison["figures"]}
    assert by_name["replay records/s (excl. start)"]["ratio"] == pytest.approx(0.8)
    assert by_name["live 20,000/s p99 (s)"]["ratio"] == pytest.approx(1.5)
    assert by_name["whole-stack peak (MiB)"]["local"] == pytest.approx(2500.0)
    assert by_name["replay records/s (incl. start)"]["ratio"] is None  # neither run measured it
    assert comparison["gold_counted_every_order"] == {"local": True, "object_store": False}
    text = lakes_markdown(comparison)
    assert "| live 20,000/s p99 (s) | 4.00 | 6.00 | 1.50 |" in text
    assert "object store False" in text


def test_a_bench_run_on_the_object_store_keeps_its_lake_in_its_own_bucket() -> None:
    from bench.run import BenchRun, BenchSettings

    settings = BenchSettings(lake="object-store", object_store_port=23999, state_dir=Path("/bench"))
    run = BenchRun(settings, "stamp")
    assert run.lake_root == "s3a://lake/lake/bench"
    assert run.object_store.endpoint_url == "http://127.0.0.1:23999"
    assert run.object_store.data_dir == Path("/bench/object-store")
    assert BenchRun(BenchSettings(state_dir=Path("/bench")), "stamp").lake_root == "/bench/lake"
