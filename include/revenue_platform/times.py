"""Reading points in time from trigger forms and XComs: ISO text or datetimes, always UTC.

The platform reads zone-less times as UTC (docs/architecture.md, "Time"); every control-plane
module that accepts a time from a user goes through `parse_utc`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from revenue_platform.errors import ConfigError


def parse_utc(value: Any, name: str) -> datetime:
    """A timezone-aware UTC datetime from a datetime or ISO text (`Z` allowed; no zone means UTC)."""
    if isinstance(value, datetime):
        # A plain datetime, never a subclass: Airflow hands out pendulum DateTimes, and one with the
        # standard library's UTC loses its zone in arithmetic (DateTime - timedelta is naive), so a
        # later comparison with an aware time would raise.
        moment = datetime(
            value.year,
            value.month,
            value.day,
            value.hour,
            value.minute,
            value.second,
            value.microsecond,
            tzinfo=value.tzinfo,
            fold=value.fold,
        )
    else:
        try:
            moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError as error:
            raise ConfigError(
                f"{name}={value!r} is not an ISO date-time such as 2026-11-22T09:00:00Z"
            ) from error
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
