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
