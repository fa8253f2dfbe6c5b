"""Pure arithmetic of the benchmark: percentiles, per-record latency, pacing, sustained-rate judgement.

Nothing here touches Kafka, Spark or the clock, so every rule the report relies on is unit-tested
(tests/unit/bench/).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of already sorted values (fraction in (0, 1]); no interpolation.

    Nearest rank keeps every reported latency a latency that some record really had.
    """
    if not sorted_values:
        raise ValueError("percentile of no values")
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction {fraction} must be in (0, 1]")
    rank = math.ceil(fraction * len(sorted_values))
    return float(sorted_values[rank - 1])


def latency_summary(latencies_s: Sequence[float]) -> dict[str, float | int]:
    """count, p50, p95, p99, max and mean of latencies in seconds."""
    ordered = sorted(latencies_s)
    if not ordered:
        return {"count": 0}
    return {
        "count": len(ordered),
        "p50_s": percentile(ordered, 0.50),
        "p95_s": percentile(ordered, 0.95),
        "p99_s": percentile(ordered, 0.99),
        "max_s": float(ordered[-1]),
        "mean_s": sum(ordered) / len(ordered),
    }


@dataclass(frozen=True)
class VisibleBatch:
    """One micro-batch of the revenue query: the offsets it processed up to, and when gold showed it."""

    end_offsets: Mapping[int, int]
    """Partition -> first offset NOT processed by this batch (Spark's endOffset)."""
    visible_at_ms: int
    """Epoch ms at which the batch's gold commit became readable."""


def record_latencies_ms(
    appended_ms: Mapping[int, Sequence[int]],
    first_offsets: Mapping[int, int],
    batches: Sequence[VisibleBatch],
) -> tuple[list[tuple[int, int]], int]:
    """(appended ms, latency ms) of every visible record, and how many records never became visible.

    `appended_ms[p][i]` is the append time of offset `first_offsets[p] + i` in partition p. A record
    at offset o is visible at the first batch (in visibility order) whose end offset for p exceeds o.
    """
    ordered = sorted(batches, key=lambda batch: batch.visible_at_ms)
    latencies: list[tuple[int, int]] = []
    invisible = 0
    for partition, appends in appended_ms.items():
        base = first_offsets.get(partition, 0)
        covered = base  # first offset not yet assigned to a batch
        for batch in ordered:
            end = batch.end_offsets.get(partition, base)
            if end <= covered:
                continue
            for offset in range(covered, min(end, base + len(appends))):
                appended = appends[offset - base]
                latencies.append((appended, batch.visible_at_ms - appended))
            covered = end
        invisible += max(0, base + len(appends) - covered)
    return latencies, invisible


def gold_visible_at_ms(batch_start_ms: int, batch_end_ms: int, commit_times_ms: Sequence[int]) -> int:
    """When a batch's output became visible: its last gold commit inside the batch, else the batch end.

    A batch MERGEs into gold before it publishes to Kafka and reports progress, so the Delta commit
    time is when a reader could first see the rows; a batch with no commit falls back to its end.
    """
    ordered = sorted(commit_times_ms)
    inside = ordered[bisect.bisect_left(ordered, batch_start_ms) : bisect.bisect_right(ordered, batch_end_ms)]
    return inside[-1] if inside else batch_end_ms


def records_due(rate_per_s: float, elapsed_s: float, already_sent: int, total: int) -> int:
    """How many records a paced producer must send now to be on schedule (never beyond `total`)."""
    if rate_per_s <= 0 or elapsed_s < 0:
        return 0
    target = min(total, math.floor(rate_per_s * elapsed_s))
    return max(0, target - already_sent)


@dataclass(frozen=True)
class SustainVerdict:
    sustained: bool
    reason: str


def judge_sustained(
    target_rate: float,
    achieved_rate: float,
    invisible_records: int,
    first_quarter_p50_s: float,
    last_quarter_p50_s: float,
    trigger_interval_s: float,
    drained: bool = True,
) -> SustainVerdict:
    """A rate is sustained when the producer kept it, the app caught up, and lag did not grow.

    "Caught up" (`drained`): within the drain allowance after the producer stopped, the app had
    processed every record; a run that needed the final graceful stop to finish is not sustained.
    "Bounded lag": the median latency of the last quarter of records is at most one trigger interval
    above that of the first quarter. A pipeline that falls behind shows steadily growing latency.
    """
    if achieved_rate < 0.95 * target_rate:
        return SustainVerdict(False, f"producer reached only {achieved_rate:,.0f}/s of {target_rate:,.0f}/s")
    if invisible_records:
        return SustainVerdict(False, f"{invisible_records} records never reached gold before the deadline")
    if not drained:
        return SustainVerdict(False, "the app had not caught up within the drain allowance after producing")
    growth = last_quarter_p50_s - first_quarter_p50_s
    if growth > trigger_interval_s:
        return SustainVerdict(
            False,
            f"latency grew by {growth:.1f}s over the run (> trigger interval {trigger_interval_s:.0f}s)",
        )
    return SustainVerdict(True, f"latency growth {growth:+.1f}s within one trigger interval")


def after_warmup(
    appended_and_latency_ms: Sequence[tuple[int, int]], warmup_s: float
) -> list[tuple[int, int]]:
    """The records appended `warmup_s` or more after the first one: the measured window of a live phase."""
    if not appended_and_latency_ms:
        return []
    cut = min(appended for appended, _ in appended_and_latency_ms) + warmup_s * 1000
    return [(appended, latency) for appended, latency in appended_and_latency_ms if appended >= cut]


def quarter_medians_s(appended_and_latency_ms: Sequence[tuple[int, int]]) -> tuple[float, float]:
    """Median latency (s) of the first and of the last quarter of records, by append time."""
    count = len(appended_and_latency_ms)
    if count == 0:
        return 0.0, 0.0
    in_append_order = [latency for _, latency in sorted(appended_and_latency_ms)]
    quarter = max(1, count // 4)
    first = sorted(in_append_order[:quarter])
    last = sorted(in_append_order[-quarter:])
    return percentile(first, 0.5) / 1000, percentile(last, 0.5) / 1000


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """numerator / denominator, or None when either is missing or the denominator is 0."""
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def highest_sustained_rate(verdicts: Mapping[float, bool]) -> float | None:
    """The highest target rate judged sustained (None when none was)."""
    sustained = [rate for rate, ok in verdicts.items() if ok]
    return max(sustained) if sustained else None
