"""When a running deployment's windows are final: the app will not change them any more.

Readers that compare or rewrite gold windows (the reprocess repair, the hourly quality checks) ask
this of the progress file the app's revenue query publishes (spark_apps/engine/observability.py). Windows
ending at or before `through` are final once

* the app's own event-time watermark has reached `through`: Spark has closed them and will never
  write them again (the wall clock says nothing about an app that is behind: restart back-off,
  catch-up); or,
* on a quiet stream, whose watermark stands still because Spark moves it only with new records, the
  app had read everything Kafka held (`caught_up_at`, published while its query is idle)
  at least one watermark delay (`lateness`) after `through`. Every record that arrived in time is in
  gold then. The windows are still open in Spark's state, though: an order that arrives later than
  the watermark delay allows (measured against the append time: the rule assumes event times close
  to it, as the app's skew check does) still reaches a window at or above the standing watermark, and
  the app writes its own total for that window, as it would have without a repair.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from revenue_platform.times import parse_utc

log = logging.getLogger(__name__)


def read_progress(progress_file: str) -> dict[str, Any]:
    """The revenue query's latest progress document (`progress_file`: its location in the lake, as
    `DeploymentNames.progress_file` names it), or {} (no file yet, or unreadable)."""
    from revenue_platform.lake_storage import read_side_file

    return read_side_file(progress_file) or {}


def _moment(progress: dict[str, Any], field: str) -> datetime | None:
    published = progress.get(field)
    return parse_utc(published, field) if published else None


def app_watermark(progress_file: str) -> datetime | None:
    """The event-time watermark the deployment's revenue query last published, or None (not yet)."""
    return _moment(read_progress(progress_file), "watermark")


@dataclass(frozen=True)
class Finality:
    """The verdict on a deployment's windows, with the reason for the task log."""

    final: bool
    """True when the windows ending at or before the asked moment are final."""
    why: str
    """What the progress file said: the watermark, or when the app was last idle with Kafka read."""


@dataclass(frozen=True)
class _Published:
    """What one progress document says about finality, read once."""

    watermark: datetime | None
    caught_up_at: datetime | None
    lateness: timedelta | None

    @classmethod
    def read(cls, progress_file: str, lateness: timedelta | None) -> _Published:
        progress = read_progress(progress_file)
        return cls(_moment(progress, "watermark"), _moment(progress, "caught_up_at"), lateness)

    @property
    def idle_through(self) -> datetime | None:
        """Through when the quiet-stream rule makes windows final: a watermark delay before the app
        had read all of Kafka (None: never idle yet, or the delay is unknown)."""
        if self.caught_up_at is None or self.lateness is None:
            return None
        return self.caught_up_at - self.lateness

    @property
    def final_through(self) -> datetime | None:
        """The later of the two rules' moments; None while neither is known."""
        return max((m for m in (self.watermark, self.idle_through) if m is not None), default=None)


def final_through(progress_file: str, lateness: timedelta | None) -> datetime | None:
    """The latest moment such that the deployment's windows ending at or before it are final, or None
    (nothing published yet). Read it BEFORE the gold it vouches for: gold read later holds at least
    every window it calls final, gold read earlier may miss the batch that made them final."""
    return _Published.read(progress_file, lateness).final_through


def windows_final(progress_file: str, through: datetime, lateness: timedelta | None) -> Finality:
    """Are the deployment's windows ending at or before `through` final? `lateness` None (unknown
    watermark delay) leaves only the watermark rule."""
    # One read: the watermark and caught_up_at of the same published document.
    published = _Published.read(progress_file, lateness)
    watermark, caught_up = published.watermark, published.caught_up_at
    if watermark is not None and watermark >= through:
        return Finality(True, f"its watermark {watermark.isoformat()} has reached {through.isoformat()}")
    idle_through = published.idle_through
    if caught_up is not None and idle_through is not None and idle_through >= through:
        return Finality(
            True,
            f"it is idle and had read all of Kafka at {caught_up.isoformat()}, at least "
            f"{(caught_up - idle_through).total_seconds():.0f} s after {through.isoformat()}",
        )
    stated = watermark.isoformat() if watermark else "not published yet"
    delay = f"{lateness.total_seconds():.0f} s" if lateness is not None else "a watermark delay"
    last_idle = caught_up.isoformat() if caught_up else "not idle"
    return Finality(
        False,
        f"its event-time watermark ({stated}) has not reached {through.isoformat()}, and it was not "
        f"idle with all of Kafka read {delay} after that (last caught up: {last_idle})",
    )


def wait_for_final_windows(
    progress_file: str,
    through: datetime,
    lateness: timedelta,
    timeout_s: float,
    poll_s: float = 5.0,
    progress: Callable[[str], None] = log.info,
) -> bool:
    """Poll until the windows ending at or before `through` are final; False at the timeout.

    Logs what it waits for when it starts, every minute and at the end, so the task log explains a wait.
    """
    deadline = time.monotonic() + timeout_s
    said_at = float("-inf")
    while True:
        finality = windows_final(progress_file, through, lateness)
        if finality.final:
            progress(f"Windows through {through.isoformat()} are final: {finality.why}")
            return True
        now = time.monotonic()
        if now >= deadline:
            progress(f"Gave up waiting after {timeout_s:.0f} s: {finality.why}")
            return False
        if now - said_at >= 60:
            progress(f"Waiting up to {deadline - now:.0f} s for the app: {finality.why}")
            said_at = now
        time.sleep(min(poll_s, max(0.0, deadline - now)))
