"""One window rule, two implementations that must agree: Spark's `window()` (the stream's counting and
the batch reprocessing job, both through `revenue.windows.windowed_revenue`) and the quality checks'
expected windows (`revenue_platform.quality.frames.assign_windows`).

The rule: an event at time t is in every window [start, start + size) whose start is a multiple of
the slide since the epoch (tumbling when slide = size). Each implementation is checked against that
definition over generated event times: exact window boundaries and one microsecond either side,
times before the epoch (validation accepts orders dated back to 1960), and random instants, for
tumbling windows, hopping ones and a slide that does not divide the size.
"""

from __future__ import annotations

import random

import pandas as pd
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from revenue_platform.quality.config import QualityConfig
from revenue_platform.quality.frames import assign_windows
from spark_apps.revenue.state import MICROS_PER_SECOND

# (size, slide) in seconds; None = tumbling.
GEOMETRIES = [(15, None), (15, 5), (60, 15), (10, 3), (3600, 900), (86400, 3600)]
# 1960-01-01 .. 2100-01-01 in microseconds: the event times an accepted order can carry, and more.
EARLIEST_US, LATEST_US = -315_619_200 * MICROS_PER_SECOND, 4_102_444_800 * MICROS_PER_SECOND

Membership = set[tuple[int, int]]  # (event index, window start in microseconds)


def _geometry_id(geometry: tuple[int, int | None]) -> str:
    size, slide = geometry
    return f"size{size}s-slide{slide or size}s"


def event_times(size_s: int, slide_s: int, seed: int = 31) -> list[int]:
    """Boundaries (window starts and ends, +-1 us), the epoch, pre-epoch times and random instants."""
    size_us, slide_us = size_s * MICROS_PER_SECOND, slide_s * MICROS_PER_SECOND
    anchors = [0, 1_669_000_000 * MICROS_PER_SECOND, -86_400 * MICROS_PER_SECOND, EARLIEST_US]
    times = set()
    for anchor in anchors:
        base = anchor - anchor % slide_us
        for k in range(-3, 4):
            for edge in (base + k * slide_us, base + k * slide_us + size_us):
                times.update({edge - 1, edge, edge + 1})
    generator = random.Random(seed)
    times.update(generator.randrange(EARLIEST_US, LATEST_US) for _ in range(300))
    times.update(generator.randrange(-2 * size_us, 2 * size_us) for _ in range(100))
    return sorted(times)


def by_definition(size_s: int, slide_s: int, events_us: list[int]) -> Membership:
    size_us, slide_us = size_s * MICROS_PER_SECOND, slide_s * MICROS_PER_SECOND
    found = set()
    for index, event in enumerate(events_us):
        start = event - event % slide_us  # Python's % floors: also right before the epoch
        while start + size_us > event:
            found.add((index, start))
            start -= slide_us
    return found


def quality_frames(size_s: int, slide_s: int, events_us: list[int]) -> Membership:
    config = QualityConfig(window_size=f"{size_s} seconds", window_slide=f"{slide_s} seconds")
    orders = pd.DataFrame(
        {
            "event_index": range(len(events_us)),
            "ordered_at": pd.to_datetime(pd.Series(events_us, dtype="int64"), unit="us", utc=True),
        }
    )
    windows = assign_windows(orders, config)
    starts = (windows["window_start"] - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(microseconds=1)
    assert (windows["window_end"] - windows["window_start"] == pd.Timedelta(seconds=size_s)).all()
    return {(int(i), int(s)) for i, s in zip(windows["event_index"], starts, strict=True)}


def spark_window(spark: SparkSession, size_s: int, slide_s: int, events_us: list[int]) -> Membership:
    events = spark.createDataFrame(list(enumerate(events_us)), "event_index long, event_us long")
    window = F.window(F.timestamp_micros("event_us"), f"{size_s} seconds", f"{slide_s} seconds")
    rows = events.select("event_index", window.alias("w")).select(
        "event_index",
        F.unix_micros("w.start").alias("start_us"),
        (F.unix_micros("w.end") - F.unix_micros("w.start")).alias("size_us"),
    )
    found = set()
    for row in rows.collect():
        assert row["size_us"] == size_s * MICROS_PER_SECOND
        found.add((row["event_index"], row["start_us"]))
    return found


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=_geometry_id)
def test_the_quality_frames_window_as_the_definition_does(
    geometry: tuple[int, int | None],
) -> None:
    size_s, slide_s = geometry[0], geometry[1] or geometry[0]
    events = event_times(size_s, slide_s)
    expected = by_definition(size_s, slide_s, events)
    assert len(expected) >= len(events) * (size_s // slide_s)  # every event is in a window or more
    assert quality_frames(size_s, slide_s, events) == expected


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=_geometry_id)
def test_sparks_window_function_windows_as_the_definition_does(
    spark: SparkSession, geometry: tuple[int, int | None]
) -> None:
    size_s, slide_s = geometry[0], geometry[1] or geometry[0]
    events = event_times(size_s, slide_s)
    assert spark_window(spark, size_s, slide_s, events) == by_definition(size_s, slide_s, events)
