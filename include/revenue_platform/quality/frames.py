"""Turn gold and bronze into the small pandas frames the expectation suites validate.

Every check that is not a plain column rule (window alignment, duration, reconciliation against
bronze, freshness, input health) is computed here as a derived column, so a standard expectation
on that column expresses it and its result appears in Data Docs with the offending rows.
All functions are pure (frames in, frame out) and work in exact arithmetic: money as `Decimal`
and integer cents, time as integer microseconds.

Definitions (docs/quality.md explains them for operators):
* the checked interval is `[interval_start, interval_end)`;
* a window belongs to the interval when it overlaps it (`window_start < end` and `window_end > start`);
* a window is closed when `window_end <= interval_end - watermark`; a run reconciles the closed
  windows with `interval_start - watermark < window_end <= interval_end - watermark`, so consecutive
  intervals reconcile every window exactly once;
* input health looks at the bronze records that arrived (Kafka timestamp) within the interval;
* a valid record is late when its event time is more than the watermark behind the largest event
  time of the valid records that arrived before it (arrival order: timestamp, partition, offset).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from decimal import Decimal
from typing import Final

import pandas as pd

from revenue_platform.quality.config import QualityConfig
from spark_apps.contract.records import GOLD_DELTA_TYPES, GOLD_KEY_COLUMNS, GOLD_WINDOW_COLUMNS

_MICROS: Final = 1_000_000
_CENT: Final = Decimal("0.01")


def _utc(moment: datetime) -> pd.Timestamp:
    stamp = pd.Timestamp(moment)
    return stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")


def _epoch_micros(column: pd.Series) -> pd.Series:
    """Integer microseconds since the epoch (nullable), exact for any timestamp resolution."""
    stamps = pd.to_datetime(column, utc=True)
    result = (stamps - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(microseconds=1)
    return result.astype("Int64")


def _cents(value: object) -> int | None:
    """Exact integer cents of a Decimal or int; None for null."""
    if value is None:
        return None
    if isinstance(value, Decimal):
        return None if value.is_nan() else int((value * 100).to_integral_value())
    if isinstance(value, int):
        return value * 100
    if pd.isna(value):
        return None
    # A float here means the table broke the DECIMAL contract (the schema check reports it); use
    # its shortest repr so the remaining checks still run on the intended value.
    return int((Decimal(repr(value)) * 100).to_integral_value())


def _with_columns(frame: pd.DataFrame, columns: list[str] | tuple[str, ...]) -> pd.DataFrame:
    """Copy with missing columns added as nulls, so a schema drift fails expectations instead of crashing."""
    frame = frame.copy()
    for column in columns:
        if column not in frame.columns:
            frame[column] = None
    return frame


def window_key(location_id: object, order_type: object, window_start: object) -> str:
    """`location|type|window_start` as in the revenue topic's keys (ISO instant, Z)."""
    start = window_start
    if isinstance(start, datetime) and not pd.isna(start):
        start = _utc(start).strftime("%Y-%m-%dT%H:%M:%SZ")
    return f"{location_id}|{order_type}|{start}"


# ------------------------------------------------------------------------------------------------
def schema_frame(schema: dict[str, str]) -> pd.DataFrame:
    """One row per column of the contract or the table: column_name, expected_type, actual_type."""
    names = [*GOLD_DELTA_TYPES, *(name for name in schema if name not in GOLD_DELTA_TYPES)]
    return pd.DataFrame(
        {
            "column_name": names,
            "expected_type": [GOLD_DELTA_TYPES.get(name) for name in names],
            "actual_type": [schema.get(name) for name in names],
        }
    )


def gold_windows_frame(
    gold: pd.DataFrame, interval_start: datetime, interval_end: datetime, config: QualityConfig
) -> pd.DataFrame:
    """Gold rows of windows overlapping the interval (plus rows with null window bounds), with
    derived columns: revenue_cents, window_duration_seconds, window_start_epoch_mod_slide."""
    frame = _with_columns(gold, list(GOLD_DELTA_TYPES))
    starts = pd.to_datetime(frame["window_start"], utc=True)
    ends = pd.to_datetime(frame["window_end"], utc=True)
    overlaps = (starts < _utc(interval_end)) & (ends > _utc(interval_start))
    frame = frame[overlaps | starts.isna() | ends.isna()].copy()
    start_us = _epoch_micros(frame["window_start"])
    end_us = _epoch_micros(frame["window_end"])
    frame["revenue_cents"] = pd.array([_cents(value) for value in frame["revenue"]], dtype="Int64")
    frame["window_duration_seconds"] = ((end_us - start_us) / _MICROS).astype("Float64")
    frame["window_start_epoch_mod_slide"] = start_us % (config.slide_seconds * _MICROS)
    return frame.reset_index(drop=True)


# ------------------------------------------------------------------------------------------------
def repeat_flags(orders: pd.DataFrame, horizon_seconds: int) -> pd.Series:
    """`spark_apps.contract.records.DEDUPE_RULE` in pandas, aligned with `orders` (which must be in arrival
    order, as `parse_bronze_orders` returns them): True for a copy whose previous copy of the same
    order id arrived (Kafka timestamp) at most the horizon before it."""
    stamps = pd.to_datetime(orders["timestamp"], utc=True)
    previous = stamps.groupby(orders["order_id"]).shift(1)
    within = (stamps - previous) <= pd.Timedelta(seconds=horizon_seconds)
    return within.fillna(False).astype(bool)


def counted_copies(orders: pd.DataFrame, horizon_seconds: int) -> pd.DataFrame:
    """The copies the dedupe rule counts (not repeats), parse errors dropped."""
    counted = orders[~repeat_flags(orders, horizon_seconds) & orders["parse_error"].isna()]
    return counted.reset_index(drop=True)


def assign_windows(orders: pd.DataFrame, config: QualityConfig) -> pd.DataFrame:
    """One row per (order, window containing its event time); windows are epoch-aligned like Spark's."""
    size_us, slide_us = config.size_seconds * _MICROS, config.slide_seconds * _MICROS
    event_us = _epoch_micros(orders["ordered_at"])
    last_start = event_us - event_us % slide_us
    parts = []
    # A hopping window of `size` contains an instant in ceil(size / slide) consecutive windows.
    for hop in range(-(-size_us // slide_us)):
        start = last_start - hop * slide_us
        part = orders.assign(window_start_us=start)
        parts.append(part[start + size_us > event_us])
    windows = pd.concat(parts, ignore_index=True)
    windows["window_start"] = pd.to_datetime(windows["window_start_us"].astype("int64"), unit="us", utc=True)
    windows["window_end"] = windows["window_start"] + pd.Timedelta(microseconds=size_us)
    return windows.drop(columns=["window_start_us"])


def expected_windows(orders: pd.DataFrame, config: QualityConfig) -> pd.DataFrame:
    """Order count and exact Decimal revenue per window from valid bronze orders that are not repeats."""
    columns = list(GOLD_WINDOW_COLUMNS)
    deduplicated = counted_copies(orders, config.dedupe_horizon_seconds)
    if deduplicated.empty:
        return pd.DataFrame(columns=columns)
    windows = assign_windows(deduplicated, config)
    grouped = windows.groupby([*GOLD_KEY_COLUMNS, "window_end"], sort=True)["final_amount"]
    # sum() of an object column of Decimals stays Decimal; start from 0.00 so the scale is cents.
    totals = grouped.agg(order_count="count", revenue=lambda amounts: sum(amounts, Decimal("0.00")))
    return totals.reset_index()[columns]


def reconciliation_frame(
    gold: pd.DataFrame,
    orders: pd.DataFrame,
    interval_start: datetime,
    interval_end: datetime,
    config: QualityConfig,
) -> pd.DataFrame:
    """Closed windows of the interval, gold outer-joined with the bronze recomputation.

    Columns: keys, window_end, present_in (both, gold_only, bronze_only), gold_/bronze_order_count,
    gold_/bronze_revenue (text, exact), order_count_diff and revenue_diff_cents (gold minus bronze;
    null unless present in both, so a missing window fails only `present_in`).
    """
    low = _utc(interval_start) - pd.Timedelta(seconds=config.watermark_seconds)
    high = _utc(interval_end) - pd.Timedelta(seconds=config.watermark_seconds)

    def closed(frame: pd.DataFrame) -> pd.DataFrame:
        ends = pd.to_datetime(frame["window_end"], utc=True)
        return frame[(ends > low) & (ends <= high)]

    gold_rows = _with_columns(gold, list(GOLD_DELTA_TYPES)).dropna(subset=list(GOLD_KEY_COLUMNS))
    gold_rows = gold_rows.assign(window_start=pd.to_datetime(gold_rows["window_start"], utc=True))
    gold_rows = gold_rows.assign(window_end=pd.to_datetime(gold_rows["window_end"], utc=True))
    # Duplicate keys are the uniqueness check's finding; reconcile the latest row per key only.
    gold_rows = gold_rows.sort_values("batch_id", kind="stable").drop_duplicates(
        list(GOLD_KEY_COLUMNS), keep="last"
    )
    gold_side = closed(gold_rows)[list(GOLD_WINDOW_COLUMNS)]
    bronze_side = closed(expected_windows(orders, config))
    merged = gold_side.merge(
        bronze_side,
        on=list(GOLD_KEY_COLUMNS),
        how="outer",
        suffixes=("_gold", "_bronze"),
        indicator="present_in",
    )
    merged["present_in"] = (
        merged["present_in"]
        .astype(str)
        .map({"both": "both", "left_only": "gold_only", "right_only": "bronze_only"})
    )
    both = merged["present_in"] == "both"
    gold_count = merged["order_count_gold"].astype("Int64")
    bronze_count = merged["order_count_bronze"].astype("Int64")
    gold_cents = pd.array([_cents(v) for v in merged["revenue_gold"]], dtype="Int64")
    bronze_cents = pd.array([_cents(v) for v in merged["revenue_bronze"]], dtype="Int64")
    result = pd.DataFrame(
        {
            "location_id": merged["location_id"],
            "order_type": merged["order_type"],
            "window_start": merged["window_start"],
            "window_end": merged["window_end_gold"].fillna(merged["window_end_bronze"]),
            "present_in": merged["present_in"],
            "gold_order_count": gold_count,
            "bronze_order_count": bronze_count,
            "gold_revenue": [None if pd.isna(v) else str(v) for v in merged["revenue_gold"]],
            "bronze_revenue": [None if pd.isna(v) else str(v) for v in merged["revenue_bronze"]],
            "order_count_diff": (gold_count - bronze_count).where(both),
            "revenue_diff_cents": (pd.Series(gold_cents) - pd.Series(bronze_cents)).where(both),
        }
    )
    return result.sort_values(list(GOLD_KEY_COLUMNS), kind="stable").reset_index(drop=True)


# ------------------------------------------------------------------------------------------------
def freshness_frame(
    gold: pd.DataFrame,
    interval_end: datetime,
    config: QualityConfig,
    orders: pd.DataFrame | None = None,
    newest_end_before: Callable[[datetime], datetime | None] | None = None,
) -> pd.DataFrame:
    """One row: the newest closed window's end and its lag behind the reference (never now()).

    The reference is the interval end, or earlier when the input went quiet: the newest event time
    of the valid orders (`orders`, from bronze) that arrived before the interval end, plus the
    watermark. Gold cannot be fresher than its input: an idle stream is not stale, while a revenue
    query that stopped under flowing input still is. With `orders` given but none arrived before the
    end, nothing could be late: lag 0 and no reference. `gold` holds the windows of the checked
    interval; when none of them is closed, `newest_end_before` (if given) finds the newest window that
    is among older ones (`loaders.newest_window_end_at_or_before`).
    """
    end = _utc(interval_end)
    reference: pd.Timestamp | None = end
    if orders is not None:
        arrived = orders[pd.to_datetime(orders["timestamp"], utc=True) < end]
        newest_event = pd.to_datetime(arrived["ordered_at"], utc=True).max() if len(arrived) else None
        if newest_event is None or pd.isna(newest_event):
            reference = None
        else:
            reference = min(end, newest_event + pd.Timedelta(seconds=config.watermark_seconds))
    newest = None
    lag: float | None = 0.0
    if reference is not None:
        ends = pd.to_datetime(_with_columns(gold, ["window_end"])["window_end"], utc=True)
        closed = ends[ends <= reference - pd.Timedelta(seconds=config.watermark_seconds)].dropna()
        newest = closed.max() if not closed.empty else None
        if newest is None and newest_end_before is not None:
            bound = reference - pd.Timedelta(seconds=config.watermark_seconds)
            older = newest_end_before(bound.to_pydatetime())
            newest = None if older is None else _utc(older)
        lag = (reference - newest).total_seconds() if newest is not None else None
    return pd.DataFrame(
        {
            "reference_time": pd.array([reference], dtype="datetime64[us, UTC]"),
            "newest_closed_window_end": pd.array([newest], dtype="datetime64[us, UTC]"),
            "lag_seconds": pd.array([lag], dtype="Float64"),
        }
    )


def late_flags(orders: pd.DataFrame, config: QualityConfig) -> pd.Series:
    """True for valid records more than the watermark behind the max event time of the records that
    reached Kafka before them (Kafka timestamp, partition, offset), aligned with `orders`.

    Kafka order, not the dedupe rule's ingest-batch order: one revenue batch reads several ingest
    commits together, and a burst split unevenly across two ingest batches is not late for it."""
    kafka_order = orders.sort_values(["timestamp", "partition", "offset"], kind="stable")
    event = pd.to_datetime(kafka_order["ordered_at"], utc=True)
    seen_before = event.cummax().shift(1)
    late = event < seen_before - pd.Timedelta(seconds=config.watermark_seconds)
    return late.fillna(False).astype(bool).reindex(orders.index)


def input_health_frame(
    bronze: pd.DataFrame,
    orders: pd.DataFrame,
    interval_start: datetime,
    interval_end: datetime,
    config: QualityConfig,
) -> pd.DataFrame:
    """One row of input-health metrics over the records that arrived within the interval."""
    low, high = _utc(interval_start), _utc(interval_end)

    def arrived(frame: pd.DataFrame) -> pd.Series:
        stamps = pd.to_datetime(frame["timestamp"], utc=True)
        return (stamps >= low) & (stamps < high)

    in_interval = bronze[arrived(bronze)]
    valid_mask = arrived(orders)
    valid = orders[valid_mask]
    late = late_flags(orders, config)[valid_mask]
    records, dlq = len(in_interval), int(in_interval["dlq_reason"].notna().sum())
    return pd.DataFrame(
        {
            "records": [records],
            "dlq_records": [dlq],
            "dlq_share": [dlq / records if records else 0.0],
            "valid_records": [len(valid)],
            "late_records": [int(late.sum())],
            "late_share": [float(late.sum()) / len(valid) if len(valid) else 0.0],
            # How many accepted records the independent parser rejects; named like its check, because
            # the Data Docs title each section by the column, next to dlq_share and late_share.
            "valid_records_parse": [int(valid["parse_error"].notna().sum())],
        }
    )
