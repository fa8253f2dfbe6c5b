"""Parsing and validating what a client puts in a query URL: order types, time ranges, pages.

Pure functions with no I/O, so every rule (and every error message) is unit-tested. A rule that
is broken raises `BadRequestError` carrying the HTTP status and a message that says how to fix
the request; the API turns it into `{"detail": message}`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from revenue_platform.errors import ConfigError, PlatformError
from revenue_platform.times import parse_utc
from spark_apps.contract.records import GENERAL, RESTAURANT

# Path names follow the seed's REST API (`/v1/orders/count/general_orders`); gold stores the
# producers' enum values. This mapping is the only place the two meet.
ORDER_TYPE_BY_PATH_NAME: dict[str, str] = {
    "general_orders": GENERAL,
    "restaurant_orders": RESTAURANT,
}


CENT = Decimal("0.01")


class BadRequestError(PlatformError):
    """The request cannot be answered as asked; `status_code` is the 4xx to answer with."""

    def __init__(self, message: str, status_code: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code


@dataclass(frozen=True)
class ServingLimits:
    """Bounds that keep every windowed answer small and cheap to compute."""

    max_range: timedelta = timedelta(days=31)
    """Longest [from_time, to_time) a windowed query may ask for."""
    default_page_size: int = 100
    """Windows per page when the client sends no `limit`."""
    max_page_size: int = 1000
    """Largest `limit` a client may ask for."""


@dataclass(frozen=True)
class TimeRange:
    """A half-open UTC interval [start, end): windows whose `window_start` lies in it are selected."""

    start: datetime
    end: datetime


@dataclass(frozen=True)
class Page:
    limit: int
    offset: int


def parse_order_type(path_name: str) -> str:
    """The gold `order_type` (GENERAL/RESTAURANT) for a path name like `general_orders`; 404 if unknown."""
    try:
        return ORDER_TYPE_BY_PATH_NAME[path_name]
    except KeyError:
        known = " or ".join(ORDER_TYPE_BY_PATH_NAME)
        raise BadRequestError(f"unknown order type {path_name!r}: use {known}", status_code=404) from None


def parse_timestamp(raw: str | None, name: str) -> datetime:
    """A UTC datetime from ISO-8601 text (zone-less means UTC, as everywhere in the platform)."""
    if raw is None or not raw.strip():
        raise BadRequestError(f"{name} is required: an ISO-8601 date-time such as 2026-11-22T09:00:00Z")
    try:
        return parse_utc(raw.strip(), name)
    except ConfigError as error:
        hint = ""
        if " " in raw.strip():
            # '+' in a URL query means a space: '+01:00' arrives as ' 01:00'.
            hint = " (a '+' in a URL query string is read as a space: write the offset as %2B01:00, or use Z)"
        raise BadRequestError(f"{error}{hint}") from error


def parse_time_range(from_time: str | None, to_time: str | None, limits: ServingLimits) -> TimeRange:
    """[from_time, to_time) checked for order and size."""
    start = parse_timestamp(from_time, "from_time")
    end = parse_timestamp(to_time, "to_time")
    if start >= end:
        raise BadRequestError(
            f"from_time ({start.isoformat()}) must be before to_time ({end.isoformat()}): "
            "the range is [from_time, to_time)"
        )
    if end - start > limits.max_range:
        raise BadRequestError(
            f"the range from_time..to_time spans {end - start}, more than the allowed {limits.max_range}: "
            "ask for consecutive smaller ranges"
        )
    return TimeRange(start, end)


def parse_page(limit: int | None, offset: int | None, limits: ServingLimits) -> Page:
    """`limit` in 1..max_page_size (default default_page_size) and `offset` >= 0."""
    chosen = limits.default_page_size if limit is None else limit
    if not 1 <= chosen <= limits.max_page_size:
        raise BadRequestError(f"limit must be between 1 and {limits.max_page_size}, got {chosen}")
    start = 0 if offset is None else offset
    if start < 0:
        raise BadRequestError(f"offset must be 0 or more, got {start}")
    return Page(limit=chosen, offset=start)


def format_money(amount: Decimal | int | None) -> str:
    """Money as a decimal string with exactly two places ("108.00"); a float is refused, never rounded."""
    if isinstance(amount, float):
        raise TypeError("money must never be a float; read it as Decimal")
    value = Decimal(0) if amount is None else Decimal(amount)
    return str(value.quantize(CENT))
