"""Errors of the revenue quality checks, so callers (DAGs, gates) can tell a failed check from a broken run.

`QualityCheckFailed` means the data was read and judged and did not pass; it is not fixed by retrying.
`QualityInputMissing` means a table the checks read does not exist (wrong deployment or lake root, or
the app has not written yet).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from revenue_platform.errors import PlatformError

if TYPE_CHECKING:
    from revenue_platform.quality.report import QualityReport


class QualityCheckFailed(PlatformError):
    """At least one expectation failed; `report` holds every outcome, the message summarises the failures."""

    def __init__(self, report: QualityReport) -> None:
        super().__init__(report.failure_summary())
        self.report = report


class QualityInputMissing(PlatformError):
    """A Delta table the checks read does not exist at the expected path."""
