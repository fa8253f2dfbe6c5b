"""Every input surface refuses hostile values, naming the field, before anything is written (issue 29).

Hypothesis throws type confusion, huge and tiny numbers, empty strings, trailing newlines, Unicode,
path traversal, hosts and URLs, shell and SQL metacharacters at every field of every DAG's conf and
at every app config field a form, a release or `--set` reaches. Each case must be refused by the
function the DAG's first task runs (or the app's config loader) with the platform's own error
(ConfigError / AppConfigError) whose message names the field, and nothing may be registered,
launched or written meanwhile. Where a JSON-schema rule can say it, Airflow's Param validation
(the form, the REST API) must refuse the case too; it may never fail any other way.

Fast by design: the validators and `ParamsDict` are called directly, never `dag.test()`.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from revenue_platform.errors import ConfigError
from spark_apps.contract.config import AppConfigError

NOW = datetime(2026, 11, 22, 10, tzinfo=UTC)
BOOTSTRAP = "connection-broker:9092"

# --- hostile values, by what a field expects -------------------------------------------------------
SHELL = ["; rm -rf /", "$(id)", "`id`", "a|b", "x && curl evil.example", "a\\b", "> /etc/passwd"]
SQL = ["' OR '1'='1", "x'); DROP TABLE deployments; --", '" OR ""="', "1; SELECT 1"]
HOSTS = ["evil.example:9092", "http://evil.example/", "PLAINTEXT://evil.example:9092", "//evil.example/x"]
PATHS = ["../../etc/passwd", "/etc", "..", "/", "~/x", "a/../../b"]
UNICODE = ["blüe", "\u0661\u0662\u0663", "blue\u200b", "\u202eeulb", "\uff42\uff4c\uff55\uff45", "🚀"]
CONTROL = ["\x00", "a\x1b[2J", "\r", "a\x7f"]
NUMBERS = [-1, -(10**18), 10**18, 2**63, 2**64, 1e308, float("inf"), float("-inf"), float("nan")]
TYPES: list[Any] = [[], {}, ["a"], {"a": 1}, True, 1.5]
LONG = ["a" * 100_000]
STRINGS = SHELL + SQL + HOSTS + PATHS + UNICODE + CONTROL + LONG


def _with_newline(valid: str) -> list[str]:
    return [valid + "\n", valid + "\r\n", " " + valid, valid + " "]


def identifier(valid: str, *, optional: bool = False) -> st.SearchStrategy[Any]:
    """Values no identifier (deployment id, version, topic, store id) may take."""
    values: list[Any] = [*STRINGS, *_with_newline(valid), *NUMBERS, *TYPES, "A" * 300]
    if not optional:
        values += ["", None]
    return st.sampled_from(values) | st.text(alphabet=st.characters(codec="utf-8"), min_size=1).map(
        lambda text: f"{valid}{text}\n"
    )


def bounded_number(
    minimum: float, maximum: float, *, whole: bool, null_is_default: bool = False
) -> st.SearchStrategy[Any]:
    """Numbers outside [minimum, maximum], non-numbers, and (if `whole`) fractions."""
    outside = st.one_of(
        st.integers(max_value=int(minimum) - 1) if minimum > -(2**62) else st.nothing(),
        st.integers(min_value=int(maximum) + 1),
        st.floats(max_value=minimum, exclude_max=True, allow_nan=False),
        st.floats(min_value=maximum, exclude_min=True),
    )
    values: list[Any] = [*STRINGS, "5", "", float("nan"), float("inf"), [], {}, True, False]
    if not null_is_default:
        values.append(None)
    if whole:
        values.append(minimum + 0.5)
    return outside | st.sampled_from(values)


def choice(options: list[Any], *, empty_is_default: bool = False) -> st.SearchStrategy[Any]:
    """Values outside an enum; `empty_is_default`: the field documents "" and null as its default."""
    values: list[Any] = [*STRINGS, 0, 1, [], {}, *(f"{o}\n" for o in options if isinstance(o, str))]
    if not empty_is_default:
        values += ["", None]
    return st.sampled_from([value for value in values if value not in options])


def interval() -> st.SearchStrategy[Any]:
    """Values no interval threshold ('15 minutes') may take."""
    return st.sampled_from(
        [
            *STRINGS,
            "0 seconds",
            "99999 days",
            "15 minutes\n",
            "\u0661\u0665 minutes",
            "15\tminutes",
            "fifteen",
            "",
            15,
            [],
        ]
    )


def amount() -> st.SearchStrategy[Any]:
    """Values no amount of money ('1000000.00') may take."""
    return st.sampled_from(
        [*STRINGS, "1e400", "NaN", "-1", "0.001", "10.001", "1.00\n", " 1.00", "", 10**20, -1, [], {}, True]
    )


def boolean() -> st.SearchStrategy[Any]:
    return st.sampled_from(["false", "true", "", 0, 1, None, [], {}, "no", *SHELL])


def name_list(item: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(item, min_size=1, max_size=3),
        st.just(["x"] * 101),
        st.sampled_from(["orders", {"a": 1}, 5, True]),
    )


def date_time() -> st.SearchStrategy[Any]:
    return st.sampled_from(
        [
            *STRINGS,
            "0001-01-01T00:00:00+01:00",
            "9999-12-31T23:59:59-01:00",
            "2026-13-01T00:00:00Z",
            "2026-11-22T09:00:00Z\n" + "x",
            "2026-11-22T09:00:00Z" + " " * 100,
            5,
            [],
            {},
        ]
    )


def free_text(maximum: int, *, required: bool = False) -> st.SearchStrategy[Any]:
    """Free text (audit notes and reasons) may hold any printable characters, metacharacters
    included (they are never run or queried); it may not be oversized, typed wrong or carry NUL."""
    values: list[Any] = ["a" * (maximum + 1), "\x00", 5, [], {}, None]
    if required:
        values.append("")
    return st.sampled_from(values)


# --- the surfaces ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Field:
    name: str
    hostile: st.SearchStrategy[Any]
    params_refuse: bool = True
    """Airflow's Param validation (JSON schema) can tell: the form refuses it too."""


@pytest.fixture(scope="module")
def lake(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A platform lake with one registered, live deployment `blue`; PLATFORM_LAKE_ROOT points at it."""
    from revenue_platform.registry import DeploymentRegistry
    from tests.registry_helpers import register_deployment

    root = tmp_path_factory.mktemp("input-surfaces") / "lake"
    previous = os.environ.get("PLATFORM_LAKE_ROOT")
    os.environ["PLATFORM_LAKE_ROOT"] = str(root)
    register_deployment(root, None, deployment_id="blue", **{"window.size": "1 minute"})
    DeploymentRegistry(str(root)).switch_live("blue", "test", "setup")
    yield root
    if previous is None:
        os.environ.pop("PLATFORM_LAKE_ROOT")
    else:
        os.environ["PLATFORM_LAKE_ROOT"] = previous


@functools.cache
def _dags() -> dict[str, Any]:
    from airflow.dag_processing.dagbag import DagBag

    from revenue_platform.paths import DAGS_DIR

    bag = DagBag(dag_folder=str(DAGS_DIR))
    assert not bag.import_errors, bag.import_errors
    return bag.dags


def _deploy(params: dict[str, Any], lake: Path) -> Any:
    from revenue_platform.registry import DeploymentRegistry
    from revenue_platform.streaming.deploy import resolve_config
    from revenue_platform.streaming.request import DeployRequest

    registry = DeploymentRegistry(str(lake))
    return resolve_config(DeployRequest.from_params(params), str(lake), BOOTSTRAP, registry)


def _replay(params: dict[str, Any], lake: Path) -> Any:
    from revenue_platform.bluegreen.replay import plan_green, resolve_request
    from revenue_platform.bluegreen.triggers import MANUAL
    from revenue_platform.registry import DeploymentRegistry

    registry = DeploymentRegistry(str(lake))
    request = resolve_request(registry, MANUAL, params, [], NOW, None, progress=lambda _: None)
    return plan_green(registry, request, BOOTSTRAP, None)


def _publish(params: dict[str, Any], lake: Path) -> Any:
    from revenue_platform.bluegreen.release import publish
    from revenue_platform.bluegreen.request import PublishRequest
    from revenue_platform.registry import DeploymentRegistry

    request = PublishRequest.from_params(params)
    return publish(
        DeploymentRegistry(str(lake)),
        request.version,
        request.config_overrides,
        request.require_approval,
        request.notes,
        "test",
        progress=lambda _: None,
    )


def _provision(params: dict[str, Any], lake: Path) -> Any:
    from revenue_platform.topics.provision import load_spec_step
    from revenue_platform.topics.request import ProvisionRequest

    request = ProvisionRequest.from_params(params)
    return load_spec_step(request.environment, request.topics, request.allow_destructive)


def _reprocess(params: dict[str, Any], lake: Path) -> Any:
    from revenue_platform.reprocessing import ReprocessRequest, plan_reprocessing

    ReprocessRequest.from_params(params)  # what the DAG's first task checks first
    return plan_reprocessing(params, datetime(2026, 11, 22, 9, tzinfo=UTC), NOW, "blue")


def _quality(params: dict[str, Any], lake: Path) -> Any:
    from revenue_platform.paths import require_inside_lake
    from revenue_platform.quality.request import QualityRequest

    # What the gate task does first: the form, then the lake root confined to the platform's lake.
    request = QualityRequest.from_params(params)
    if request.lake_root is not None:
        require_inside_lake(request.lake_root, str(lake), "lake_root")
    return request


def _rollback(params: dict[str, Any], lake: Path) -> Any:
    from revenue_platform.bluegreen.request import RollbackRequest

    return RollbackRequest.from_params(params)


def _maintain(params: dict[str, Any], lake: Path) -> Any:
    from revenue_platform.lake_maintenance import MaintenanceRequest

    return MaintenanceRequest.from_params(params)


def _stop(params: dict[str, Any], lake: Path) -> Any:
    from revenue_platform.streaming.request import StopRequest

    return StopRequest.from_params(params)


def _supervise(params: dict[str, Any], lake: Path) -> Any:
    from revenue_platform.streaming.request import SuperviseRequest

    return SuperviseRequest.from_params(params)


DEPLOYMENT = identifier("green")
OPTIONAL_DEPLOYMENT = identifier("blue", optional=True)
VERSION = identifier("2.1.0")
TOPIC = identifier("orders")
STORE = identifier("store_1001")
OVERRIDES = st.sampled_from(
    [
        {"kafka.bootstrap_servers": "evil.example:9092"},
        {"kafka": {"bootstrap_servers": "evil.example:9092"}},
        {"kafka.options": {"bootstrap.servers": "evil.example:9092"}},
        {"kafka.options": {"interceptor.classes": "evil.Interceptor"}},
        {"kafka.security": {"protocol": "PLAINTEXT"}},
        {"lake_root": "/etc"},
        {"../x": 1},
        {"kafka.orders_topic": "orders\n"},
        {"shuffle_partitions": 10**9},
        {"lease_token": "x"},
        {f"k{i}": 1 for i in range(101)},
        "window.size=1 day",
        ["window.size"],
        5,
    ]
)

SURFACES: dict[str, tuple[Callable[[dict[str, Any], Path], Any], list[Field]]] = {
    "deploy_streaming_app": (
        _deploy,
        [
            Field("deployment_id", DEPLOYMENT),
            Field("colour", choice(["blue", "green", "other", None], empty_is_default=True)),
            Field("version", VERSION),
            Field("config_overrides", OVERRIDES, params_refuse=False),
            Field("starting_offsets", identifier("earliest")),
            # Seconds: the request takes fractions too (the form's Param only whole ones).
            Field("start_timeout_s", bounded_number(10, 3600, whole=False)),
        ],
    ),
    "blue_green_replay": (
        _replay,
        [
            # Left empty, a by-hand run names a fresh green (green-<version>-<time>): empty is no refusal.
            Field("green_deployment_id", identifier("green", optional=True)),
            Field("blue_deployment_id", OPTIONAL_DEPLOYMENT),
            Field("version", VERSION),
            Field("config_overrides", OVERRIDES, params_refuse=False),
            Field("mode", choice(["promote", "reproduce"], empty_is_default=True)),
            Field("replay_source", choice(["kafka_earliest", "bronze"])),
            Field("max_offsets_behind", bounded_number(0, 1_000_000_000, whole=True)),
            Field("catch_up_timeout_s", bounded_number(0, 7 * 86400, whole=False)),
            Field("poll_interval_s", bounded_number(0.1, 3600, whole=False)),
            Field("revenue_tolerance", amount()),
            Field("count_tolerance", bounded_number(0, 1_000_000, whole=True)),
            Field(
                "quality_thresholds",
                st.sampled_from(
                    [
                        {"watermark": "100000 days"},
                        {"window_size": "1 day"},
                        {"window_slide": "1 second"},
                        {"bronze_lookback": "3650 days"},
                        {"freshness_max_lag": "99999 days"},
                        {"revenue_ceiling": "1e400"},
                        {"max_dlq_share": float("nan")},
                        {"sample_size": 10**9},
                        {"../x": 1},
                    ]
                ),
                params_refuse=False,
            ),
            Field("require_approval", boolean()),
            Field("grace_period_s", bounded_number(0, 86400, whole=False)),
            Field("start_timeout_s", bounded_number(10, 3600, whole=False)),
            Field("stop_timeout_s", bounded_number(1, 3600, whole=False)),
        ],
    ),
    "publish_app_version": (
        _publish,
        [
            Field("version", VERSION),
            Field(
                "config_overrides",
                OVERRIDES | st.sampled_from([{"kafka.dlq_topic": "orders"}, {"history": {}}]),
                params_refuse=False,
            ),
            Field("require_approval", boolean()),
            Field("notes", free_text(4000), params_refuse=False),
        ],
    ),
    "maintain_lake": (
        _maintain,
        [
            Field("deployment_id", OPTIONAL_DEPLOYMENT),
            Field("gold_retention_hours", bounded_number(1, 8760, whole=True)),
            Field("bronze_retention_hours", bounded_number(1, 8760, whole=True)),
            Field("dry_run", boolean()),
        ],
    ),
    "provision_topics": (
        _provision,
        [
            Field("dry_run", boolean()),
            Field("topics", name_list(TOPIC)),
            Field("environment", choice(["local", "cluster"])),
            Field("allow_destructive", name_list(TOPIC)),
        ],
    ),
    "reprocess_revenue": (
        _reprocess,
        [
            Field("range_start", date_time()),
            Field("range_end", date_time()),
            Field("deployment_id", OPTIONAL_DEPLOYMENT),
            Field("source", choice(["auto", "kafka", "bronze"], empty_is_default=True)),
            Field("stores", name_list(STORE)),
            Field("repair", boolean()),
            Field("lake_root", st.sampled_from([*PATHS, *HOSTS, "s3a://other/lake", "\x00", 5, []]), False),
        ],
    ),
    "revenue_quality_checks": (
        _quality,
        [
            Field("deployment_id", OPTIONAL_DEPLOYMENT),
            Field("interval_start", date_time()),
            Field("interval_end", date_time()),
            Field("freshness_max_lag", interval().filter(lambda v: v != ""), params_refuse=False),
            Field("revenue_ceiling", amount()),
            Field("max_dlq_share", bounded_number(0, 1, whole=False, null_is_default=True)),
            Field("max_late_share", bounded_number(0, 1, whole=False, null_is_default=True)),
            Field("lake_root", st.sampled_from([*PATHS, *HOSTS, "s3a://other/lake", "\x00", 5, []]), False),
        ],
    ),
    "rollback_live_deployment": (
        _rollback,
        [
            Field("target_deployment_id", OPTIONAL_DEPLOYMENT),
            Field("reason", free_text(500, required=True)),
        ],
    ),
    "stop_streaming_app": (
        _stop,
        [
            Field("deployment_id", DEPLOYMENT),
            Field("timeout_s", bounded_number(1, 3600, whole=True)),
        ],
    ),
    "supervise_streaming_apps": (
        _supervise,
        [
            Field("deployment_ids", name_list(DEPLOYMENT)),
            Field("max_restarts", bounded_number(0, 100, whole=True)),
            Field("window_minutes", bounded_number(1, 1440, whole=False)),
            Field("backoff_base_s", bounded_number(0, 3600, whole=False)),
            Field("heartbeat_stale_s", bounded_number(10, 3600, whole=False)),
            Field("start_timeout_s", bounded_number(10, 3600, whole=True)),
        ],
    ),
}
# Values the validators need that the DAG's defaults do not give (the replay needs a NEW green).
VALID_OVERRIDES = {
    "blue_green_replay": {"green_deployment_id": "green-p"},
    "publish_app_version": {"version": "2.1.0"},
    "reprocess_revenue": {"range_start": "2026-11-22T09:00:00Z", "range_end": "2026-11-22T09:01:00Z"},
}


def _state(lake: Path) -> dict[str, tuple[int, int]]:
    """Every file under the lake with its size and modification time."""
    return {
        str(path): (path.stat().st_size, path.stat().st_mtime_ns)
        for path in lake.rglob("*")
        if path.is_file()
    }


@pytest.fixture(autouse=True)
def _nothing_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """No validation may launch a driver or spark-submit."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a validator launched a driver")

    import revenue_platform.streaming.deploy as deploy_module
    import revenue_platform.streaming.launcher as launcher_module

    monkeypatch.setattr(launcher_module, "launch", refuse)
    monkeypatch.setattr(deploy_module, "launch", refuse)
    monkeypatch.setattr(deploy_module, "launch_and_wait", refuse)


FORM_FIELDS = sorted(f"{dag_id}.{field.name}" for dag_id, (_, fields) in SURFACES.items() for field in fields)


def test_the_property_covers_every_param_of_every_dag() -> None:
    dags = _dags()
    assert set(SURFACES) == set(dags)
    for dag_id, (_, fields) in SURFACES.items():
        assert {field.name for field in fields} == set(dags[dag_id].params.keys()), dag_id


def test_the_valid_defaults_pass(lake: Path) -> None:
    dags = _dags()
    # The baseline every hostile case changes one field of: valid, so a refusal is the field's.
    for dag_id, (validate, _) in SURFACES.items():
        if dag_id in ("provision_topics",):
            continue  # reads the shipped spec, which is tested on its own
        params = {**_defaults(dags[dag_id]), **VALID_OVERRIDES.get(dag_id, {})}
        if dag_id == "publish_app_version":
            continue  # a valid publish records a release: tested in test_release.py
        validate(params, lake)


@settings(
    max_examples=int(os.environ.get("INPUT_SURFACE_EXAMPLES", "400")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_every_dag_form_refuses_hostile_values_naming_the_field(data: st.DataObject, lake: Path) -> None:
    from airflow.sdk.definitions.param import ParamValidationError

    dag_id, _, name = data.draw(st.sampled_from(FORM_FIELDS), label="field").partition(".")
    validate, fields = SURFACES[dag_id]
    field = next(f for f in fields if f.name == name)
    value = data.draw(field.hostile, label="value")
    dag = _dags()[dag_id]
    params = {**_defaults(dag), **VALID_OVERRIDES.get(dag_id, {}), name: value}
    before = _state(lake)

    with pytest.raises((ConfigError, AppConfigError)) as refused:
        validate(params, lake)
    assert name in str(refused.value) or (
        # A config override is named by its own field (e.g. kafka.bootstrap_servers).
        name in ("config_overrides", "quality_thresholds") and _names_an_override(str(refused.value), value)
    ), f"{dag_id}.{name}={value!r:.80}: {refused.value}"
    assert _state(lake) == before, f"{dag_id}.{name}={value!r:.80} wrote to the lake"

    form = copy.deepcopy(dag.params)
    # JSON schema's minimum/maximum cannot refuse NaN (every comparison is false); JSON has no NaN.
    not_a_number = isinstance(value, float) and value != value
    if field.params_refuse and not not_a_number:
        with pytest.raises(ParamValidationError):
            form[name] = value
    else:
        with contextlib.suppress(ParamValidationError):
            form[name] = value


def _defaults(dag: Any) -> dict[str, Any]:
    """The form's defaults (as a run without conf gets them; publish's version has none that is valid)."""
    return {key: copy.deepcopy(dag.params.get_param(key).value) for key in dag.params}


def _names_an_override(message: str, overrides: Any) -> bool:
    if not isinstance(overrides, dict):
        return "config_overrides" in message or "quality_thresholds" in message
    keys = set(overrides)
    for value in overrides.values():
        if isinstance(value, dict):
            keys |= set(value)
    return any(str(key) in message for key in keys) or "config_overrides" in message


# --- the app's config: every field reachable from a form, a release or --set ---------------------
CONFIG_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "deployment_id": identifier("blue"),
    "app_version": st.sampled_from([*CONTROL, "v" * 200_000, "", " 1.0", "1.0\n", 5, [], {}]),
    "lake_root": st.sampled_from(["", "\x00", "/lake\n", "a" * 2000, 5, [], {}]),
    "registry_root": st.sampled_from(["", "\x00", "/lake\n", "a" * 2000, 5, [], {}]),
    "lease_token": identifier("17-abc", optional=True),
    "shuffle_partitions": bounded_number(1, 10_000, whole=True),
    "engine": choice(["micro_batch", "one_query", "two_queries", None]),
    "kafka.bootstrap_servers": st.sampled_from([*SHELL, *SQL, *PATHS, *UNICODE, "", "host", "a:b", 5, []]),
    "kafka.orders_topic": TOPIC,
    "kafka.stores_topic": identifier("stores"),
    "kafka.dlq_topic": identifier("orders_dlq") | st.sampled_from(["orders", "stores", "general_orders"]),
    "kafka.general_orders_topic": identifier("general_orders") | st.sampled_from(["stores", "orders"]),
    "kafka.restaurant_orders_topic": identifier("restaurant_orders") | st.sampled_from(["orders_dlq"]),
    "kafka.revenue_topic": identifier("revenue_windows") | st.sampled_from(["orders"]),
    "kafka.starting_offsets": identifier("earliest")
    | st.sampled_from(['{"orders": {"0": ' + "9" * 70_000 + "}}", '{"orders": {"x": 1}}', "{}", "[]"]),
    "kafka.starting_timestamp_ms": bounded_number(0, 253_402_300_799_999, whole=True, null_is_default=True),
    "kafka.max_offsets_per_trigger": bounded_number(1, 50_000_000, whole=True, null_is_default=True),
    "kafka.min_partitions": bounded_number(1, 10_000, whole=True, null_is_default=True),
    "kafka.options": st.sampled_from(
        [
            {"bootstrap.servers": "evil.example:9092"},
            {"kafka.bootstrap.servers": "evil.example:9092"},
            {"interceptor.classes": "x"},
            {"sasl.jaas.config": "x"},
            {"request.timeout.ms": "; rm -rf /"},
            {"request.timeout.ms": "9" * 30},
            {"compression.type": "evil"},
            {"linger.ms": "-1"},
            "x",
            [],
        ]
    ),
    "window.size": st.sampled_from(
        ["0 seconds", "2 days", "1e9 days", "15 seconds\n", "\u0661\u0665 seconds", 15, ""]
    ),
    "window.slide": st.sampled_from(["0 seconds", "2 days", "15 seconds\n", 15, "x"]),
    "window.watermark": st.sampled_from(["0 seconds", "100000 days", "30 seconds\n", 30, ""]),
    "dedupe.horizon": st.sampled_from(["0 seconds", "8 days", "1 hour\n", 3600, "", "1 hour; rm -rf /"]),
    "trigger.mode": choice(["processing_time", "available_now"]),
    # "0 seconds" is allowed: batches back to back.
    "trigger.interval": st.sampled_from(["-1 seconds", "2 hours", "5 seconds\n", 5, ""]),
    "trigger.min_records": bounded_number(1, 50_000_000, whole=True, null_is_default=True),
    "trigger.max_wait": st.sampled_from(["0 seconds", "2 hours", "2 seconds\n", 2, ""]),
    "validation.max_order_amount": st.sampled_from(["1e400", "NaN", "-1", "0", "0.001", "x", [], "١٢٣"]),
    "validation.max_future_skew": st.sampled_from(
        ["1 day 1 second", "0 seconds", "2 days", "5\nminutes", 300, []]
    ),
    "validation.max_past_age": st.sampled_from(
        ["3651 days", "0 seconds", "10000 days", "1 day; rm -rf /", -1, ""]
    ),
    "history": st.sampled_from(
        [
            {"bronze_table": "/etc", "kafka_offsets": {0: 5}},
            {"bronze_table": "../bronze/orders_raw/blue", "kafka_offsets": {0: 5}},
            {"bronze_table": "/lake/bronze/orders_raw/blue\n", "kafka_offsets": {0: 5}},
            {"bronze_table": "/lake/bronze/orders_raw/blue", "kafka_offsets": {}},
            {"bronze_table": "/lake/bronze/orders_raw/blue", "kafka_offsets": {0: 2**64}},
            {"bronze_table": "/lake/bronze/orders_raw/blue", "kafka_offsets": {-1: 5}},
            "/etc",
        ]
    ),
}


def test_the_property_covers_every_config_field() -> None:
    from spark_apps.contract.config import StreamingAppConfig

    leaves = set()
    for name, info in StreamingAppConfig.model_fields.items():
        annotation = info.annotation
        sub = getattr(annotation, "model_fields", None)
        if sub is not None and name != "history":
            leaves |= {f"{name}.{child}" for child in sub if child != "security"}
        else:
            leaves.add(name)
    assert leaves <= set(CONFIG_FIELDS)


@settings(
    max_examples=int(os.environ.get("INPUT_SURFACE_EXAMPLES", "400")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data(), surface=st.sampled_from(["--set", "config_overrides", "release"]))
def test_every_config_field_refuses_hostile_values_naming_it(
    data: st.DataObject, surface: str, lake: Path
) -> None:
    name = data.draw(st.sampled_from(sorted(CONFIG_FIELDS)), label="field")
    value = data.draw(CONFIG_FIELDS[name], label="value")
    before = _state(lake)
    with pytest.raises((ConfigError, AppConfigError)) as refused:
        _submit(surface, name, value, lake)
    message = str(refused.value)
    leaf = name.rpartition(".")[2]
    assert name in message or leaf in message, f"{surface} {name}={value!r:.80}: {message[:300]}"
    assert _state(lake) == before


def _submit(surface: str, name: str, value: Any, lake: Path) -> None:
    from revenue_platform.bluegreen.release import publish
    from revenue_platform.registry import DeploymentRegistry
    from spark_apps.contract.config import load_config

    if surface == "--set":
        # JSON is YAML: the value reaches the model exactly as generated (quotes keep "5" a string).
        load_config(None, [f"{name}={_as_yaml(value)}"])
    elif surface == "config_overrides":
        form = {
            "deployment_id": "green",
            "colour": None,
            "version": "2.1.0",
            "config_overrides": {name: value},
            "starting_offsets": "earliest",
            "start_timeout_s": 180,
        }
        _deploy(form, lake)
    else:
        publish(DeploymentRegistry(str(lake)), "2.1.0", {name: value}, True, "", "test", lambda _: None)


def _as_yaml(value: Any) -> str:
    """`value` as YAML that reads back as the same value (JSON, except YAML's own NaN and infinities)."""
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else (".inf" if value > 0 else "-.inf")
    return json.dumps(value)
