"""Field rules the app's config sections share: the strict pydantic base, Spark interval strings and
their bounds, ASCII money amounts, lake and registry roots. Pyspark-free.
"""

from __future__ import annotations

import re
from decimal import Decimal
from functools import partial
from typing import Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, ValidationError

# Spaces only (no tabs or newlines) and ASCII digits (`\d` takes any script's digits), matched whole.
_INTERVAL = re.compile(r" *([0-9]{1,12}) +(second|seconds|minute|minutes|hour|hours|day|days) *")
_UNIT_SECONDS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
# Lake and registry roots: a path or an object-store URI, printable, no control characters.
MAX_ROOT_LENGTH = 1024
_ROOT_PATTERN = re.compile(r"[^\x00-\x1f\x7f]{1,1024}")


def interval_seconds(interval: str) -> int:
    """Seconds in a Spark interval string such as '15 seconds' or '1 hour'."""
    match = _INTERVAL.fullmatch(interval) if isinstance(interval, str) else None
    if not match:
        raise ValueError(f"{interval!r} is not an interval like '15 seconds', '5 minutes' or '1 hour'")
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2).rstrip("s")]


def bounded_interval(value: str, maximum_s: int) -> str:
    """`value` if it is an interval of 1 second to `maximum_s` seconds; else ValueError saying so."""
    seconds = interval_seconds(value)
    if not 1 <= seconds <= maximum_s:
        raise ValueError(
            f"{value!r} must be between 1 second and {describe_seconds(maximum_s)}, got {seconds} s"
        )
    return value


def ascii_amount(value: Any, integer_digits: int) -> Any:
    """`value` unless it is text that is not an amount of ASCII digits (at most `integer_digits`
    before the point, 2 after): Decimal() reads any script's digits ("١٢٣"), a config or form never."""
    if isinstance(value, str) and not re.fullmatch(rf"[0-9]{{1,{integer_digits}}}(?:\.[0-9]{{1,2}})?", value):
        raise ValueError(f"{value[:40]!r} is not an amount such as 1000000.00")
    return value


def whole_cents(value: Decimal) -> Decimal:
    """`value` if it is a whole number of cents; else ValueError (money is compared in integer cents,
    so a fraction of a cent would be silently dropped)."""
    if value != value.quantize(Decimal("0.01")):
        raise ValueError("must be a whole number of cents")
    return value


def ascii_digits(integer_digits: int) -> BeforeValidator:
    """The `ascii_amount` rule as a field's validator: `Annotated[Decimal, ascii_digits(16), WHOLE_CENTS]`."""
    return BeforeValidator(partial(ascii_amount, integer_digits=integer_digits))


WHOLE_CENTS = AfterValidator(whole_cents)
"""The `whole_cents` rule as a field's validator."""


def validation_problems(error: ValidationError, whole: str = "<root>") -> str:
    """Each problem of a pydantic error as `field.path: reason` (`whole` for one about the whole
    model), joined by "; ". Field and reason only: pydantic's own text repeats the input, which may
    be a secret (a password, a webhook token)."""
    return "; ".join(
        f"{'.'.join(str(part) for part in issue['loc']) or whole}: {issue['msg']}"
        for issue in error.errors(include_input=False)
    )


def describe_seconds(seconds: int) -> str:
    """`seconds` in the largest unit that divides it: 86400 -> '1 day', 90 -> '90 seconds'."""
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds % size == 0:
            count = seconds // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds} second{'s' if seconds != 1 else ''}"


class StrictModel(BaseModel):
    """A config section: unknown fields are refused (a typo fails at start), values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def validate_root(value: str) -> str:
    """`value` if it can be a lake or registry root: 1-1024 characters, no control characters."""
    if not _ROOT_PATTERN.fullmatch(value):
        raise ValueError(
            f"{value[:80]!r} must be a path or URI of 1-{MAX_ROOT_LENGTH} characters, no control characters"
        )
    return value
