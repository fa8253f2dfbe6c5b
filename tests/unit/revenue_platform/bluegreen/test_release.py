"""Publishing an app version: validation, the registry row, the event extra, `make release` input."""

from __future__ import annotations

from pathlib import Path

import pytest

from revenue_platform.bluegreen.release import conf_from_env, publish, release_event_extra
from revenue_platform.errors import ConfigError
from revenue_platform.registry import DeploymentRegistry


@pytest.fixture
def registry(tmp_path: Path) -> DeploymentRegistry:
    return DeploymentRegistry(str(tmp_path / "lake"))


def test_a_release_is_validated_recorded_and_named_by_its_event(registry: DeploymentRegistry) -> None:
    release = publish(registry, "2.1.0", {"kafka.max_offsets_per_trigger": 500}, True, "", "alice", print)

    stored = registry.get_release("2.1.0")
    assert release["new"]
    assert (stored.config_overrides, stored.published_by) == ({"kafka.max_offsets_per_trigger": 500}, "alice")
    assert release_event_extra(release) == {"version": "2.1.0", "config_hash": stored.config_hash}
    assert not publish(registry, "2.1.0", {"kafka.max_offsets_per_trigger": 500}, True, "", "bob")["new"]


@pytest.mark.parametrize(
    ("version", "overrides", "message"),
    [
        ("2.1.0", {"kafka.max_offsets_per_trigger": "lots"}, "max_offsets_per_trigger"),
        ("2.1.0", {"no_such_field": 1}, "no_such_field"),
        ("2.1.0", {"kafka.revenue_topic": "mine"}, "revenue_topic"),
        ("2.1.0 && reboot", {}, "version"),
    ],
)
def test_a_bad_release_is_refused_before_anything_is_recorded(
    registry: DeploymentRegistry, version: str, overrides: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        publish(registry, version, overrides, True, "", "alice")
    assert registry.releases() == []


def test_make_release_reads_its_variables_from_the_environment() -> None:
    conf = conf_from_env(
        {"VERSION": "2.1.0", "CONFIG": '{"shuffle_partitions": 4}', "REQUIRE_APPROVAL": "false"}
    )
    assert conf == {
        "version": "2.1.0",
        "config_overrides": {"shuffle_partitions": 4},
        "require_approval": False,
        "notes": "",
    }
    assert conf_from_env({"VERSION": "2.1.0"})["require_approval"] is True
    with pytest.raises(ConfigError, match="CONFIG is not JSON"):
        conf_from_env({"VERSION": "2.1.0", "CONFIG": "{shuffle_partitions: 4}"})
    with pytest.raises(ConfigError, match="version"):
        conf_from_env({})
