"""Data-quality checks on the windowed revenue output (gold), usable as a promotion gate.

Great Expectations suites (kept as code in `suites.py`) validate frames derived from the gold and
bronze Delta tables (`frames.py`), including an independent recomputation of every closed window
from the raw orders. Start with `run_revenue_checks`; docs/quality.md describes every check.
Importing this package is cheap: pandas, delta-rs and GX load only when checks run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from revenue_platform.quality.config import QualityConfig, default_lake_root, load_quality_config
from revenue_platform.quality.errors import QualityCheckFailed, QualityInputMissing
from revenue_platform.quality.report import CheckOutcome, QualityReport

if TYPE_CHECKING:
    from revenue_platform.quality.runner import run_revenue_checks

__all__ = [
    "CheckOutcome",
    "QualityCheckFailed",
    "QualityConfig",
    "QualityInputMissing",
    "QualityReport",
    "default_lake_root",
    "load_quality_config",
    "run_revenue_checks",
]


def __getattr__(name: str) -> Any:
    # run_revenue_checks lives with the pandas/GX code; load it on first use only.
    if name == "run_revenue_checks":
        from revenue_platform.quality.runner import run_revenue_checks

        return run_revenue_checks
    raise AttributeError(name)
