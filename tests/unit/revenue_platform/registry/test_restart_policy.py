"""The supervisor's verdicts and back-off, from records and observations alone (no processes)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from revenue_platform.registry import DeploymentRecord
from revenue_platform.streaming.launcher import DriverObservation
from revenue_platform.streaming.supervisor import RestartPolicy, backoff_s, judge, recent_restarts

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
POLICY = RestartPolicy(
    max_restarts=3, window_s=600, backoff_base_s=30, backoff_max_s=100, heartbeat_stale_s=60
)
DEAD = DriverObservation(process_alive=False, heartbeat_age_s=None, status=None)


def record(restarts_ago_s: tuple[float, ...] = (), **fields: object) -> DeploymentRecord:
    history = [
        {"at": (NOW - timedelta(seconds=s)).isoformat(), "outcome": "launched"} for s in restarts_ago_s
    ]
    return DeploymentRecord(
        "blue",
        desired_state="running",
        observed_state=str(fields.pop("observed_state", "running")),
        restart_history_json=json.dumps(sorted(history, key=lambda e: e["at"])),
        lease_token="1-abc",
        **fields,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(("recent", "expected"), [(0, 0), (1, 30), (2, 60), (3, 100), (9, 100)])
def test_backoff_doubles_and_is_capped(recent: int, expected: float) -> None:
    assert backoff_s(recent, POLICY) == expected


def test_only_restarts_within_the_window_count() -> None:
    history = record(
        (
            900,
            500,
            10,
        )
    ).restart_history
    assert len(recent_restarts(history, NOW, 600)) == 2


def test_a_live_process_with_a_fresh_heartbeat_is_healthy() -> None:
    observation = DriverObservation(process_alive=True, heartbeat_age_s=4, status={})
    assert judge(record(), observation, NOW, POLICY).action == "healthy"


def test_a_live_but_silent_driver_is_restarted() -> None:
    observation = DriverObservation(process_alive=True, heartbeat_age_s=300, status={})
    verdict = judge(record(), observation, NOW, POLICY)
    assert verdict.action == "restart"
    assert "300s old" in verdict.reason


def test_without_process_visibility_the_heartbeat_decides() -> None:
    fresh = DriverObservation(process_alive=None, heartbeat_age_s=10, status={})
    stale = DriverObservation(process_alive=None, heartbeat_age_s=61, status={})
    assert judge(record(), fresh, NOW, POLICY).action == "healthy"
    assert judge(record(), stale, NOW, POLICY).action == "restart"


def test_a_starting_driver_gets_its_start_timeout() -> None:
    starting = record(observed_state="starting", launched_at=NOW - timedelta(seconds=20))
    waiting = DriverObservation(process_alive=True, heartbeat_age_s=None, status=None)
    assert judge(starting, waiting, NOW, POLICY).action == "starting"
    assert judge(starting, DEAD, NOW, POLICY).action == "restart"


def test_a_dead_driver_waits_out_its_backoff_then_restarts() -> None:
    assert judge(record((10,)), DEAD, NOW, POLICY).action == "backoff"
    assert judge(record((31,)), DEAD, NOW, POLICY).action == "restart"
    assert (
        judge(
            record(
                (
                    200,
                    40,
                )
            ),
            DEAD,
            NOW,
            POLICY,
        ).action
        == "backoff"
    )  # 2 recent: 60 s


def test_after_max_restarts_in_the_window_it_gives_up_and_stays_given_up() -> None:
    assert (
        judge(
            record(
                (
                    500,
                    300,
                    200,
                )
            ),
            DEAD,
            NOW,
            POLICY,
        ).action
        == "give_up"
    )
    assert (
        judge(
            record(
                (
                    700,
                    300,
                    200,
                )
            ),
            DEAD,
            NOW,
            POLICY,
        ).action
        == "restart"
    )
    given_up = record(
        (
            500,
            300,
            200,
        )
    )
    given_up.restart_history_json = json.dumps(
        [*given_up.restart_history, {"at": NOW.isoformat(), "outcome": "gave_up"}]
    )
    assert judge(given_up, DEAD, NOW + timedelta(hours=2), POLICY).action == "gave_up"


def test_a_refused_start_is_never_restarted_and_is_no_restart_of_the_budget() -> None:
    # What the deploy path records when the driver exits DRIVER_REFUSED (another Kafka cluster's
    # checkpoints): starting it again unchanged would be refused again.
    history = [
        {"at": (NOW - timedelta(seconds=900)).isoformat(), "outcome": "launched"},
        {"at": (NOW - timedelta(seconds=5)).isoformat(), "reason": "may not start", "outcome": "refused"},
    ]
    refused = record(observed_state="failed")
    refused.restart_history_json = json.dumps(history)
    verdict = judge(refused, DEAD, NOW, POLICY)
    assert verdict.action == "refused"
    assert "redeploy" in verdict.reason
    assert recent_restarts(refused.restart_history, NOW, 3600) == [NOW - timedelta(seconds=900)]


def test_a_crash_after_restarts_is_still_retried_within_the_budget() -> None:
    crashed = record((200,), observed_state="failed")
    assert judge(crashed, DEAD, NOW, POLICY).action == "restart"
