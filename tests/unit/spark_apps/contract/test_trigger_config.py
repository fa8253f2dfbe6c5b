"""`trigger.interval`: 1 second to 1 hour between batch starts, or 0 seconds for batches back to back."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from spark_apps.contract.config import TriggerConfig


@pytest.mark.parametrize("interval", ["0 seconds", "1 second", "2 seconds", "1 hour"])
def test_an_interval_of_zero_to_an_hour_is_taken(interval: str) -> None:
    assert TriggerConfig(interval=interval).interval == interval


@pytest.mark.parametrize("interval", ["-1 seconds", "2 hours", "0", "0 seconds\n"])
def test_a_malformed_or_longer_interval_is_refused_naming_the_field(interval: str) -> None:
    with pytest.raises(ValidationError, match="interval"):
        TriggerConfig(interval=interval)
