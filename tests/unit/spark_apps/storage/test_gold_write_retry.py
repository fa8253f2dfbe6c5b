"""Gold has two writers (the app's MERGE, a reprocess repair): a Delta write-write conflict is
retried, since both write absolute totals; anything else is not."""

from __future__ import annotations

import pytest
from delta.exceptions.base import ConcurrentAppendException, MetadataChangedException

from spark_apps.storage.gold import GOLD_WRITE_ATTEMPTS, retry_concurrent_gold_write


def _conflicting(times: int, error: type[Exception] = ConcurrentAppendException) -> tuple[list[int], object]:
    calls: list[int] = []

    def write() -> None:
        calls.append(1)
        if len(calls) <= times:
            raise error("a concurrent transaction committed first")

    return calls, write


def test_a_conflict_is_retried_until_the_write_succeeds() -> None:
    calls, write = _conflicting(2)
    waits: list[float] = []
    retry_concurrent_gold_write(write, "gold MERGE", sleep=waits.append)  # type: ignore[arg-type]
    assert len(calls) == 3
    assert len(waits) == 2
    assert waits[0] < waits[1], "backs off a little more each time"


def test_conflicts_beyond_the_attempt_budget_surface() -> None:
    calls, write = _conflicting(GOLD_WRITE_ATTEMPTS)
    with pytest.raises(ConcurrentAppendException):
        retry_concurrent_gold_write(write, "gold MERGE", sleep=lambda _s: None)  # type: ignore[arg-type]
    assert len(calls) == GOLD_WRITE_ATTEMPTS


def test_a_schema_change_is_not_retried() -> None:
    calls, write = _conflicting(1, MetadataChangedException)
    with pytest.raises(MetadataChangedException):
        retry_concurrent_gold_write(write, "gold MERGE", sleep=lambda _s: None)  # type: ignore[arg-type]
    assert len(calls) == 1


def test_the_drivers_delta_rs_conflicts_are_retried_the_same_way() -> None:
    from deltalake.exceptions import CommitFailedError

    calls, write = _conflicting(2, CommitFailedError)
    waits: list[float] = []
    retry_concurrent_gold_write(write, "gold MERGE", waits.append, conflicts=(CommitFailedError,))  # type: ignore[arg-type]
    assert len(calls) == 3
    assert len(waits) == 2
