"""Gold's layout on disk: partitioned by the UTC hour of each window's start (`window_hour`).

Why: a gold MERGE rewrites every file that holds a window it changes, and writes the batch's new
windows into the same new file. Unpartitioned, the file holding the open windows collected every
window the app had written since it started, and every live batch copied all of it: 575,900 rows
per batch after a day of 15-second windows for 50 stores (issue 57). Partitioned by hour, a batch
rewrites only the files of the hours its windows are in, so what it copies is bounded by one hour of
windows (stores x order types x windows per hour: 24,000 rows for 50 stores and 15 s windows), on
day 30 as on day 1, and a closed hour stays one file that no live batch touches again.

The hour is a layout column, not part of gold's contract (`records.GOLD_COLUMNS`): the writers in
`spark_apps.storage` add it to what they write, and the control plane's reader leaves it out. A gold
table created before this layout (no `window_hour` column) keeps its layout and its writers their
old MERGE; a blue-green replay writes the new deployment's gold in this one (docs/operations.md).

Pure (no pyspark): the driver's delta-rs writer and Spark's share it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Final

GOLD_HOUR_COLUMN: Final = "window_hour"
# The same text as `window_hour` gives, in Spark's datetime pattern (under the platform's required UTC
# session time zone, `engine.session.required_spark_conf`).
SPARK_HOUR_PATTERN: Final = "yyyy-MM-dd'T'HH"
_HOUR_TEXT = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}")


def window_hour(start: datetime) -> str:
    """The partition value of a window starting at `start` (an aware datetime): its UTC hour as
    'YYYY-MM-DDTHH', which sorts as the hours do."""
    if start.tzinfo is None:
        raise ValueError(f"window start {start} has no time zone: gold's hours are UTC hours of instants")
    utc = start.astimezone(UTC)
    return f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T{utc.hour:02d}"


def hour_range(starts: Iterable[datetime]) -> tuple[str, str]:
    """The first and last hour of the windows starting at `starts` (at least one)."""
    hours = sorted({window_hour(start) for start in starts})
    if not hours:
        raise ValueError("no windows: no hour range")
    return hours[0], hours[-1]


def hour_range_predicate(alias: str, first_hour: str, last_hour: str) -> str:
    """`alias.window_hour` between two hours, as predicate text for delta-rs (whose MERGE takes text):
    the literal range that lets it skip every other hour's files.

    Only hours in `window_hour`'s own format reach the text; anything else is refused, so no value
    from a record or a form can become predicate syntax.
    """
    for hour in (first_hour, last_hour):
        if not _HOUR_TEXT.fullmatch(hour):
            raise ValueError(f"{hour!r} is not an hour in gold's layout (YYYY-MM-DDTHH)")
    if not alias.isidentifier():
        raise ValueError(f"{alias!r} is not a table alias")
    column = f"{alias}.{GOLD_HOUR_COLUMN}"
    return f"{column} >= '{first_hour}' AND {column} <= '{last_hour}'"
