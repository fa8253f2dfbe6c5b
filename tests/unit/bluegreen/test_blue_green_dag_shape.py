"""The shape of blue_green_replay: setup/teardown pairing, the watcher, the approval branch."""

from __future__ import annotations

from typing import Any

import pytest

from tests.streaming_helpers import load_dags


@pytest.fixture(scope="module")
def dag() -> Any:
    return load_dags("blue_green_replay")["blue_green_replay"]


def test_green_is_deployed_as_setup_and_cleaned_up_by_a_teardown(dag: Any) -> None:
    setup, teardown = dag.get_task("deploy_green"), dag.get_task("abort_green")
    assert setup.is_setup
    assert teardown.is_teardown
    assert "deploy_green" in teardown.upstream_task_ids
    # The teardown runs after the last body step, whatever its outcome.
    assert "retire_blue" in teardown.upstream_task_ids


def test_a_watcher_fails_the_run_when_any_task_failed(dag: Any) -> None:
    watcher = dag.get_task("fail_if_any_failed")
    assert watcher.trigger_rule == "one_failed"
    assert {"wait_for_catch_up", "check_quality", "diff_against_blue", "switch_live", "abort_green"} <= set(
        watcher.upstream_task_ids
    )
    assert watcher.downstream_task_ids == set()


def test_switch_live_follows_every_gate_and_either_approval_path(dag: Any) -> None:
    switch = dag.get_task("switch_live")
    assert {"request_approval", "no_approval_required", "wait_for_catch_up", "check_quality"} <= set(
        switch.upstream_task_ids
    )
    assert switch.trigger_rule == "none_failed_min_one_success"
    assert dag.get_task("request_approval").fail_on_reject
    assert dag.get_task("validate_request").downstream_task_ids >= {"deploy_green"}
