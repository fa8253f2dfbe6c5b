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
        text = str(value)
        # fromisoformat stops at a NUL and takes any character between date and time, so
        # '2026-11-22T09:00:00\x00...' would parse: only printable ASCII is ISO text.
        if not (text.isascii() and text.isprintable()):
            raise ConfigError(
                f"{name}={value!r} is not an ISO date-time such as 2026-11-22T09:00:00Z "
                "(it holds control or non-ASCII characters)"
            )
        try:
            moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError as error:
            raise ConfigError(
                f"{name}={value!r} is not an ISO date-time such as 2026-11-22T09:00:00Z"
            ) from error
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError as error:
        # 0001-01-01T00:00+01:00 is year 0 in UTC, 9999-12-31T23:59-01:00 year 10000.
        raise ConfigError(
            f"{name}={value!r} is outside the range of UTC date-times (0001-01-01T00:00:00Z to "
            "9999-12-31T23:59:59.999999Z)"
        ) from error
