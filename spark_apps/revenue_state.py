"""The one-query engine's revenue state: dedupe, event-time watermark and open window totals,
held in the driver and applied to one micro-batch at a time. Pure Python, NumPy and pandas: no Spark.

Why in the driver: Spark's stateful operators need a second streaming query (or a shuffle and a
state store commit per operator per batch). A live batch holds ~10^5 orders; the state of a 30 s
watermark at 20,000 orders/s is ~10^6 order ids and a few thousand windows, which a dict holds in
~150 MB and updates in milliseconds. The state is never the source of truth: bronze and gold are. A
restart resumes it from what the last batch left (`RevenueState.resumed`): the watermark its bronze
commit recorded, the ids of bronze's counted orders still within the delay and the open windows'
totals from gold, so it needs no checkpoint and its cost does not grow with the window size.

The rules are Spark's (``withWatermark`` + ``dropDuplicatesWithinWatermark`` + a windowed
``groupBy`` in update mode), applied per batch in arrival order:
  * the watermark a batch uses is the maximum event time of every valid order in earlier batches
    minus the delay (none before the first batch), where an order's event time counts for the
    watermark at most up to its Kafka timestamp (`watermark_event_us`): the broker's clock, on
    LogAppendTime topics. An order dated ahead of it (within `validation.max_future_skew`) is
    counted in its own window, but cannot make the honest orders behind it late;
  * a later copy of an order id in the same batch is not counted (``ARRIVAL_ORDER``: Kafka
    timestamp, partition, offset within one batch);
  * an order at or before the watermark is late: archived, not counted;
  * an order whose id was counted and not yet forgotten is a duplicate; an id is forgotten once the
    watermark reaches its counted copy's event time plus the delay;
  * each counted order adds 1 and its amount to every window that holds its event time; a window
    is dropped from state once the watermark reaches its end.
Amounts are integer cents (exact): an order is at most ~10^18 cents, an int64; sums are Python ints
(unbounded), built from int64 sums of each amount's high and low 32 bits.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

MICROS_PER_SECOND = 1_000_000

# Columns of the batch `RevenueState.apply` takes (NumPy arrays of equal length, valid orders only).
BATCH_COLUMNS = (
    "order_id",  # str
    "location_id",  # str
    "order_type",  # str
    "ordered_at_us",  # int64, event time in microseconds since the epoch
    "cents",  # int64, finalAmount * 100
    "timestamp_us",  # int64, Kafka timestamp: the arrival order within a batch
    "partition",  # int32
    "offset",  # int64
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
    """What one batch did: which valid orders it did not count (indexes into the batch), the new
    totals of every window it changed, and the watermark the next batch uses."""

    not_counted: np.ndarray
    late: int
    duplicates: int
    windows: list[tuple[str, str, int, int, int, int]]  # location, type, start_us, end_us, count, cents
    watermark_us: int | None


@dataclass
class RevenueState:
    """Dedupe ids, watermark and open window totals after some batch (see the module docstring)."""

    windows: WindowSpec
    delay_us: int
    watermark_us: int | None = None
    # order id -> the second its counted copy expires in (event time + delay), and per such second
    # the ids expiring in it: eviction pops whole seconds instead of scanning every id.
    _expiry: dict[str, int] = field(default_factory=dict)
    _expiring: dict[int, list[str]] = field(default_factory=lambda: defaultdict(list))
    _totals: dict[WindowKey, list[int]] = field(default_factory=dict)

    @property
    def ids(self) -> int:
        return len(self._expiry)

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
        resumed from gold after the batch's own gold commit): the verdicts, ids and watermark are
        computed as always, the totals are left as they are and no window is reported changed."""
        size = len(batch["order_id"])
        if size == 0:
            return BatchOutcome(np.zeros(0, dtype=np.int64), 0, 0, [], self.watermark_us)
        event_us = np.asarray(batch["ordered_at_us"], dtype=np.int64)
        arrival = np.lexsort(
            (np.asarray(batch["offset"]), np.asarray(batch["partition"]), np.asarray(batch["timestamp_us"]))
        )
        ids = np.asarray(batch["order_id"], dtype=object)
        watermark = self.watermark_us
        # In arrival order: the first copy of each id in the batch, then late or known to the state.
        in_arrival = ids[arrival]
        first = np.empty(size, dtype=bool)
        first[arrival] = ~pd.Series(in_arrival).duplicated(keep="first").to_numpy()
        is_late = first & (event_us <= watermark) if watermark is not None else np.zeros(size, dtype=bool)
        candidates = first & ~is_late
        known = np.zeros(size, dtype=bool)
        expiry = self._expiry
        known[candidates] = np.fromiter((i in expiry for i in ids[candidates]), dtype=bool)
        counted = candidates & ~known
        late = int(is_late.sum())
        duplicates = int(size - first.sum() + known.sum())
        rows = np.nonzero(counted)[0]
        self._remember(ids[rows], event_us[rows])
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
        return BatchOutcome(np.nonzero(~counted)[0], late, duplicates, updated, self.watermark_us)

    def _remember(self, ids: np.ndarray, event_us: np.ndarray) -> None:
        if len(ids) == 0:
            return
        expiries = event_us + self.delay_us
        self._expiry.update(zip(ids.tolist(), expiries.tolist(), strict=True))
        seconds = expiries // MICROS_PER_SECOND
        by_second = np.argsort(seconds, kind="stable")
        ordered = seconds[by_second]
        cuts = np.flatnonzero(np.diff(ordered)) + 1
        firsts = ordered[np.r_[0, cuts]].tolist()
        for second, same in zip(firsts, np.split(ids[by_second], cuts), strict=True):
            self._expiring[second].extend(same.tolist())

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
        for second in [s for s in self._expiring if s * MICROS_PER_SECOND <= watermark]:
            kept = []
            for order_id in self._expiring.pop(second):
                expiry = self._expiry.get(order_id)
                if expiry is None:
                    continue
                if expiry <= watermark:
                    del self._expiry[order_id]
                else:
                    kept.append(order_id)
            if kept:
                self._expiring[second] = kept
        size = self.windows.size_us
        for key in [k for k in self._totals if k[2] + size <= watermark]:
            del self._totals[key]

    @classmethod
    def resumed(
        cls,
        windows: WindowSpec,
        delay_us: int,
        watermark_us: int,
        counted_ids: dict[str, np.ndarray],
        open_totals: list[tuple[str, str, int, int, int]],
    ) -> RevenueState:
        """The state after the last batch before a restart, from what that batch left behind rather
        than from the orders: `watermark_us` is its watermark, `counted_ids` (``order_id`` and
        ``ordered_at_us``) the counted orders with event time after `ids_horizon_us` (older ones are
        ignored), and `open_totals` (location, type, window start, count, cents) the windows' totals
        (those the watermark has closed are ignored). Costs the ids within the delay plus the open
        windows, whatever the window size and however long the history."""
        state = cls(windows, delay_us, watermark_us)
        event_us = np.asarray(counted_ids["ordered_at_us"], dtype=np.int64)
        # An id counted again after it expired has two counted rows; the later one's expiry holds.
        # Bronze returns rows in no particular order, so remember them in event-time order (the
        # last write of an id wins).
        in_time_order = np.argsort(event_us, kind="stable")
        state._remember(
            np.asarray(counted_ids["order_id"], dtype=object)[in_time_order], event_us[in_time_order]
        )
        for location, kind, start, count, cents in open_totals:
            state._totals[location, kind, start] = [count, cents]
        state._evict()
        return state


def ids_horizon_us(watermark_us: int, delay_us: int) -> int:
    """Counted orders with event time after this still hold their id in state after `watermark_us`."""
    return watermark_us - delay_us


def watermark_event_us(event_us: np.ndarray, timestamp_us: np.ndarray) -> np.ndarray:
    """The event time each order moves the watermark with: its own, but never past its Kafka timestamp
    (`OneQueryBatch.rebuild` states the same rule in Spark)."""
    return np.minimum(np.asarray(event_us, dtype=np.int64), np.asarray(timestamp_us, dtype=np.int64))


def as_arrays(columns: dict[str, Any]) -> dict[str, np.ndarray]:
    """`columns` (lists or arrays by name) as NumPy arrays."""
    return {name: np.asarray(values) for name, values in columns.items()}
