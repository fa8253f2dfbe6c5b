"""The one-query engine's revenue state: the event-time watermark and the open windows' totals,
held in the driver and applied to one micro-batch at a time. Pure Python, NumPy and pandas: no Spark.

Why in the driver: a live batch changes a few hundred windows, and their totals go to gold by a
MERGE the driver makes anyway; the state is O(open windows), whatever the rate or the history. The
per-order state, which grows with the rate, is not here: which copies of an order are repeats is
decided before the batch reaches the driver, in Spark's state store (`spark_apps.revenue.dedupe`), and
arrives as the batch's `repeat` column. The state is never the source of truth: bronze and gold
are. A restart resumes it from what the last batch left (`RevenueState.resumed`): the watermark
its bronze commit recorded and the open windows' totals from gold.

The rules are Spark's (``withWatermark`` + a windowed ``groupBy`` in update mode), applied per batch:
  * the watermark a batch uses is the maximum event time of every valid order in earlier batches
    minus the delay (none before the first batch), where an order's event time counts for the
    watermark at most up to its Kafka timestamp (`watermark_event_us`): the broker's clock, on
    LogAppendTime topics. An order dated ahead of it (within `validation.max_future_skew`) is
    counted in its own window, but cannot make the honest orders behind it late;
  * a repeat (`spark_apps.contract.records.DEDUPE_RULE`) is not counted;
  * an order at or before the watermark is late: archived, not counted;
  * each counted order adds 1 and its amount to every window that holds its event time; a window
    is dropped from state once the watermark reaches its end.
Amounts are integer cents (exact): an order is at most ~10^18 cents, an int64; sums are Python ints
(unbounded), built from int64 sums of each amount's high and low 32 bits.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

MICROS_PER_SECOND = 1_000_000

# Columns of the batch `RevenueState.apply` takes (NumPy arrays of equal length, valid orders only).
BATCH_COLUMNS = (
    "location_id",  # str
    "order_type",  # str
    "ordered_at_us",  # int64, event time in microseconds since the epoch
    "cents",  # int64, finalAmount * 100
    "timestamp_us",  # int64, Kafka timestamp: bounds the event time the watermark moves with
    "repeat",  # bool, a repeat of an earlier copy (spark_apps.revenue.dedupe): never counted
)

WindowKey = tuple[str, str, int]  # (location_id, order_type, window_start_us)


@dataclass(frozen=True)
class WindowSpec:
    """Event-time windows of `size_us`, starting every `slide_us` (tumbling when equal), aligned
    to the epoch as Spark's ``window()`` is."""

    size_us: int
    slide_us: int

    def __post_init__(self) -> None:
        if self.size_us <= 0 or not 0 < self.slide_us <= self.size_us:
            raise ValueError(f"need 0 < slide <= size, got size {self.size_us} us, slide {self.slide_us} us")

    def starts(self, event_us: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row index, window start) of every window holding each event time."""
        last_start = event_us - np.mod(event_us, self.slide_us)
        rows, starts = [], []
        for hop in range(-(-self.size_us // self.slide_us)):
            start = last_start - hop * self.slide_us
            holds = start + self.size_us > event_us
            rows.append(np.nonzero(holds)[0])
            starts.append(start[holds])
        return np.concatenate(rows), np.concatenate(starts)


@dataclass
class BatchOutcome:
    """What one batch did: how many valid orders it did not count (late ones, repeats), the new totals
    of every window it changed, and the watermark the next batch uses."""

    late: int
    duplicates: int
    windows: list[tuple[str, str, int, int, int, int]]  # location, type, start_us, end_us, count, cents
    watermark_us: int | None


@dataclass
class RevenueState:
    """Watermark and open window totals after some batch (see the module docstring)."""

    windows: WindowSpec
    delay_us: int
    watermark_us: int | None = None
    _totals: dict[WindowKey, list[int]] = field(default_factory=dict)

    @property
    def open_windows(self) -> int:
        return len(self._totals)

    def total(self, location_id: str, order_type: str, window_start_us: int) -> tuple[int, int] | None:
        """(count, cents) of an open window, None when not in state."""
        found = self._totals.get((location_id, order_type, window_start_us))
        return None if found is None else (found[0], found[1])

    def apply(self, batch: dict[str, np.ndarray], add_to_windows: bool = True) -> BatchOutcome:
        """Count one batch of valid orders (``BATCH_COLUMNS``) and move the watermark.

        `add_to_windows=False` redoes a batch whose window totals the state already holds (they were
        resumed from gold after the batch's own gold commit): the verdicts and the watermark are
        computed as always, the totals are left as they are and no window is reported changed."""
        size = len(batch["ordered_at_us"])
        if size == 0:
            return BatchOutcome(0, 0, [], self.watermark_us)
        event_us = np.asarray(batch["ordered_at_us"], dtype=np.int64)
        repeat = np.asarray(batch["repeat"], dtype=bool)
        watermark = self.watermark_us
        is_late = ~repeat & (event_us <= watermark) if watermark is not None else np.zeros(size, dtype=bool)
        rows = np.nonzero(~repeat & ~is_late)[0]
        if not add_to_windows:
            rows = rows[:0]
        changed = self._add(
            np.asarray(batch["location_id"], dtype=object)[rows],
            np.asarray(batch["order_type"], dtype=object)[rows],
            event_us[rows],
            np.asarray(batch["cents"], dtype=np.int64)[rows],
        )
        updated = []
        for loc, kind, start in sorted(changed):
            count, cents = self._totals[loc, kind, start]
            updated.append((loc, kind, start, start + self.windows.size_us, count, cents))
        candidate = int(watermark_event_us(event_us, batch["timestamp_us"]).max()) - self.delay_us
        self.watermark_us = candidate if watermark is None else max(watermark, candidate)
        self._evict()
        return BatchOutcome(int(is_late.sum()), int(repeat.sum()), updated, self.watermark_us)

    def _add(
        self, locations: np.ndarray, types: np.ndarray, event_us: np.ndarray, cents: np.ndarray
    ) -> set[WindowKey]:
        if len(event_us) == 0:
            return set()
        rows, starts = self.windows.starts(event_us)
        amounts = cents[rows]
        # An order may be up to ~10^18 cents (validation.max_order_amount), so ten of them overflow an
        # int64 sum: sum the high and low 32 bits apart (each fits for 2^31 orders) and join them as
        # Python ints. pandas groups by hashing: sorting the keys instead took half of a batch's time.
        grouped = (
            pd.DataFrame(
                {
                    "location": locations[rows],
                    "kind": types[rows],
                    "start": starts,
                    "high": amounts >> 32,
                    "low": amounts & 0xFFFFFFFF,
                }
            )
            .groupby(["location", "kind", "start"], sort=False)
            .agg(count=("high", "size"), high=("high", "sum"), low=("low", "sum"))
        )
        sums: dict[WindowKey, list[int]] = {}
        for (location, kind, start), count, hi, lo in zip(
            grouped.index.tolist(),
            grouped["count"].tolist(),
            grouped["high"].tolist(),
            grouped["low"].tolist(),
            strict=True,
        ):
            sums[str(location), str(kind), int(start)] = [count, (hi << 32) + lo]
        for key, (count, total) in sums.items():
            current = self._totals.setdefault(key, [0, 0])
            current[0] += count
            current[1] += total
        return set(sums)

    def _evict(self) -> None:
        watermark = self.watermark_us
        if watermark is None:
            return
        size = self.windows.size_us
        for key in [k for k in self._totals if k[2] + size <= watermark]:
            del self._totals[key]

    @classmethod
    def resumed(
        cls,
        windows: WindowSpec,
        delay_us: int,
        watermark_us: int,
        open_totals: list[tuple[str, str, int, int, int]],
    ) -> RevenueState:
        """The state after the last batch before a restart, from what that batch left behind rather
        than from the orders: `watermark_us` is its watermark and `open_totals` (location, type,
        window start, count, cents) the windows' totals (those the watermark has closed are
        ignored). Costs the open windows, whatever the window size and however long the history."""
        state = cls(windows, delay_us, watermark_us)
        for location, kind, start, count, cents in open_totals:
            state._totals[location, kind, start] = [count, cents]
        state._evict()
        return state


def watermark_event_us(event_us: np.ndarray, timestamp_us: np.ndarray) -> np.ndarray:
    """The event time each order moves the watermark with: its own, but never past its Kafka timestamp
    (`engine.resume._scanned_watermark` states the same rule in Spark)."""
    return np.minimum(np.asarray(event_us, dtype=np.int64), np.asarray(timestamp_us, dtype=np.int64))
