"""How many deployments may be meant to run at once in one lake (issue 56, item 5)."""

from __future__ import annotations

from pathlib import Path

import pytest


def test_a_deployment_beyond_the_running_cap_is_refused_before_anything_is_registered(tmp_path: Path) -> None:
    """A 50th deployment with a 2 GiB driver was accepted: one more supervised driver on the host that
    also runs the broker and Airflow."""
    from revenue_platform.errors import ConfigError
    from revenue_platform.registry import DeploymentRecord, DeploymentRegistry
    from revenue_platform.streaming.deploy import (
        MAX_RUNNING_DEPLOYMENTS,
        DeployRequest,
        deploy,
        refuse_over_running_cap,
    )
    from revenue_platform.streaming.launcher import SparkTarget

    registry = DeploymentRegistry(str(tmp_path / "lake"))
    for number in range(MAX_RUNNING_DEPLOYMENTS):
        registry.register(DeploymentRecord(f"d{number}", desired_state="running"), "tester")
    registry.register(DeploymentRecord("retired", desired_state="stopped"), "tester")

    with pytest.raises(ConfigError, match=f"at most {MAX_RUNNING_DEPLOYMENTS} run at once"):
        deploy(DeployRequest("ninth"), SparkTarget("local[1]"), registry, "tester", progress=lambda _: None)
    assert registry.find("ninth") is None
    # One already meant to run is no more: its redeploy, and a stopped one's, are not counted twice.
    refuse_over_running_cap(registry, "d0")
    with pytest.raises(ConfigError, match="'retired' would be deployment 9"):
        refuse_over_running_cap(registry, "retired")
    registry.update("d0", {"desired_state": "stopped"}, "tester")
    refuse_over_running_cap(registry, "retired")
