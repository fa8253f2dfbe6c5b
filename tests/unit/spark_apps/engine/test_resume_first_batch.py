"""A query's first batch resumes nothing: no Spark read at all (seconds of cold jobs at every start)."""

from __future__ import annotations

from typing import Any

import pytest

from spark_apps.engine.resume import resume_revenue_state
from spark_apps.revenue.state import WindowSpec
from spark_apps.storage.bronze import BronzeAppender


class _NoSpark:
    """Fails the test on any use: the first batch must not read bronze or gold."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the first batch touched Spark ({name})")


class _Names:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the first batch looked up a table ({name})")


def test_the_first_batch_starts_empty_without_reading_bronze_or_gold() -> None:
    windows = WindowSpec(size_us=15_000_000, slide_us=15_000_000)
    state, redo = resume_revenue_state(
        _NoSpark(),  # type: ignore[arg-type]
        _Names(),  # type: ignore[arg-type]
        windows,
        30_000_000,
        0,
        BronzeAppender("/nowhere/bronze"),
    )
    assert redo is None
    assert state.watermark_us is None
    assert state.open_windows == 0


def test_a_later_batch_does_read_what_the_batch_before_left() -> None:
    windows = WindowSpec(size_us=15_000_000, slide_us=15_000_000)
    with pytest.raises(AssertionError, match="touched Spark"):
        resume_revenue_state(
            _NoSpark(),  # type: ignore[arg-type]
            _Names(),  # type: ignore[arg-type]
            windows,
            30_000_000,
            1,
            BronzeAppender("/nowhere/bronze"),
        )
