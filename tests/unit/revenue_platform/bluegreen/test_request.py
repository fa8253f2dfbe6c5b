"""The blue_green_replay request model: the form's only statement of defaults, bounds and checks."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from revenue_platform.airflow.params import params_from_model
from revenue_platform.bluegreen.request import ReplayRequest
from revenue_platform.errors import ConfigError


def test_request_defaults_and_validation() -> None:
    request = ReplayRequest.from_params({"green_deployment_id": "green"})
    # A switch waits for a person unless the request says otherwise.
    assert (request.max_offsets_behind, request.revenue_tolerance, request.require_approval) == (
        0,
        Decimal("0.00"),
        True,
    )
    assert (request.catch_up_timeout_s, request.mode, request.trigger) == (900.0, "promote", "manual")
    assert ReplayRequest.from_params(request.to_dict()) == request


def test_empty_means_the_default_where_the_form_says_so() -> None:
    request = ReplayRequest.from_params(
        {
            "green_deployment_id": "green",
            "blue_deployment_id": "",
            "mode": None,
            "config_overrides": None,
            "quality_thresholds": "",
        }
    )
    assert (request.blue_deployment_id, request.mode, request.config_overrides) == (None, "promote", {})
    # Whole numbers are amounts too; the XCom carries the amount as text.
    amount = ReplayRequest.from_params({"green_deployment_id": "green", "revenue_tolerance": 5})
    assert amount.to_dict()["revenue_tolerance"] == "5"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"replay_source": "s3"}, "replay_source"),
        ({"revenue_tolerance": "abc"}, "revenue_tolerance: 'abc' must be a non-negative amount"),
        ({"revenue_tolerance": "-1"}, "revenue_tolerance"),
        ({"revenue_tolerance": 0.5}, "revenue_tolerance"),
        ({"max_offsets_behind": -1}, r"max_offsets_behind: .* greater than or equal to 0 \(got -1\)"),
        ({"max_offsets_behind": 1.5}, "max_offsets_behind: .*integer"),
        ({"count_tolerance": True}, "count_tolerance"),
        ({"catch_up_timeout_s": -5}, "catch_up_timeout_s"),
        ({"poll_interval_s": float("nan")}, "poll_interval_s: .*finite"),
        ({"grace_period_s": "5"}, "grace_period_s"),
        ({"blue_deployment_id": "green"}, "green_deployment_id 'green' must differ from the blue"),
        ({"green_deployment_id": ""}, r"green_deployment_id: required \(a NEW deployment id"),
        ({"green_deployment_id": "Green"}, "green_deployment_id: deployment_id 'Green' must start with"),
        ({"version": "x\n"}, "version"),
        ({"config_overrides": ["x"]}, "config_overrides"),
        ({"config_overrides": {f"k{i}": 1 for i in range(101)}}, "config_overrides: .*at most 100"),
        ({"quality_thresholds": {"watermark": "100000 days"}}, "quality_thresholds: .*window geometry"),
        ({"require_approval": "true"}, "require_approval: .*boolean"),
        ({"mode": "yolo"}, "mode"),
        ({"trigger": "cron"}, "trigger"),
    ],
)
def test_bad_requests_name_the_field(params: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ReplayRequest.from_params({"green_deployment_id": "green", **params})


def test_the_forms_params_are_the_models_fields() -> None:
    params = params_from_model(ReplayRequest)

    assert set(params) == set(ReplayRequest.model_fields) - {"trigger"}  # derived from the run, never asked
    assert params["max_offsets_behind"].schema == {"type": "integer", "minimum": 0, "maximum": 1_000_000_000}
    assert params["max_offsets_behind"].description == "Lag that counts as caught up. 0..1,000,000,000."
    assert params["blue_deployment_id"].schema["type"] == ["null", "string"]
    assert params["mode"].schema == {"type": "string", "enum": ["promote", "reproduce"]}
    assert params["config_overrides"].schema == {"type": "object", "maxProperties": 100}
    assert params["revenue_tolerance"].value == "0.00"
    assert "title" not in params["version"].schema  # the form labels a field with its name, as the docs do
    assert params["green_deployment_id"].schema["type"] == ["null", "string"]
    defaults = {name: param.value for name, param in params.items()}
    # The form's empty green id is named for the run (triggers.effective_params), then checked here.
    named = "green-dev-20261122093005"
    request = ReplayRequest.from_params({**defaults, "green_deployment_id": named})
    model_defaults = {
        name: field.get_default(call_default_factory=True)
        for name, field in ReplayRequest.model_fields.items()
    }
    assert request.model_dump() == {**model_defaults, "green_deployment_id": named}


def _documented_defaults() -> dict[str, str]:
    """`param -> default` of the trigger-form table in docs/blue-green.md, as written there."""
    doc = Path(__file__).resolve().parents[4] / "docs" / "blue-green.md"
    table = doc.read_text().split("## Trigger form (`blue_green_replay`)", 1)[1].split("\n\n", 2)[1]
    documented: dict[str, str] = {}
    for row in table.splitlines()[2:]:
        names, default = (cell.strip() for cell in row.split("|")[1:3])
        for name, value in zip(names.split(" / "), default.split(" / "), strict=True):
            documented[name.strip("`")] = value.strip("`").strip('"')
    return documented


def test_the_docs_state_the_form_s_defaults_as_the_model_does() -> None:
    """The docs' table of the form is a copy for readers: it must say what ReplayRequest says."""

    def written(value: Any) -> str:
        if value is None:
            return "empty"
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, dict):
            return "{}" if not value else str(value)
        return str(value)

    form_fields = {name for name in ReplayRequest.model_fields if name != "trigger"}
    documented = _documented_defaults()
    assert set(documented) == form_fields
    assert {
        name: written(ReplayRequest.model_fields[name].get_default(call_default_factory=True))
        for name in form_fields
    } == documented
