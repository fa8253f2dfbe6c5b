"""The operations view's chart as pure functions: its range, a time axis that shows a gap as a gap, the
axis' ticks, and totals exact to the cent."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from revenue_platform.serving.operations_chart import (
    Total,
    chart_range,
    revenue_totals,
    time_axis_positions,
    time_axis_ticks,
)

T0 = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
S = timedelta(seconds=1)
MINUTE = timedelta(minutes=1)


def test_windows_sit_at_their_start_time_so_a_35_minute_gap_is_a_gap() -> None:
    """The user's report: three windows, 35 minutes of nothing, two windows were five even steps."""
    starts = [T0, T0 + 15 * S, T0 + 30 * S, T0 + 35 * MINUTE + 30 * S, T0 + 35 * MINUTE + 45 * S]
    span = (35 * MINUTE + 45 * S).total_seconds()

    positions = time_axis_positions(starts)

    assert positions == pytest.approx([0.0, 15 / span, 30 / span, (span - 15) / span, 1.0])
    assert positions != pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0]), "placed by index, not by time"
    # The gap takes 98 % of the axis; each 15 s step under 1 %.
    assert positions[3] - positions[2] > 0.97
    assert positions[1] - positions[0] < 0.01


def test_evenly_spaced_windows_stay_evenly_spaced_and_one_window_sits_in_the_middle() -> None:
    assert time_axis_positions([T0 + i * 15 * S for i in range(5)]) == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert time_axis_positions([T0]) == [0.5]
    # Two order types share a window start: one position each, the same.
    assert time_axis_positions([T0, T0, T0 + MINUTE]) == [0.0, 0.0, 1.0]
    assert time_axis_positions([]) == []


def test_ticks_are_round_utc_times_on_the_same_scale_as_the_windows() -> None:
    starts = [T0 + 2 * MINUTE, T0 + 37 * MINUTE + 45 * S]
    span = (35 * MINUTE + 45 * S).total_seconds()

    ticks = time_axis_ticks(starts)

    assert [(t.at, t.label) for t in ticks] == [
        (T0 + 10 * MINUTE, "10:10"),
        (T0 + 20 * MINUTE, "10:20"),
        (T0 + 30 * MINUTE, "10:30"),
    ]
    assert [t.position for t in ticks] == pytest.approx([8 * 60 / span, 18 * 60 / span, 28 * 60 / span])


def test_tick_labels_say_seconds_for_a_short_span_and_the_date_across_midnight() -> None:
    short = time_axis_ticks([T0, T0 + 30 * S])
    assert [t.label for t in short] == [f"10:00:{second:02d}" for second in range(0, 31, 5)]
    late = datetime(2026, 11, 22, 23, 30, tzinfo=UTC)
    overnight = time_axis_ticks([late, late + timedelta(hours=2)])
    assert [t.label for t in overnight] == [
        "11-22 23:30",
        "11-23 00:00",
        "11-23 00:30",
        "11-23 01:00",
        "11-23 01:30",
    ]
    assert [t.label for t in time_axis_ticks([T0])] == ["10:00:00"]
    assert time_axis_ticks([T0])[0].position == pytest.approx(0.5)


def test_the_range_is_the_latest_window_starts_up_to_the_newest() -> None:
    shown = chart_range(T0, 15 * S, 240)

    assert (shown.start, shown.last_start, shown.end) == (T0 - 239 * 15 * S, T0, T0 + 15 * S)
    assert chart_range(T0, 15 * S, 1).start == T0
    with pytest.raises(ValueError, match="at least one window"):
        chart_range(T0, 15 * S, 0)


def test_totals_are_exact_decimal_sums_per_order_type_and_overall() -> None:
    rows = [
        ("GENERAL", 3, Decimal("123456789.99"), 1),
        ("GENERAL", 1, Decimal("0.01"), 1),
        ("RESTAURANT", 1, Decimal("0.10"), 1),
        ("RESTAURANT", 2, Decimal("0.20"), 1),
    ]

    totals = revenue_totals(rows)

    assert totals.by_order_type == {
        "GENERAL": Total(4, Decimal("123456790.00"), 2),
        "RESTAURANT": Total(3, Decimal("0.30"), 2),
    }
    assert totals.overall == Total(7, Decimal("123456790.30"), 4)
    # 0.1 + 0.2 is 0.30000000000000004 in floats: the sum is a Decimal, to the cent.
    assert str(totals.by_order_type["RESTAURANT"].revenue) == "0.30"


def test_every_order_type_is_listed_even_without_windows() -> None:
    totals = revenue_totals([("GENERAL", 2, Decimal("5.00"), 1)])

    assert totals.by_order_type["RESTAURANT"] == Total(0, Decimal("0.00"), 0)
    assert list(totals.by_order_type) == ["GENERAL", "RESTAURANT"]
    assert revenue_totals([]).overall == Total(0, Decimal("0.00"), 0)
