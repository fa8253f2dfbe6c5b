"""Pure logic of the revenue quality checks: config, independent parsing, derived frames, gate
argument resolution. No GX, no Airflow DB; Delta tables only where loading is under test."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

from revenue_platform.errors import ConfigError
from revenue_platform.quality import frames as F
from revenue_platform.quality.config import QualityConfig, load_quality_config
from revenue_platform.quality.errors import QualityInputMissing
from revenue_platform.quality.loaders import load_bronze, load_gold, parse_bronze_orders, parse_order_value
from revenue_platform.quality.suites import SUITES
from spark_apps.contract.records import GOLD_DELTA_TYPES
from tests.quality_helpers import (
    INTERVAL_END,
    INTERVAL_START,
    bronze_rows,
    gold_rows,
    scenario_orders,
    write_tables,
)

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def orders_frame(rows: list[tuple[int, str, str, str, datetime, int]]) -> pd.DataFrame:
    """(order_id, location, type, amount, ordered_at, offset) rows in arrival order, parsed."""
    return pd.DataFrame(
        {
            "topic": "orders",
            "partition": 0,
            "offset": [r[5] for r in rows],
            "timestamp": pd.to_datetime([r[4] + timedelta(seconds=1) for r in rows], utc=True),
            "order_id": pd.array([r[0] for r in rows], dtype="Int64"),
            "location_id": [r[1] for r in rows],
            "order_type": [r[2] for r in rows],
            "final_amount": [Decimal(r[3]) for r in rows],
            "ordered_at": pd.to_datetime([r[4] for r in rows], utc=True),
            "parse_error": None,
        }
    )


# --- config -------------------------------------------------------------------------------------
def test_window_geometry_comes_from_the_apps_yaml_and_thresholds_from_overrides() -> None:
    config = load_quality_config(
        overrides={"max_dlq_share": 0.2, "revenue_ceiling": "50.00", "watermark": None}
    )
    assert (config.size_seconds, config.slide_seconds, config.watermark_seconds) == (15, 15, 30)
    assert config.max_dlq_share == pytest.approx(0.2)
    assert config.revenue_ceiling_cents == 5000


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"window_size": "fifteen"}, "window_size"),
        ({"window_slide": "1 minute"}, "window_slide must not be longer"),
        ({"max_dlq_share": 1.5}, "max_dlq_share"),
        ({"revenue_ceiling": "10.001"}, "revenue_ceiling"),
        ({"surprise": 1}, "surprise"),
    ],
)
def test_invalid_config_names_the_field(values: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        QualityConfig().with_overrides(values)


# --- independent parsing --------------------------------------------------------------------------
def test_amounts_parse_as_exact_decimals() -> None:
    parsed = parse_order_value(
        b'{"orderId": 7, "locationId": "s", "finalAmount": 0.10, "orderType": "GENERAL",'
        b' "orderedDateTime": "2026-11-22T10:00:01.250"}'
    )
    assert parsed["final_amount"] == Decimal("0.10")
    assert isinstance(parsed["final_amount"], Decimal)
    assert parsed["ordered_at"] == datetime(2026, 11, 22, 10, 0, 1, 250000, tzinfo=UTC)
    assert parse_order_value(
        b'{"orderId": 7, "locationId": "s", "finalAmount": 3,'
        b' "orderType": "GENERAL", "orderedDateTime": "2026-11-22T10:00:01"}'
    )["final_amount"] == Decimal("3.00")


@pytest.mark.parametrize(
    "value",
    [
        b"",
        b"{",
        b'{"orderId": 1}',
        b'{"orderId":1,"locationId":"s","finalAmount":1.001,'
        b'"orderType":"GENERAL","orderedDateTime":"2026-11-22T10:00:00"}',
    ],
)
def test_unparseable_values_report_why(value: bytes) -> None:
    assert parse_order_value(value)["parse_error"]


def test_an_order_nested_as_deep_as_spark_accepts_parses_wherever_it_is_called() -> None:
    """Spark accepts JSON nested up to 1000 deep; Python's parser stopped at its recursion limit, and
    the RecursionError failed every quality run over the order's hour."""
    nested = "[" * 990 + "]" * 990
    value = (
        '{"orderId": 7, "locationId": "s", "finalAmount": 1.00, "orderType": "GENERAL",'
        f' "orderedDateTime": "2026-11-22T10:00:01", "extra": {nested}}}'
    ).encode()

    def parsed_at_depth(frames: int) -> dict[str, Any]:
        return parse_order_value(value) if frames == 0 else parsed_at_depth(frames - 1)

    parsed = parsed_at_depth(100)
    assert (parsed["parse_error"], parsed["order_id"], parsed["final_amount"]) == (None, 7, Decimal("1.00"))
    deeper = "[" * 5_000 + "]" * 5_000  # deeper than Spark accepts: an error, never a crash
    assert parse_order_value(value.replace(nested.encode(), deeper.encode()))["parse_error"]


def test_bronze_orders_are_valid_records_in_arrival_order(tmp_path: Path) -> None:
    orders = scenario_orders()
    names = write_tables(tmp_path, "blue", gold_rows(orders), bronze_rows(orders))
    bronze = load_bronze(names.bronze_orders_table, INTERVAL_START)
    parsed = parse_bronze_orders(bronze)
    assert len(bronze) == len(orders) + 2  # a redelivered duplicate and a dead letter
    assert len(parsed) == len(orders) + 1
    assert parsed["parse_error"].isna().all()
    assert parsed["timestamp"].is_monotonic_increasing
    assert load_gold(names.gold_revenue_table, INTERVAL_START, INTERVAL_END).schema == GOLD_DELTA_TYPES


def test_a_missing_table_says_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(QualityInputMissing, match=str(tmp_path / "nope")):
        load_gold(str(tmp_path / "nope"), INTERVAL_START, INTERVAL_END)


# --- derived frames -------------------------------------------------------------------------------
def test_tumbling_and_hopping_windows_are_epoch_aligned() -> None:
    orders = orders_frame([(1, "s", "GENERAL", "1.00", T0 + timedelta(seconds=17), 0)])
    tumbling = F.assign_windows(orders, QualityConfig())
    assert tumbling["window_start"].tolist() == [pd.Timestamp(T0 + timedelta(seconds=15))]
    hopping = F.assign_windows(orders, QualityConfig(window_size="15 seconds", window_slide="5 seconds"))
    starts = sorted(hopping["window_start"].tolist())
    assert starts == [pd.Timestamp(T0 + timedelta(seconds=s)) for s in (5, 10, 15)]


def test_expected_windows_count_the_first_occurrence_of_an_order_once() -> None:
    orders = orders_frame(
        [
            (1, "s", "GENERAL", "0.10", T0, 0),
            (1, "s", "GENERAL", "99.00", T0, 1),  # redelivery with a different amount: ignored
            (2, "s", "GENERAL", "0.20", T0 + timedelta(seconds=3), 2),
        ]
    )
    windows = F.expected_windows(orders, QualityConfig())
    assert windows[["order_count", "revenue"]].values.tolist() == [[2, Decimal("0.30")]]


def test_reconciliation_compares_cents_and_reports_missing_windows() -> None:
    config = QualityConfig()
    orders = orders_frame(
        [(1, "a", "GENERAL", "0.10", T0 + timedelta(seconds=1), 0), (2, "b", "GENERAL", "0.20", T0, 1)]
    )
    gold = pd.DataFrame(
        {
            "location_id": ["a"],
            "order_type": ["GENERAL"],
            "window_start": [pd.Timestamp(T0)],
            "window_end": [pd.Timestamp(T0 + timedelta(seconds=15))],
            "order_count": [1],
            "revenue": [Decimal("0.11")],
            "batch_id": [0],
        }
    )
    frame = F.reconciliation_frame(gold, orders, T0, T0 + timedelta(minutes=5), config)
    assert frame["present_in"].tolist() == ["both", "bronze_only"]
    assert frame["revenue_diff_cents"].tolist()[0] == 1
    assert pd.isna(frame["revenue_diff_cents"].iloc[1])
    assert frame["order_count_diff"].tolist()[0] == 0


def test_only_closed_windows_of_the_interval_are_reconciled() -> None:
    config = QualityConfig()  # watermark 30 s
    end = T0 + timedelta(minutes=1)
    moments = [T0 - timedelta(seconds=40), T0 + timedelta(seconds=14), end - timedelta(seconds=20)]
    orders = orders_frame([(i, "s", "GENERAL", "1.00", m, i) for i, m in enumerate(moments)])
    frame = F.reconciliation_frame(pd.DataFrame(), orders, T0, end, config)
    # Window ending 09:59:35 belongs to the previous interval, the one ending 10:00:50 to the next.
    assert frame["window_start"].tolist() == [pd.Timestamp(T0)]


def test_late_means_more_than_the_watermark_behind_what_arrived_before() -> None:
    config = QualityConfig()
    orders = orders_frame(
        [
            (1, "s", "GENERAL", "1", T0 + timedelta(minutes=5), 0),
            (2, "s", "GENERAL", "1", T0 + timedelta(minutes=4, seconds=31), 1),  # 29 s behind: on time
            (3, "s", "GENERAL", "1", T0 + timedelta(minutes=4), 2),  # 60 s behind: late
        ]
    )
    # They reached Kafka in this order, a second apart.
    orders["timestamp"] = pd.to_datetime([T0 + timedelta(minutes=6, seconds=i) for i in range(3)], utc=True)
    assert F.late_flags(orders, config).tolist() == [False, False, True]
    # "Before" is Kafka order, whatever order the frame is in (the dedupe rule's is by ingest batch).
    assert F.late_flags(orders.iloc[::-1], config).tolist() == [True, False, False]


def test_freshness_uses_the_interval_end_not_the_clock() -> None:
    gold = pd.DataFrame({"window_end": [pd.Timestamp(T0), pd.Timestamp(T0 + timedelta(minutes=2))]})
    frame = F.freshness_frame(gold, T0 + timedelta(minutes=10), QualityConfig())
    assert frame["lag_seconds"].tolist() == [480.0]
    assert F.freshness_frame(gold, T0, QualityConfig())["lag_seconds"].isna().all()


def _arrivals(*event_and_arrival: tuple[timedelta, timedelta]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "ordered_at": [pd.Timestamp(T0 + event) for event, _ in event_and_arrival],
            "timestamp": [pd.Timestamp(T0 + arrival) for _, arrival in event_and_arrival],
        }
    )


def test_freshness_of_an_idle_stream_is_measured_against_its_last_input() -> None:
    config = QualityConfig()  # 15 s windows, 30 s watermark, 15 minutes max lag
    minute = timedelta(minutes=1)
    # The demo: 90 s of orders from T0, gold up to date, then nothing for the rest of the hour.
    gold = pd.DataFrame({"window_end": [pd.Timestamp(T0 + timedelta(seconds=s)) for s in range(15, 91, 15)]})
    idle = _arrivals((timedelta(seconds=89), timedelta(seconds=90)))
    frame = F.freshness_frame(gold, T0 + 40 * minute, config, idle)
    # Reference = last event + watermark (T0+119 s); newest closed window ends at T0+75 s: 44 s behind.
    assert frame["lag_seconds"].tolist() == [44.0]
    assert frame["lag_seconds"].tolist()[0] < config.freshness_max_lag_seconds
    # Input kept flowing but gold stopped at T0+90 s (a dead revenue query): stale, as before.
    flowing = _arrivals((timedelta(seconds=89), timedelta(seconds=90)), (39 * minute, 39 * minute))
    # Reference = 39 min + watermark; newest closed window ends at 90 s: 38 min behind.
    assert F.freshness_frame(gold, T0 + 40 * minute, config, flowing)["lag_seconds"].tolist() == [2280.0]
    # Input that arrives after the interval end does not count for it.
    late = _arrivals((timedelta(seconds=89), timedelta(seconds=90)), (41 * minute, 41 * minute))
    assert F.freshness_frame(gold, T0 + 40 * minute, config, late)["lag_seconds"].tolist() == [44.0]
    # Nothing arrived at all: nothing can be late.
    nothing = _arrivals()
    assert F.freshness_frame(pd.DataFrame({"window_end": []}), T0, config, nothing)[
        "lag_seconds"
    ].tolist() == [0.0]


def test_gold_window_frame_derives_exact_checks() -> None:
    gold = pd.DataFrame(gold_rows(scenario_orders()))
    frame = F.gold_windows_frame(gold, INTERVAL_START, INTERVAL_END, QualityConfig())
    assert (frame["window_duration_seconds"] == 15).all()
    assert (frame["window_start_epoch_mod_slide"] == 0).all()
    assert frame["revenue_cents"].tolist() == [int(r * 100) for r in frame["revenue"]]


def test_every_check_has_a_unique_name() -> None:
    names = [str(e.meta["check"]) for spec in SUITES for e in spec.build(QualityConfig())]
    assert len(names) == len(set(names)) == 23


def test_the_data_docs_call_each_input_health_check_by_its_name(tmp_path: Path) -> None:
    """Data Docs title a section by the checked column: `valid_unparseable` stood for the check every
    other place (results table, operations view, docs) calls `valid_records_parse`."""
    from revenue_platform.quality.suites import input_health_expectations

    checked = {
        str(e.meta["check"]): getattr(e, "column", None) for e in input_health_expectations(QualityConfig())
    }
    assert checked == {name: name for name in ("dlq_share", "late_share", "valid_records_parse")}
    orders = scenario_orders()
    names = write_tables(tmp_path, "blue", gold_rows(orders), bronze_rows(orders))
    bronze = load_bronze(names.bronze_orders_table, INTERVAL_START)
    frame = F.input_health_frame(
        bronze, parse_bronze_orders(bronze), INTERVAL_START, INTERVAL_END, QualityConfig()
    )
    assert set(checked) <= set(frame.columns)
    assert frame["valid_records_parse"].tolist() == [0]


# --- gate argument resolution -------------------------------------------------------------------
def _context(**values: Any) -> dict[str, Any]:
    run = SimpleNamespace(run_after=datetime(2026, 11, 22, 12, 7, tzinfo=UTC))
    return {"params": {}, "dag_run": run, "data_interval_start": None, "data_interval_end": None, **values}


def test_interval_defaults_to_the_data_interval_then_to_the_hour_before_run_after() -> None:
    from revenue_platform.airflow.quality_tasks import resolve_interval

    scheduled = _context(data_interval_start=T0, data_interval_end=T0 + timedelta(hours=1))
    assert resolve_interval(scheduled) == (T0, T0 + timedelta(hours=1))
    asset_triggered = _context()
    end = datetime(2026, 11, 22, 12, 7, tzinfo=UTC)
    assert resolve_interval(asset_triggered) == (end - timedelta(hours=1), end)
    given = _context(params={"interval_start": "2026-11-22T08:00:00", "interval_end": "2026-11-22T09:00:00Z"})
    assert resolve_interval(given) == (T0 - timedelta(hours=2), T0 - timedelta(hours=1))


def _rewrite(start: str, end: str) -> SimpleNamespace:
    return SimpleNamespace(extra={"deployment_id": "blue", "range_start": start, "range_end": end})


def test_an_asset_triggered_run_checks_the_range_its_events_rewrote() -> None:
    from revenue_platform.airflow.quality_tasks import intervals_to_check

    # A backfill's two runs, queued into one quality run; days before run_after (12:07 on the 22nd).
    events = {
        "gold": [
            _rewrite("2026-11-20T10:00:00+00:00", "2026-11-20T11:00:00+00:00"),
            _rewrite("2026-11-20T09:00:00+00:00", "2026-11-20T10:00:00+00:00"),
        ]
    }
    day = datetime(2026, 11, 20, tzinfo=UTC)
    assert intervals_to_check(_context(triggering_asset_events=events)) == [
        (day + timedelta(hours=9), day + timedelta(hours=11))
    ]
    # The form's explicit interval still wins over the event's range.
    given = _context(
        triggering_asset_events=events,
        params={"interval_start": "2026-11-22T08:00:00", "interval_end": "2026-11-22T09:00:00Z"},
    )
    assert intervals_to_check(given) == [(T0 - timedelta(hours=2), T0 - timedelta(hours=1))]
    # An event without a range keeps the hour before run_after.
    bare = {"gold": [SimpleNamespace(extra={"deployment_id": "blue"})]}
    end = datetime(2026, 11, 22, 12, 7, tzinfo=UTC)
    assert intervals_to_check(_context(triggering_asset_events=bare)) == [(end - timedelta(hours=1), end)]


def test_every_interval_a_run_checks_is_at_most_a_day_however_it_was_triggered() -> None:
    """Queued events merged into one span: two events 325 days apart were one 325-day check, and one
    event posted through the API with range_start 2000-01-01 a 9,822-day one, read into pandas."""
    from revenue_platform.airflow.quality_tasks import intervals_to_check
    from revenue_platform.errors import ConfigError

    far_apart = {
        "gold": [
            _rewrite("2025-12-31T10:00:00+00:00", "2025-12-31T11:00:00+00:00"),
            _rewrite("2026-11-21T10:00:00+00:00", "2026-11-21T11:00:00+00:00"),
        ]
    }
    assert intervals_to_check(_context(triggering_asset_events=far_apart)) == [
        (datetime(2025, 12, 31, 10, tzinfo=UTC), datetime(2025, 12, 31, 11, tzinfo=UTC)),
        (datetime(2026, 11, 21, 10, tzinfo=UTC), datetime(2026, 11, 21, 11, tzinfo=UTC)),
    ]
    # A three-day backfill's 72 hourly events: three checks of a day each, covering every hour.
    hours = [datetime(2026, 11, 18, tzinfo=UTC) + timedelta(hours=h) for h in range(72)]
    backfill = {"gold": [_rewrite(h.isoformat(), (h + timedelta(hours=1)).isoformat()) for h in hours]}
    spans = intervals_to_check(_context(triggering_asset_events=backfill))
    assert spans == [(hours[0] + timedelta(days=d), hours[0] + timedelta(days=d + 1)) for d in range(3)]

    decades = {"gold": [_rewrite("2000-01-01T00:00:00+00:00", "2026-11-22T00:00:00+00:00")]}
    with pytest.raises(ConfigError, match="names the range 2000-01-01T00:00:00"):
        intervals_to_check(_context(triggering_asset_events=decades))
    # Params that span more than a day are refused too, as the form refuses them.
    long_params = _context(
        params={"interval_start": "2026-11-20T00:00:00", "interval_end": "2026-11-22T00:00:00"}
    )
    with pytest.raises(ConfigError, match="more than the 1 day"):
        intervals_to_check(long_params)


def test_deployment_comes_from_the_asset_event_then_params_then_live(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from revenue_platform.airflow.quality_tasks import resolve_deployment
    from revenue_platform.errors import NoLiveDeploymentYet

    monkeypatch.setenv("PLATFORM_LAKE_ROOT", str(tmp_path / "lake"))
    event = SimpleNamespace(extra={"deployment_id": "green"})
    assert resolve_deployment(_context(triggering_asset_events={"gold": [event]})) == "green"
    assert resolve_deployment(_context(params={"deployment_id": "blue2"})) == "blue2"
    assert resolve_deployment(_context(), "explicit") == "explicit"
    # A fresh lake: nothing is live, and no made-up deployment is checked instead.
    with pytest.raises(NoLiveDeploymentYet, match="no deployment is live yet"):
        resolve_deployment(_context())
