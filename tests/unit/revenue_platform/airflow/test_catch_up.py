"""The catch-up gate around Airflow 3.3's resume-after-defer race: no deferral when green has
already caught up, and a trigger that never fires within its settle time of the deferral.

Green's state is the one thing stubbed (what its progress files would say); the registry is a real
Delta table in a temp lake.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.exceptions import TaskDeferred

from revenue_platform.airflow import catch_up
from revenue_platform.airflow.catch_up import RESUME_SETTLE_S, CatchUpTrigger, WaitForCatchUpOperator
from revenue_platform.bluegreen.logic import CatchUp
from revenue_platform.registry import DeploymentRecord, DeploymentRegistry

CAUGHT_UP = CatchUp(offsets_behind=0, processed_rows_per_second=220.0, caught_up=True, eta_s=0.0)
BEHIND = CatchUp(offsets_behind=5_000, processed_rows_per_second=220.0, caught_up=False, eta_s=22.7)
REQUEST = {
    "green_deployment_id": "green",
    "max_offsets_behind": 0,
    "catch_up_timeout_s": 900,
    "poll_interval_s": 0.05,
}
CONTEXT = {
    "dag_run": SimpleNamespace(triggering_user_name="ann"),
    "dag": SimpleNamespace(dag_id="replay"),
    "run_id": "r1",
}


@pytest.fixture
def lake_root(tmp_path: Path) -> str:
    root = str(tmp_path / "lake")
    DeploymentRegistry(root).register(DeploymentRecord("green", desired_state="running"), "tester")
    return root


def _states(monkeypatch: pytest.MonkeyPatch, *states: CatchUp) -> list[float]:
    """Green reports `states` in turn (the last one from then on); returns when each was read."""
    reads: list[float] = []

    def observe(lake_root: str, deployment_id: str, max_offsets_behind: int) -> CatchUp:
        reads.append(time.monotonic())
        return states[min(len(reads), len(states)) - 1]

    monkeypatch.setattr(catch_up, "observe_catch_up", observe)
    return reads


def _operator(lake_root: str) -> WaitForCatchUpOperator:
    return WaitForCatchUpOperator(task_id="wait_for_catch_up", request=REQUEST, lake_root=lake_root)


def test_a_green_caught_up_when_the_task_starts_is_recorded_without_a_deferral(
    monkeypatch: pytest.MonkeyPatch, lake_root: str
) -> None:
    _states(monkeypatch, CAUGHT_UP)

    details = _operator(lake_root).execute(CONTEXT)

    assert details == {"offsets_behind": 0, "seconds": 0.0}
    events = [e for e in DeploymentRegistry(lake_root).events("green") if e.kind == "replay_caught_up"]
    assert [(e.reason, e.actor) for e in events] == [("caught up", "airflow:replay/r1 (user ann)")]


def test_a_green_still_behind_defers_to_a_trigger_that_settles_before_it_fires(
    monkeypatch: pytest.MonkeyPatch, lake_root: str
) -> None:
    _states(monkeypatch, BEHIND)

    with pytest.raises(TaskDeferred) as deferred:
        _operator(lake_root).execute(CONTEXT)

    trigger = deferred.value.trigger
    assert isinstance(trigger, CatchUpTrigger)
    assert deferred.value.method_name == "execute_complete"
    assert trigger.serialize()[1]["settle_s"] == RESUME_SETTLE_S >= 15
    assert DeploymentRegistry(lake_root).events("green")[-1].kind != "replay_caught_up"


async def _first_event(trigger: CatchUpTrigger) -> tuple[dict[str, Any], float]:
    started = time.monotonic()
    async for event in trigger.run():
        return event.payload, time.monotonic() - started
    raise AssertionError("the trigger ended without an event")


def _trigger(
    lake_root: str, settle_s: float, deadline_in_s: float = 60, poll_interval_s: float = 0.05
) -> CatchUpTrigger:
    deadline = (datetime.now(UTC) + timedelta(seconds=deadline_in_s)).isoformat()
    return CatchUpTrigger(lake_root, "green", 0, deadline, poll_interval_s=poll_interval_s, settle_s=settle_s)


def test_a_trigger_whose_green_catches_up_at_once_fires_only_after_the_settle_time(
    monkeypatch: pytest.MonkeyPatch, lake_root: str
) -> None:
    reads = _states(monkeypatch, CAUGHT_UP)

    payload, took_s = asyncio.run(_first_event(_trigger(lake_root, settle_s=0.6)))

    assert payload["caught_up"] is True
    assert payload["offsets_behind"] == 0
    assert len(reads) == 1, "caught up at the first poll"
    assert took_s >= 0.6


def test_a_trigger_past_its_settle_time_fires_at_the_poll_that_sees_green_caught_up(
    monkeypatch: pytest.MonkeyPatch, lake_root: str
) -> None:
    reads = _states(monkeypatch, BEHIND, BEHIND, BEHIND, BEHIND, CAUGHT_UP)

    trigger = _trigger(lake_root, settle_s=0.5, poll_interval_s=0.2)
    payload, took_s = asyncio.run(_first_event(trigger))

    assert payload["caught_up"] is True
    assert len(reads) == 5
    assert reads[-1] - reads[0] >= 0.5, "the fifth poll comes after the settle time"
    # No settle wait added then: the event follows the fifth read (a wait would add 0.5 s).
    assert took_s - (reads[-1] - reads[0]) < 0.4


def test_a_trigger_past_its_deadline_fires_not_caught_up(
    monkeypatch: pytest.MonkeyPatch, lake_root: str
) -> None:
    _states(monkeypatch, BEHIND)

    payload, _ = asyncio.run(_first_event(_trigger(lake_root, settle_s=0.0, deadline_in_s=0.2)))

    assert payload["caught_up"] is False
    assert payload["offsets_behind"] == 5_000
