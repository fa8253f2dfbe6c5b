"""A deploy request is checked once, when it is made: the form, a request rebuilt from XCom and the
green a replay asks for are held to the same rules before anything is touched."""

from __future__ import annotations

from typing import Any

import pytest

from revenue_platform.errors import ConfigError
from revenue_platform.streaming.request import DeployForm, DeployRequest


@pytest.mark.parametrize(
    ("fields", "names"),
    [
        ({"deployment_id": "Blue Prod"}, "invalid deployment request"),
        ({"deployment_id": "green", "colour": "purple"}, "colour: 'purple'"),
        ({"deployment_id": "green", "config_overrides": ["window.size"]}, "config_overrides: must be"),
        (
            {"deployment_id": "green", "config_overrides": {"lease_token": "x"}},
            "config_overrides.lease_token",
        ),
        (
            {"deployment_id": "green", "config_overrides": {"kafka": {"bootstrap_servers": "evil:9092"}}},
            "config_overrides.kafka.bootstrap_servers",
        ),
        (
            {"deployment_id": "green", "config_overrides": {"kafka.starting_offsets": "latest"}},
            "config_overrides.kafka.starting_offsets",
        ),
        ({"deployment_id": "green", "starting_offsets": "yesterday"}, "starting_offsets: 'yesterday'"),
        ({"deployment_id": "green", "starting_offsets": "99999999999999999"}, "starting_offsets:"),
    ],
)
def test_a_bad_field_is_refused_when_the_request_is_made(fields: dict[str, Any], names: str) -> None:
    with pytest.raises(ConfigError, match=names):
        DeployRequest(**fields)


def test_a_request_rebuilt_from_its_dict_is_the_same_request_with_the_same_start() -> None:
    request = DeployForm.from_params(
        {"deployment_id": "green", "version": "2.0.0", "starting_offsets": 1767225600000}
    ).to_request()
    assert request.starting_config == {"kafka.starting_timestamp_ms": 1767225600000}
    rebuilt = DeployRequest(**request.to_dict())
    assert rebuilt == request
    assert rebuilt.starting_config == request.starting_config
    assert "starting_config" not in request.to_dict()  # derived, never carried


def test_the_named_positions_reset_any_timestamp() -> None:
    assert DeployRequest("green", starting_offsets="latest").starting_config == {
        "kafka.starting_offsets": "latest",
        "kafka.starting_timestamp_ms": None,
    }
