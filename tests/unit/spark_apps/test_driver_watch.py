"""The driver's watch loop keeps going when its side steps cannot reach the lake for a while."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest

from spark_apps.orders_streaming_app import _DriverLoop


def _loop() -> Any:
    config = SimpleNamespace(deployment_id="blue", lease_token=None)
    fence = SimpleNamespace(registry_root="s3a://lake/lake", storage_options={})
    return _DriverLoop(config, SimpleNamespace(), fence, datetime.now(UTC), {})  # type: ignore[arg-type]


def test_a_heartbeat_the_store_refuses_is_retried_and_its_outage_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    loop = _loop()
    outcomes = [OSError("Could not connect to server"), OSError("Could not connect to server"), None]

    def write() -> None:
        outcome = outcomes.pop(0)
        if outcome is not None:
            raise outcome

    caplog.set_level(logging.INFO)
    results = [loop._unless_unreachable("write its heartbeat", write) for _ in range(3)]
    assert results == [False, False, True]
    messages = [record.getMessage() for record in caplog.records]
    assert messages == [
        "deployment blue could not write its heartbeat, trying again: Could not connect to server",
        "deployment blue can write its heartbeat again",
    ]
    assert loop.unreachable == set()


class _EndedQuery:
    """A terminated query as the loop sees it: PySpark's exception carries the Python traceback text
    of the foreachBatch function that raised."""

    isActive = False

    def __init__(self, error: str | None) -> None:
        self._error = error

    def exception(self) -> str | None:
        return self._error


_REFUSED = (
    "[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function in foreach "
    'batch sink.\n  File ".../micro_batch.py", line 150, in __call__\n'
    "spark_apps.engine.stopping.StoppedBeforeBatch: batch 7 not started: the driver is stopping "
    "(its next start runs it)"
)


def test_a_batch_refused_after_a_stop_request_ends_the_run_as_the_stop() -> None:
    loop = _loop()
    loop.queries = [_EndedQuery(_REFUSED)]
    loop.stop_requested.set()
    assert not loop._keep_watching()
    loop.raise_outcome(SimpleNamespace(rejected=None))  # the stop it asked for: nothing raised


def test_a_refusal_nobody_asked_for_and_any_other_error_fail_the_run() -> None:
    unasked = _loop()
    unasked.queries = [_EndedQuery(_REFUSED)]
    with pytest.raises(RuntimeError, match="StoppedBeforeBatch"):
        unasked.raise_outcome(SimpleNamespace(rejected=None))

    stopping = _loop()
    stopping.queries = [_EndedQuery("org.apache.kafka.common.errors.TimeoutException: no broker")]
    stopping.stop_requested.set()
    with pytest.raises(RuntimeError, match="TimeoutException"):
        stopping.raise_outcome(SimpleNamespace(rejected=None))


def test_a_batch_refuses_to_start_once_the_stop_is_asked_for() -> None:
    import threading

    from spark_apps.engine.stopping import StoppedBeforeBatch, is_stop_refusal, refuse_if_stopping

    stop = threading.Event()
    refuse_if_stopping(stop, 6)  # not asked: the batch runs
    stop.set()
    with pytest.raises(StoppedBeforeBatch) as refused:
        refuse_if_stopping(stop, 7)
    assert is_stop_refusal(refused.value)
    assert "batch 7 not started" in str(refused.value)
