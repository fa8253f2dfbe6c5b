"""How a replay run was started and whether it may start: kinds, derived requests, overlap reasons."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest

from revenue_platform.airflow.params import params_from_model
from revenue_platform.bluegreen.request import ReplayRequest
from revenue_platform.bluegreen.triggers import (
    AWAITING_APPROVAL,
    ReleaseEvent,
    choose_next_step,
    chosen_release,
    derived_green_id,
    effective_params,
    overlap_skip_reason,
    periodic_mode,
    replays_in_flight,
    trigger_kind,
    validate_release_overrides,
    validate_version,
)
from revenue_platform.errors import ConfigError
from spark_apps.contract.naming import validate_deployment_id

T0 = datetime(2026, 11, 22, 9, 30, 5)
FORM = {"green_deployment_id": "green", "blue_deployment_id": None, "version": "dev", "config_overrides": {}}
RELEASE_ROW = {"version": "2.1.0", "config_overrides": {"shuffle_partitions": 4}, "require_approval": True}


@pytest.mark.parametrize(
    ("run_type", "events", "kind"),
    [
        ("manual", 0, "manual"),
        ("operator_triggered", 0, "manual"),
        ("scheduled", 0, "periodic"),
        ("asset_triggered", 1, "release"),
    ],
)
def test_the_trigger_kind_comes_from_the_run(run_type: str, events: int, kind: str) -> None:
    assert trigger_kind(run_type, events) == kind


@pytest.mark.parametrize(("run_type", "events"), [("asset_triggered", 0), ("backfill", 0)])
def test_runs_that_say_nothing_replayable_are_refused(run_type: str, events: int) -> None:
    with pytest.raises(ConfigError, match=r"publish_app_version|REPLAY_SCHEDULE"):
        trigger_kind(run_type, events)


@pytest.mark.parametrize("version", ["2.1.0", "v3", "1.0.0-rc.1+build.5"])
def test_version_labels_that_are_accepted(version: str) -> None:
    assert validate_version(version) == version


@pytest.mark.parametrize("version", ["", None, "-1", "2.1.0; rm -rf /", "a" * 64, "1.0 beta"])
def test_version_labels_that_are_refused(version: Any) -> None:
    with pytest.raises(ConfigError, match="version"):
        validate_version(version)


@pytest.mark.parametrize(
    "overrides", [{"kafka.revenue_topic": "x"}, {"deployment_id": "x"}, {"history.bronze_table": "x"}, []]
)
def test_a_release_config_holds_only_app_config(overrides: Any) -> None:
    with pytest.raises(ConfigError, match="config_overrides"):
        validate_release_overrides(overrides)
    assert validate_release_overrides({"shuffle_partitions": 4}) == {"shuffle_partitions": 4}


def test_the_newest_release_event_wins_and_older_ones_are_superseded() -> None:
    old = ReleaseEvent.from_extra({"version": "2.0.0", "config_hash": "a"}, T0)
    new = ReleaseEvent.from_extra({"version": "2.1.0"}, T0 + timedelta(minutes=1))

    assert chosen_release([new, old]) == (new, [old])
    assert new.config_hash is None
    with pytest.raises(ConfigError, match="names no version"):
        ReleaseEvent.from_extra({"deployment_id": "blue"}, T0)
    with pytest.raises(ConfigError, match="version"):
        ReleaseEvent.from_extra({"version": "$(reboot)"}, T0)


def test_periodic_mode_follows_the_setting() -> None:
    assert (periodic_mode(None), periodic_mode("record"), periodic_mode(" Switch ")) == (
        "reproduce",
        "reproduce",
        "promote",
    )
    with pytest.raises(ConfigError, match="REPLAY_SCHEDULE_ACTION"):
        periodic_mode("delete")


def test_derived_green_ids_are_fresh_valid_deployment_ids() -> None:
    assert derived_green_id("release", "2.1.0", T0) == "green-2-1-0-20261122093005"
    assert derived_green_id("periodic", "2.1.0", T0) == "repro-20261122093005"
    long = derived_green_id("release", "V" * 63, T0)
    assert len(long) <= 63
    assert validate_deployment_id(long) == long
    assert derived_green_id("manual", "2.1.0", T0) == "green-2-1-0-20261122093005"
    with pytest.raises(ConfigError, match="unknown trigger kind"):
        derived_green_id("cron", "2.1.0", T0)


def test_every_manual_run_from_the_form_s_defaults_gets_a_fresh_green_id() -> None:
    """The form's default green id was `green`: the first replay from the defaults registered it, and
    every later one was refused at validation ("already registered")."""
    defaults = {name: param.value for name, param in params_from_model(ReplayRequest).items()}
    first = ReplayRequest.from_params(effective_params("manual", defaults, T0))
    second = ReplayRequest.from_params(effective_params("manual", defaults, T0 + timedelta(minutes=20)))
    assert (first.green, second.green) == ("green-dev-20261122093005", "green-dev-20261122095005")
    # An id cleared in the form or sent as null by a REST call is derived too, with the run's version.
    cleared = effective_params("manual", {**FORM, "green_deployment_id": "", "version": "2.1.0"}, T0)
    assert cleared["green_deployment_id"] == "green-2-1-0-20261122093005"
    assert effective_params("manual", {**FORM, "green_deployment_id": None}, T0)["green_deployment_id"]


def test_a_manual_run_is_its_form() -> None:
    params = effective_params("manual", {**FORM, "mode": "reproduce"}, T0)
    assert params == {**FORM, "trigger": "manual", "mode": "reproduce"}
    assert effective_params("manual", FORM, T0)["mode"] == "promote"


def test_a_release_run_takes_version_config_and_approval_from_the_release_record() -> None:
    # The form's defaults (version "dev", approval off, a fixed green id) must not leak into it.
    params = effective_params("release", {**FORM, "require_approval": False}, T0, release=RELEASE_ROW)

    request = ReplayRequest.from_params(params)
    assert (request.trigger, request.mode, request.version) == ("release", "promote", "2.1.0")
    assert request.config_overrides == {"shuffle_partitions": 4}
    assert request.require_approval is True
    assert request.green_deployment_id == "green-2-1-0-20261122093005"
    assert request.blue_deployment_id is None
    with pytest.raises(ConfigError, match="release record"):
        effective_params("release", FORM, T0)


def test_a_periodic_run_replays_the_live_version_unchanged() -> None:
    params = effective_params(
        "periodic", {**FORM, "config_overrides": {"x": 1}}, T0, live_version="1.4.0", periodic_action=None
    )

    request = ReplayRequest.from_params(params)
    assert (request.trigger, request.mode, request.version) == ("periodic", "reproduce", "1.4.0")
    assert request.config_overrides == {}
    assert request.green_deployment_id == "repro-20261122093005"
    switching = effective_params("periodic", FORM, T0, live_version="1.4.0", periodic_action="switch")
    assert switching["mode"] == "promote"
    with pytest.raises(ConfigError, match="none is live"):
        effective_params("periodic", FORM, T0)


def test_the_request_refuses_unknown_modes_and_kinds() -> None:
    with pytest.raises(ConfigError, match="mode"):
        ReplayRequest.from_params({**FORM, "mode": "yolo"})
    with pytest.raises(ConfigError, match="trigger"):
        ReplayRequest.from_params({**FORM, "trigger": "cron"})


@pytest.mark.parametrize(
    ("mode", "approval", "step"),
    [
        ("reproduce", True, "record_reproduced"),
        ("reproduce", False, "record_reproduced"),
        ("promote", True, "request_approval"),
        ("promote", False, "no_approval_required"),
    ],
)
def test_the_step_after_the_gates(mode: str, approval: bool, step: str) -> None:
    assert choose_next_step(mode, approval) == step


@dataclass
class Event:
    deployment_id: str
    kind: str
    at: datetime
    actor: str = "airflow:blue_green_replay/run-1"
    details: dict[str, Any] = field(default_factory=dict)


def replay(green: str, *kinds: str) -> list[Event]:
    return [
        Event(green, kind, T0 + timedelta(seconds=i)) for i, kind in enumerate(("replay_started", *kinds))
    ]


def test_a_replay_is_in_flight_until_it_ends_or_its_green_is_stopped() -> None:
    events = [
        Event("blue", "registered", T0),
        *replay("green-a", "replay_caught_up", "replay_promoted"),
        *replay("green-b", "replay_gate_failed", "replay_aborted"),
        *replay("repro-c", "replay_diff_passed", "replay_reproduced"),
        *replay(
            "green-d", "replay_caught_up", "replay_quality_passed", "replay_diff_passed", AWAITING_APPROVAL
        ),
        *replay("green-e", "replay_caught_up"),
        *replay("green-stopped-by-hand", "replay_caught_up"),
    ]

    found = replays_in_flight(events, running={"blue", "green-a", "green-d", "green-e"})

    assert [(r.green, r.awaiting_approval) for r in found] == [("green-d", True), ("green-e", False)]
    assert found[1].last_step == "replay_caught_up"
    assert "waiting for approval" in found[0].describe()


def test_the_skip_reason_names_what_is_in_the_way() -> None:
    [waiting] = replays_in_flight(replay("green-d", AWAITING_APPROVAL), running={"green-d"})

    assert overlap_skip_reason(0, 0, []) is None
    reason = overlap_skip_reason(1, 1, [waiting])
    assert reason is not None
    assert "1 other blue_green_replay run(s) are waiting for approval" in reason
    assert "replay of green-d" in reason
    assert "stop_streaming_app" in reason
    assert "are running" in (overlap_skip_reason(2, 0, []) or "")
    # The registry alone (a replay another Airflow, or a run that died, left behind) also blocks.
    assert "replay of green-d" in (overlap_skip_reason(0, 0, [waiting]) or "")
