"""What a trigger may ask for: conf keys, config bounds, lake roots and store ids (pure logic).

Each refusal is a ConfigError (or the app's AppConfigError) naming the field, raised by the
same functions the DAGs' first tasks call, before anything is registered or launched.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from revenue_platform.airflow.trigger_conf import check_conf_keys
from revenue_platform.errors import ConfigError
from revenue_platform.paths import require_inside_lake
from revenue_platform.reprocessing import ReprocessRequest, plan_reprocessing
from revenue_platform.streaming.deploy import resolve_config
from revenue_platform.streaming.request import DeployRequest
from spark_apps.contract.config import AppConfigError, load_config
from spark_apps.contract.naming import validate_location_id
from tests.registry_helpers import register_deployment

DEPLOY_PARAMS = (
    "deployment_id",
    "colour",
    "version",
    "config_overrides",
    "starting_offsets",
    "start_timeout_s",
)
HOSTILE_STORE = "x\\') OR true --"


# --- unknown conf keys ---------------------------------------------------------------------------
def test_a_misspelled_key_is_refused_naming_it_and_the_declared_one() -> None:
    with pytest.raises(
        ConfigError, match=r"unknown conf key\(s\) 'deploymnet_id' \(did you mean 'deployment_id'\?\)"
    ):
        check_conf_keys({"deploymnet_id": "green"}, DEPLOY_PARAMS, "deploy_streaming_app")


def test_every_unknown_key_is_named_and_declared_keys_pass() -> None:
    with pytest.raises(ConfigError, match=r"'a_thing'.*'zzz'"):
        check_conf_keys({"zzz": 1, "a_thing": 2, "version": "1"}, DEPLOY_PARAMS, "deploy_streaming_app")
    check_conf_keys({"deployment_id": "green", "version": "1"}, DEPLOY_PARAMS, "deploy_streaming_app")
    check_conf_keys({}, DEPLOY_PARAMS, "deploy_streaming_app")
    check_conf_keys(None, DEPLOY_PARAMS, "deploy_streaming_app")


# --- the app's typed config: one rule for the app, the DAGs and the tests -------------------------
@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"window.size": "99999999999 days"}, "window.size"),
        ({"window.size": "2 days"}, "window.size"),
        ({"window.size": "0 seconds"}, "window.size"),
        ({"window.watermark": "8 days"}, "window.watermark"),
        ({"trigger.interval": "-1 seconds"}, "trigger.interval"),
        ({"trigger.interval": "2 hours"}, "trigger.interval"),
        ({"kafka.orders_topic": "../x"}, "kafka.orders_topic"),
        ({"kafka.orders_topic": ".."}, "kafka.orders_topic"),
        ({"kafka.dlq_topic": "a b"}, "kafka.dlq_topic"),
        ({"kafka.revenue_topic": ""}, "kafka.revenue_topic"),
        ({"kafka.revenue_topic": "r" * 245}, "kafka.revenue_topic"),
        ({"lake_root": ""}, "lake_root"),
    ],
)
def test_the_app_config_refuses_unbounded_values_naming_the_field(
    overrides: dict[str, Any], field: str
) -> None:
    with pytest.raises(AppConfigError, match=field.replace(".", r"\.")):
        load_config(overrides=overrides)


def test_the_app_config_accepts_the_bounds_themselves() -> None:
    config = load_config(
        overrides={
            "window.size": "1 day",
            "window.watermark": "1 day",
            "trigger.interval": "1 second",
            "kafka.orders_topic": "orders.v2-eu_1",
            "lake_root": "s3a://bucket/lake",
        }
    )
    assert (config.window.size, config.trigger.interval, config.lake_root) == (
        "1 day",
        "1 second",
        "s3a://bucket/lake",
    )


# --- deploy / blue-green: resolve_config is what validate_request runs ---------------------------
@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"lake_root": "/"}, "lake_root"),
        ({"lake_root": "../../../tmp/evil"}, "lake_root"),
        ({"lake_root": "/lake/../tmp/evil"}, "lake_root"),
        ({"lake_root": "s3a://other/lake"}, "lake_root"),
        ({"history": {"bronze_table": "/elsewhere/bronze", "kafka_offsets": {0: 5}}}, "bronze_table"),
        ({"window.size": "99999999999 days"}, "window.size"),
        ({"kafka.orders_topic": "../x"}, "kafka.orders_topic"),
        ({"kafka.revenue_topic": ""}, "kafka.revenue_topic"),
        ({"trigger.interval": "-1 seconds"}, "trigger.interval"),
    ],
)
def test_deploy_validation_refuses_the_issues_values(overrides: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        resolve_config(DeployRequest("green", config_overrides=overrides), "/lake")


def test_a_lake_root_inside_the_registry_lake_is_allowed() -> None:
    config = resolve_config(DeployRequest("green", config_overrides={"lake_root": "/lake/sub"}), "/lake")
    assert config.lake_root == "/lake/sub"


@pytest.mark.parametrize(
    ("root", "lake", "allowed"),
    [
        ("/lake", "/lake", True),
        ("/lake/a/b", "/lake", True),
        ("/", "/lake", False),
        ("/lakeside", "/lake", False),
        ("lake/a", "/lake", False),
        ("", "/lake", False),
        ("s3a://b/lake/x", "s3a://b/lake", True),
        ("s3a://b/lake/../x", "s3a://b/lake", False),
        ("s3a://b/lakex", "s3a://b/lake", False),
        ("abfss://b/lake", "s3a://b/lake", False),
        ("/lake", "s3a://b/lake", False),
    ],
)
def test_require_inside_lake(root: str, lake: str, allowed: bool) -> None:
    if allowed:
        assert require_inside_lake(root, lake, "lake_root") == root
    else:
        with pytest.raises(ConfigError, match="lake_root"):
            require_inside_lake(root, lake, "lake_root")


def test_a_symlink_out_of_the_lake_is_refused(tmp_path: Path) -> None:
    lake, outside = tmp_path / "lake", tmp_path / "outside"
    lake.mkdir()
    outside.mkdir()
    (lake / "escape").symlink_to(outside)
    with pytest.raises(ConfigError, match="lake_root"):
        require_inside_lake(str(lake / "escape"), str(lake), "lake_root")


# --- reprocess: plan_reprocessing is the DAG's first task ----------------------------------------
@pytest.mark.parametrize("store", [HOSTILE_STORE, "store 1", "a,b", "", "-x", "ü"])
def test_a_store_id_outside_the_pattern_is_refused(store: str) -> None:
    with pytest.raises(ValueError, match="store id"):
        validate_location_id(store)
    with pytest.raises(ConfigError, match=r"^stores\.1: store id"):
        ReprocessRequest.from_params({"stores": ["store_1", store]})


def test_store_ids_of_the_generator_pass() -> None:
    assert ReprocessRequest.from_params({"stores": ["store_1001", "store_1002"]}).stores == [
        "store_1001",
        "store_1002",
    ]
    assert ReprocessRequest.from_params({}).stores == []
    with pytest.raises(ConfigError, match="stores: Input should be a valid list"):
        ReprocessRequest.from_params({"stores": "store_1"})


def _register(lake: Path, deployment_id: str = "blue", **overrides: Any) -> None:
    register_deployment(lake, deployment_id=deployment_id, **overrides)


def _plan(lake: Path, **params: Any) -> dict[str, Any]:
    base = {
        "range_start": "2026-11-22T09:00:00Z",
        "range_end": "2026-11-22T09:01:00Z",
        "deployment_id": "blue",
        "lake_root": str(lake),
    }
    start, end = datetime(2026, 11, 22, 9, tzinfo=UTC), datetime(2026, 11, 22, 10, tzinfo=UTC)
    return plan_reprocessing({**base, **params}, start, end, None)


def test_reprocess_planning_on_a_fresh_stack_names_no_made_up_deployment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from revenue_platform.errors import NoLiveDeploymentYet

    monkeypatch.setenv("PLATFORM_LAKE_ROOT", str(tmp_path / "lake"))
    # The hourly run: no deployment in the form and none live. The DAG turns this into a skip.
    with pytest.raises(NoLiveDeploymentYet, match=r"no deployment is live yet.*deployment_id"):
        _plan(tmp_path / "lake", deployment_id=None)
    _register(tmp_path / "lake", "green")
    start, end = datetime(2026, 11, 22, 9, tzinfo=UTC), datetime(2026, 11, 22, 10, tzinfo=UTC)
    params = {"deployment_id": None, "lake_root": str(tmp_path / "lake")}
    assert plan_reprocessing(params, start, end, "green")["deployment_id"] == "green"


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"stores": ["store_1", HOSTILE_STORE]}, "stores"),
        ({"lake_root": "/"}, "lake_root"),
        ({"lake_root": "../../../tmp/evil"}, "lake_root"),
        ({"deployment_id": "../blue"}, "deployment_id"),
        ({"deployment_id": "never-deployed"}, "deployment_id: 'never-deployed' is not registered"),
        ({"range_end": "2026-11-24T09:00:00Z"}, r"more than the 1 day, 0:00:00 one run"),
        ({"range_start": "2026-11-22T09:00:15Z"}, r"range_start \S+ is not aligned to the 1 minute windows"),
    ],
)
def test_reprocess_planning_refuses_bad_forms_naming_the_field(
    params: dict[str, Any], field: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLATFORM_LAKE_ROOT", str(tmp_path / "lake"))
    # Registered with a window the YAML does not have: the plan must check the registered one.
    _register(tmp_path / "lake", **{"window.size": "1 minute", "window.slide": None})
    with pytest.raises(ConfigError, match=field):
        _plan(tmp_path / "lake", **params)


def test_reprocess_runs_with_the_registered_config_not_the_yaml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    lake = tmp_path / "lake"
    monkeypatch.setenv("PLATFORM_LAKE_ROOT", str(lake))
    _register(lake, **{"window.size": "1 minute", "window.slide": None, "kafka.revenue_topic": "rev_blue"})
    plan = _plan(lake)
    args = plan["spark_args"]
    assert "--set" not in args, "nothing of the config goes on the command line"
    job_config = load_config(args[args.index("--config") + 1])
    assert job_config.window.size == "1 minute"
    assert job_config.kafka.revenue_topic == "rev_blue"
    assert job_config.deployment_id == "blue"
    stored = json.loads(Path(args[args.index("--config") + 1]).read_text())
    from revenue_platform.registry import DeploymentRegistry

    assert stored == DeploymentRegistry(str(lake)).get("blue").config


def test_reprocess_planning_passes_valid_stores_to_the_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLATFORM_LAKE_ROOT", str(tmp_path / "lake"))
    _register(tmp_path / "lake")
    plan = _plan(tmp_path / "lake", stores=["store_1", "store_2"])
    args = plan["spark_args"]
    assert args[args.index("--stores") + 1] == "store_1,store_2"
    assert plan["report_path"].startswith(str(tmp_path / "lake"))


def test_a_deploy_request_survives_the_xcom_round_trip() -> None:
    form = {
        "deployment_id": "green",
        "colour": None,
        "version": "2.1.0",
        "config_overrides": {"window.size": "1 minute"},
        "starting_offsets": 1700000000000,
        "start_timeout_s": 60,
    }
    request = DeployRequest.from_params(form)
    assert (request.app_version, request.starting_offsets, request.start_timeout_s) == (
        "2.1.0",
        "1700000000000",
        60.0,
    )
    assert DeployRequest(**request.to_dict()) == request
