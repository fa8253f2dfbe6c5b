"""The operations view's revenue chart as pure functions: which windows it shows, where each one sits on
its time axis, the axis' ticks, and the totals over what it shows.

* The range: the latest `windows` window starts of a deployment's gold, up to its newest window
  (`chart_range`); the view reads gold's rows of that range only (`serving.operations_gold`), so what
  a refresh costs is bounded by the range, on day 30 as on day 1.
* The time axis: a window sits at its start's time (`time_axis_positions`), so a 35-minute gap in the
  data is a 35-minute gap on the axis, not one step like any other; `time_axis_ticks` labels it at
  round times (every 5 s ... every day) chosen for the span.
* The totals (`revenue_totals`): orders and revenue per order type and over all of them, summed as
  `Decimal` (exact to the cent, never a float).

The view serves the positions and ticks with the points, and the page only scales them to its pixels.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Final

from spark_apps.contract.records import ORDER_TYPES

# Tick steps on the time axis, smallest first: the first that spans the axis in `max_ticks` steps is used.
_TICK_SECONDS: Final = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200)
TICK_STEPS: Final = tuple(
    [timedelta(seconds=s) for s in _TICK_SECONDS] + [timedelta(days=d) for d in (1, 2, 7, 14, 30)]
)
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class ChartRange:
    """The window starts the chart shows: `windows` slots of one window slide each, the newest holding
    the newest window of gold."""

    start: datetime
    """The oldest window start shown (inclusive)."""
    end: datetime
    """One slide after the newest window start (exclusive)."""
    windows: int
    slide: timedelta

    @property
    def last_start(self) -> datetime:
        """The newest window start shown: gold's newest."""
        return self.end - self.slide


def chart_range(newest_start: datetime, slide: timedelta, windows: int) -> ChartRange:
    """The latest `windows` window starts (one `slide` apart) up to and including `newest_start`."""
    if windows < 1 or slide <= timedelta(0):
        raise ValueError(f"a chart shows at least one window of a positive slide, not {windows} x {slide}")
    end = newest_start + slide
    return ChartRange(end - windows * slide, end, windows, slide)


def time_axis_positions(starts: Sequence[datetime]) -> list[float]:
    """Where each window start sits on the chart's time axis, from 0 (the oldest start) to 1 (the newest),
    in proportion to time: two windows 35 minutes apart are 35 minutes apart on the axis, whatever lies
    between them. A single start (or all equal) sits in the middle."""
    if not starts:
        return []
    first, last = min(starts), max(starts)
    span = (last - first).total_seconds()
    if span == 0:
        return [0.5 for _ in starts]
    return [(start - first).total_seconds() / span for start in starts]


@dataclass(frozen=True)
class AxisTick:
    at: datetime
    position: float
    """As `time_axis_positions` places `at`: 0 at the oldest window start, 1 at the newest."""
    label: str
    """UTC: `HH:MM:SS` for steps under a minute, `HH:MM` up to an hour's, with the date when the span
    crosses midnight or a step is a day or more."""


def _tick_step(span: timedelta, max_ticks: int) -> timedelta:
    for step in TICK_STEPS:
        if span / step <= max_ticks:
            return step
    return TICK_STEPS[-1]


def _label(moment: datetime, step: timedelta, dated: bool) -> str:
    if step >= timedelta(days=1):
        return f"{moment:%Y-%m-%d}"
    clock = f"{moment:%H:%M:%S}" if step < timedelta(minutes=1) else f"{moment:%H:%M}"
    return f"{moment:%m-%d} {clock}" if dated else clock


def time_axis_ticks(starts: Sequence[datetime], max_ticks: int = 6) -> list[AxisTick]:
    """Ticks at round UTC times (multiples of the smallest step in `TICK_STEPS` that spans the range in
    at most `max_ticks` steps) between the oldest and the newest of `starts`, placed as
    `time_axis_positions` places the windows. One start: one tick, in the middle, at that start."""
    if not starts:
        return []
    first, last = min(starts).astimezone(UTC), max(starts).astimezone(UTC)
    dated = first.date() != last.date()
    if first == last:
        return [AxisTick(first, 0.5, _label(first, timedelta(seconds=1), dated))]
    step = _tick_step(last - first, max_ticks)
    # The first multiple of the step (counted from the epoch, in UTC) at or after the first start.
    tick = _EPOCH + -((_EPOCH - first) // step) * step
    ticks = []
    while tick <= last:
        ticks.append(AxisTick(tick, (tick - first) / (last - first), _label(tick, step, dated)))
        tick += step
    return ticks


@dataclass(frozen=True)
class Total:
    order_count: int = 0
    revenue: Decimal = Decimal("0.00")
    windows: int = 0
    """Gold rows summed: one per window and order type (and store)."""

    def plus(self, order_count: int, revenue: Decimal, windows: int = 1) -> Total:
        return Total(self.order_count + order_count, self.revenue + revenue, self.windows + windows)


@dataclass(frozen=True)
class RevenueTotals:
    by_order_type: dict[str, Total] = field(default_factory=dict)
    """Every order type of the contract (GENERAL, RESTAURANT; zero when none), then any other in the rows."""
    overall: Total = Total()


def revenue_totals(rows: Iterable[tuple[str, int, Decimal, int]]) -> RevenueTotals:
    """Orders and revenue per order type and over all, from (order_type, order_count, revenue, windows)
    rows (a window's own row, windows 1; or a sum over many): exact `Decimal` sums."""
    by_type = {order_type: Total() for order_type in ORDER_TYPES}
    overall = Total()
    for order_type, order_count, revenue, windows in rows:
        by_type[order_type] = by_type.get(order_type, Total()).plus(order_count, revenue, windows)
        overall = overall.plus(order_count, revenue, windows)
    return RevenueTotals(by_type, overall)
