"""The streaming engine's revenue state: the event-time watermark and the open windows' totals,
held in the driver and applied to one micro-batch at a time. Pure Python: no Spark.

Why in the driver: a live batch changes a few hundred windows, and their totals go to gold by a
MERGE the driver makes anyway; the state is O(open windows), whatever the rate or the history. No
order reaches the driver: which copies are repeats is decided in Spark's state store
(`spark_apps.revenue.dedupe`), and which orders count and their window totals on the executors
(`spark_apps.revenue.counting.count_batch`), which hands the state a `BatchCount`: O(windows) rows
and four numbers. The state is never the source of truth: bronze and gold are. A restart resumes it
from what the last batch left (`RevenueState.resumed`): the watermark its bronze commit recorded and
the open windows' totals from gold.

The rules are Spark's (``withWatermark`` + a windowed ``groupBy`` in update mode), applied per batch:
  * the watermark a batch uses is the maximum event time of every valid order in earlier batches
    minus the delay (none before the first batch), where an order's event time counts for the
    watermark at most up to its Kafka timestamp: the broker's clock, on LogAppendTime topics. An
    order dated ahead of it (within `validation.max_future_skew`) is counted in its own window, but
    cannot make the honest orders behind it late;
  * a repeat (`spark_apps.contract.records.DEDUPE_RULE`) is not counted;
  * an order at or before the watermark is late: archived, not counted;
  * each counted order adds 1 and its amount to every window that holds its event time; a window
    is dropped from state once the watermark reaches its end.
Amounts are integer cents (exact): sums are Python ints (unbounded), from the executors' DECIMAL sums.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MICROS_PER_SECOND = 1_000_000

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


@dataclass(frozen=True)
class BatchCount:
    """One batch as the executors counted it (`counting.count_batch`) from the watermark `watermark_us`
    the batch started from: its valid orders, how many of them are repeats and how many late, the
    latest event time a valid order moves the watermark with (None without one), and the totals of
    the counted orders per window; how many of the repeats are conflicting copies (dead letters)."""

    watermark_us: int | None
    valid: int
    repeats: int
    late: int
    watermark_event_us: int | None
    windows: list[tuple[str, str, int, int, int]]  # location, type, start_us, count, cents
    conflicting_copies: int = 0


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

    def apply(
        self, batch: BatchCount, add_to_windows: bool = True, not_after_us: int | None = None
    ) -> BatchOutcome:
        """Add one batch's counts and move the watermark.

        `add_to_windows=False` redoes a batch whose window totals the state already holds (they were
        resumed from gold after the batch's own gold commit): the verdicts and the watermark are
        taken as always, the totals are left as they are and no window is reported changed.

        `not_after_us` (the wall clock when the batch started) bounds the event time the watermark
        moves with. `watermark_event_us` already never passes an order's Kafka timestamp, which is
        the broker's clock on a LogAppendTime topic; on a CreateTime topic the producer sets it, and
        one order stamped an hour ahead made every honest order behind it late (issue 56). No record
        the broker accepted can be stamped after now by an honest clock, so the bound only ever
        holds back a forged or skewed one."""
        if batch.watermark_us != self.watermark_us:
            # The late verdicts were made against another watermark: counting them would be wrong.
            raise ValueError(
                f"batch counted from watermark {batch.watermark_us}, the state is at {self.watermark_us}"
            )
        if batch.valid == 0 or batch.watermark_event_us is None:
            return BatchOutcome(0, 0, [], self.watermark_us)
        changed: list[WindowKey] = []
        if add_to_windows:
            for location, kind, start, count, cents in batch.windows:
                current = self._totals.setdefault((location, kind, start), [0, 0])
                current[0] += count
                current[1] += cents
                changed.append((location, kind, start))
        # Every window the batch changed is published, even one the new watermark closes at once.
        updated = []
        for loc, kind, start in sorted(changed):
            count, cents = self._totals[loc, kind, start]
            updated.append((loc, kind, start, start + self.windows.size_us, count, cents))
        latest = batch.watermark_event_us
        if not_after_us is not None:
            latest = min(latest, not_after_us)
        candidate = latest - self.delay_us
        watermark = self.watermark_us
        self.watermark_us = candidate if watermark is None else max(watermark, candidate)
        self._evict()
        return BatchOutcome(batch.late, batch.repeats, updated, self.watermark_us)

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
