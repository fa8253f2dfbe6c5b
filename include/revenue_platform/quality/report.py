"""The outcome of one revenue quality run: one `CheckOutcome` per expectation, and a readable summary.

Kept free of Great Expectations types so it can travel through XCom (`to_dict`) and be stored as
rows of the results table without the GX objects it came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class CheckOutcome:
    """One expectation's verdict in one run."""

    dataset: str
    """The validated frame: gold_schema, gold_windows, reconciliation, freshness or input_health."""
    suite: str
    check: str
    """Stable name of the check (the expectation's `meta.check`), e.g. `window_start_aligned`."""
    expectation_type: str
    description: str
    success: bool
    element_count: int | None = None
    unexpected_count: int | None = None
    observed: str | None = None
    """Observed value or error message, rendered as text."""
    failing_keys: tuple[str, ...] = ()
    """A sample of offending keys (`location|type|window_start`, a column name, or a metric)."""
    failing_windows: tuple[tuple[str, str, datetime], ...] = ()
    """Every offending (location_id, order_type, window_start), for the per-window history."""

    def summary(self) -> str:
        rows = ""
        if self.unexpected_count is not None:
            of = f" of {self.element_count}" if self.element_count is not None else ""
            rows = f": {self.unexpected_count}{of} rows"
        observed = (
            f"; observed {self.observed}" if self.observed is not None and not self.failing_keys else ""
        )
        sample = f"; sample: {', '.join(self.failing_keys)}" if self.failing_keys else ""
        return f"{self.check} [{self.dataset}, {self.expectation_type}]{rows}{observed}{sample}"


@dataclass(frozen=True)
class QualityReport:
    """Everything one `run_revenue_checks` call found and where its evidence went."""

    run_id: str
    deployment_id: str
    interval_start: datetime
    interval_end: datetime
    outcomes: tuple[CheckOutcome, ...]
    data_docs_index: str
    results_table: str | None = None
    stats: dict[str, Any] = field(default_factory=dict)
    """Sizes of what was checked (gold rows, bronze records, closed windows), for the log."""

    @property
    def success(self) -> bool:
        return all(outcome.success for outcome in self.outcomes)

    @property
    def failures(self) -> tuple[CheckOutcome, ...]:
        return tuple(outcome for outcome in self.outcomes if not outcome.success)

    @property
    def failed_checks(self) -> set[str]:
        return {outcome.check for outcome in self.failures}

    def failure_summary(self) -> str:
        """Readable multi-line summary: which expectations failed, how many rows, sample keys, Data Docs."""
        header = (
            f"revenue quality checks {'passed' if self.success else 'FAILED'} for deployment "
            f"{self.deployment_id!r}, interval [{self.interval_start.isoformat()}, "
            f"{self.interval_end.isoformat()}) (run {self.run_id}): "
            f"{len(self.failures)} of {len(self.outcomes)} expectations failed"
        )
        lines = [header, *(f"  - {outcome.summary()}" for outcome in self.failures)]
        lines.append(f"Data Docs: {self.data_docs_index}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form (for XCom and logs)."""
        return {
            "run_id": self.run_id,
            "deployment_id": self.deployment_id,
            "interval_start": self.interval_start.isoformat(),
            "interval_end": self.interval_end.isoformat(),
            "success": self.success,
            "failed_checks": sorted(self.failed_checks),
            "expectations": len(self.outcomes),
            "data_docs_index": self.data_docs_index,
            "results_table": self.results_table,
            "stats": self.stats,
            "failures": [outcome.summary() for outcome in self.failures],
        }
