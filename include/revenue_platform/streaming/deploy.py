"""Deploy a streaming app deployment: validate, register, take the lease, launch, wait for its heartbeat.

Everything is validated before anything is touched. A deployment whose driver is alive is
left alone (deploying twice never starts a second driver), and deploying it with a different
config fails and changes nothing (new configs roll out with blue_green_replay); otherwise a
new fencing token is taken with a compare-and-swap on the registry row, the driver is
launched with it, and the call waits, bounded, for the driver's first heartbeat. A driver
that exits first, or stays silent, is recorded as failed with the tail of its log, and
DeploymentFailedError carries that tail to the Airflow task log; one that refused to start
(exit status `DRIVER_REFUSED`: it would refuse again) is recorded as refused, which the
supervisor never restarts, and DriverRefusedError carries its own message. The supervisor
restarts through the same `launch_and_wait`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from revenue_platform import processes
from revenue_platform.errors import ConfigError, PlatformError
from revenue_platform.paths import APP_CONFIG_PATH, require_inside_lake
from revenue_platform.registry import (
    DeploymentRecord,
    DeploymentRegistry,
    DesiredState,
    ObservedState,
    RegistryEvent,
    RestartOutcome,
    colour_for,
)
from revenue_platform.streaming.launcher import (
    DriverHandle,
    LaunchError,
    SparkTarget,
    last_error_line,
    launch,
    log_tail,
    observe_driver,
)
from revenue_platform.streaming.request import DeployRequest
from spark_apps.contract.config import BRONZE_TABLE_INFIX, AppConfigError, StreamingAppConfig, load_config
from spark_apps.contract.driver_exit import DRIVER_REFUSED
from spark_apps.contract.kafka_security import KafkaClientSecurity
from spark_apps.contract.naming import DeploymentNames
from spark_apps.contract.topic_ownership import (
    describe_conflicts,
    input_conflicts,
    topic_conflicts,
    topic_writers,
)

LOG = logging.getLogger(__name__)
DEFAULT_HEARTBEAT_STALE_S = 60.0
# Bounds of the deploy form (the DAG's Params carry the same numbers).
# Deployments meant to run at once in one lake: each is a supervised Spark driver (a JVM of up to
# spark.driver.memory, 2 GiB by default, plus its Python worker) on the host that also runs the broker
# and Airflow, and the local stack's host has 2 cores. Blue, green and a few more; a 9th is refused
# until one is stopped.
MAX_RUNNING_DEPLOYMENTS = 8


class DeploymentFailedError(PlatformError):
    """The driver failed at start (or never reported); the message carries its error."""


class DriverRefusedError(DeploymentFailedError):
    """The driver refused to start (exit status DRIVER_REFUSED): started again unchanged, it would
    refuse again. The message is the driver's own, which says what to do."""


def own_output_topics(
    request: DeployRequest, config: StreamingAppConfig, others: Iterable[DeploymentRecord]
) -> dict[str, str]:
    """Overrides that give the deployment its own output topics where another one already writes.

    The first deployment keeps the configured topics (the demo's `orders_dlq`, `revenue_windows`, ...);
    every later one writes `<topic>_<deployment>` instead, so a second deployment or a replay never
    adds records to the topics the live deployment's consumers read. Asking for a taken topic by
    name is refused: two deployments writing one topic would double what its consumers count.
    """
    taken = topic_writers(((other.deployment_id, other.config) for other in others), config.deployment_id)
    overrides: dict[str, str] = {}
    for field_name, topic in config.output_topics().items():
        owner = taken.get(topic)
        if owner is None:
            continue
        key = f"kafka.{field_name}"
        own = config.names.own_topic(topic)
        if key in request.config_overrides:
            raise ConfigError(
                f"config_overrides.{key}: topic {topic!r} is already written by deployment {owner!r}; "
                f"two deployments never write one output topic. Leave {key} unset to write {own!r}."
            )
        overrides[key] = own
    return overrides


def resolve_config(
    request: DeployRequest,
    registry_root: str,
    kafka_bootstrap: str | None = None,
    registry: DeploymentRegistry | None = None,
) -> StreamingAppConfig:
    """The app config the deployment will run with; ConfigError naming the field if it is invalid.

    With the registry, output topics another deployment already writes are replaced by the
    deployment's own (see `own_output_topics`).
    """
    # The request checked its own fields when it was made (`DeployRequest`); the config it asks for
    # is checked here.
    overrides = dict(request.config_overrides)
    merged = {
        "lake_root": registry_root,
        **overrides,
        **request.starting_config,
        "deployment_id": request.deployment_id,
        "app_version": request.app_version,
        "registry_root": registry_root,
    }
    if kafka_bootstrap:
        # After the overrides: the connection's servers always win.
        merged["kafka.bootstrap_servers"] = kafka_bootstrap
    others = registry.deployments() if registry is not None else []
    try:
        config = load_config(APP_CONFIG_PATH, merged)
        if registry is not None:
            own = own_output_topics(request, config, others)
            if own:
                config = load_config(APP_CONFIG_PATH, {**merged, **own})
    except AppConfigError as error:
        raise ConfigError(str(error)) from error
    registered = [(other.deployment_id, other.config) for other in others]
    conflicts = {**topic_conflicts(config, registered), **input_conflicts(config, registered)}
    if conflicts:
        raise ConfigError(f"config_overrides.{describe_conflicts(conflicts)}")
    # Overrides come from a trigger form: whatever the app will write must stay in the registry's lake.
    require_inside_lake(config.lake_root, registry_root, "config_overrides.lake_root")
    if config.history is not None:
        require_registered_bronze(config.history.bronze_table, registry_root, others)
    return config


def require_registered_bronze(
    bronze_table: str, registry_root: str, deployments: Iterable[DeploymentRecord]
) -> str:
    """`bronze_table` if it is the bronze archive of a registered deployment inside the lake; a replay
    from bronze reads the platform's own archive, never any other path."""
    require_inside_lake(bronze_table, registry_root, "history.bronze_table")
    archives = {
        DeploymentNames(str(d.config.get("lake_root") or registry_root), d.deployment_id).bronze_orders_table
        for d in deployments
    }
    if bronze_table not in archives:
        raise ConfigError(
            f"history.bronze_table: {bronze_table!r} is not the bronze table of a registered deployment "
            f"(<lake root>{BRONZE_TABLE_INFIX}<deployment id>); a replay from bronze reads blue's archive, "
            "which blue_green_replay finds itself (replay_source: bronze)"
        )
    return bronze_table


def config_document(config: StreamingAppConfig) -> tuple[str, str]:
    """The config as stored in the registry (canonical JSON, no lease token) and its SHA-256."""
    document = json.dumps(config.model_dump(mode="json", exclude={"lease_token"}), sort_keys=True)
    return document, hashlib.sha256(document.encode()).hexdigest()


def ensure_output_topics(
    client_config: Mapping[str, Any], config: StreamingAppConfig, timeout_s: float = 30.0
) -> list[str]:
    """Create the deployment's missing output topics (the revenue topic compacted: latest value per
    window); partitions and replicas are the broker's defaults. Returns the topics created."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.cimpl import NewTopic  # its defining module (admin re-exports it implicitly)

    from revenue_platform.kafka_connection import admin_client

    admin = admin_client(client_config)
    existing = set(admin.list_topics(timeout=timeout_s).topics)
    wanted = {
        topic: {"cleanup.policy": "compact"} if field_name == "revenue_topic" else {}
        for field_name, topic in config.output_topics().items()
        if topic not in existing
    }
    if not wanted:
        return []
    futures = admin.create_topics([NewTopic(topic, config=conf) for topic, conf in wanted.items()])
    for future in futures.values():
        try:
            future.result(timeout=timeout_s)
        except KafkaException as error:
            if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
    return sorted(wanted)


def registration_fields(config: StreamingAppConfig, colour: str | None) -> dict[str, Any]:
    document, digest = config_document(config)
    names = config.names
    return {
        "app_version": config.app_version,
        "colour": colour_for(config.deployment_id, colour).value,
        "config_json": document,
        "config_hash": digest,
        "lake_root": config.lake_root,
        "checkpoint_dir": names.checkpoint_root,
        "gold_table": names.gold_revenue_table,
        "bronze_table": names.bronze_orders_table,
        "progress_dir": names.progress_dir,
        "desired_state": DesiredState.RUNNING.value,
    }


def mark_failed(
    registry: DeploymentRegistry, record: DeploymentRecord, error: str, actor: str, reason: str
) -> DeploymentRecord:
    return registry.update(
        record.deployment_id,
        {"observed_state": ObservedState.FAILED.value, "last_error": error[-4000:]},
        actor,
        events=[
            RegistryEvent(
                record.deployment_id,
                "failed",
                actor,
                record.observed_state,
                ObservedState.FAILED.value,
                reason,
                {"error": error[-2000:], "lease_token": record.lease_token},
            )
        ],
    )


def mark_refused(
    registry: DeploymentRegistry, record: DeploymentRecord, tail: str, actor: str
) -> DriverRefusedError:
    """Record that `record`'s driver refused to start (failed, with a `refused` restart outcome the
    supervisor stops at); return the error to raise, carrying the driver's own message."""
    # The app prints its refusal as one `ERROR: ` line; the JVM may log after it as it shuts down.
    own = [line for line in tail.splitlines() if line.startswith("ERROR: ")]
    said = own[-1] if own else last_error_line(tail) or "(the driver gave no reason)"
    said = said.removeprefix("ERROR: ")
    history = [
        *record.restart_history,
        {"at": datetime.now(UTC).isoformat(), "reason": said[:1000], "outcome": RestartOutcome.REFUSED.value},
    ]
    registry.update(
        record.deployment_id,
        {
            "observed_state": ObservedState.FAILED.value,
            "last_error": tail[-4000:],
            "restart_history_json": json.dumps(history),
        },
        actor,
        events=[
            RegistryEvent(
                record.deployment_id,
                RestartOutcome.REFUSED.value,
                actor,
                record.observed_state,
                ObservedState.FAILED.value,
                "the driver refused to start",
                {"error": said[-2000:], "exit_code": DRIVER_REFUSED, "lease_token": record.lease_token},
            )
        ],
    )
    return DriverRefusedError(
        f"the streaming app of deployment {record.deployment_id!r} refused to start, and would refuse "
        f"again, so it is not restarted until it is deployed anew: {said}\n(log {record.driver_log_path})"
    )


def wait_for_first_heartbeat(
    registry: DeploymentRegistry,
    record: DeploymentRecord,
    timeout_s: float,
    actor: str,
    progress: Callable[[str], None],
) -> DeploymentRecord:
    """Block until the driver of `record`'s lease reports, exits, or `timeout_s` passes."""
    started = time.monotonic()
    last_report = started
    while True:
        observation = observe_driver(record, datetime.now(UTC))
        if observation.status is not None and observation.status.get("ready"):
            heartbeat = datetime.fromisoformat(observation.status["heartbeat_at"])
            progress(
                f"[deploy] {record.deployment_id}: driver pid {observation.status['pid']} reported its first "
                f"heartbeat after {time.monotonic() - started:.0f}s"
            )
            return registry.update(
                record.deployment_id,
                {
                    "observed_state": ObservedState.RUNNING.value,
                    "heartbeat_at": heartbeat,
                    "last_error": None,
                },
                actor,
                expected_lease=record.lease_token,
                events=[
                    RegistryEvent(
                        record.deployment_id,
                        "started",
                        actor,
                        ObservedState.STARTING.value,
                        ObservedState.RUNNING.value,
                        "first heartbeat",
                        {"lease_token": record.lease_token, "driver": observation.status},
                    )
                ],
            )
        if observation.process_alive is False:
            # Let the log catch up with the exit before taking its tail.
            time.sleep(0.5)
            tail = log_tail(record)
            if record.driver_pid is not None and processes.exit_code(record.driver_pid) == DRIVER_REFUSED:
                raise mark_refused(registry, record, tail, actor)
            mark_failed(registry, record, tail, actor, "driver exited before its first heartbeat")
            raise DeploymentFailedError(
                f"the streaming app of deployment {record.deployment_id!r} exited at start; "
                f"log {record.driver_log_path}, last lines:\n{tail}"
            )
        elapsed = time.monotonic() - started
        if elapsed > timeout_s:
            if observation.process_alive and record.driver_pid is not None:
                processes.terminate(record.driver_pid, 10.0)
            tail = log_tail(record)
            mark_failed(
                registry, record, f"no heartbeat within {timeout_s:.0f}s\n{tail}", actor, "start timeout"
            )
            raise DeploymentFailedError(
                f"the streaming app of deployment {record.deployment_id!r} did not report a heartbeat within "
                f"{timeout_s:.0f}s and was stopped; log {record.driver_log_path}, last lines:\n{tail}"
            )
        if time.monotonic() - last_report >= 10:
            progress(
                f"[deploy] {record.deployment_id}: waiting for the driver's first heartbeat "
                f"({elapsed:.0f}s; log {record.driver_log_path or record.submission_id})"
            )
            last_report = time.monotonic()
        time.sleep(1.0)


def launch_and_wait(
    registry: DeploymentRegistry,
    record: DeploymentRecord,
    target: SparkTarget,
    actor: str,
    reason: str,
    start_timeout_s: float,
    progress: Callable[[str], None] = print,
    extra_changes: Mapping[str, Any] | None = None,
    kafka_security: KafkaClientSecurity | None = None,
) -> DeploymentRecord:
    """Take a new lease (compare-and-swap on the row we read), launch the driver, wait for its heartbeat.

    `kafka_security` (the Kafka connection's credentials) goes to the driver only, never to the registry.
    """
    leased = registry.acquire_lease(
        record.deployment_id,
        record.row_version,
        actor,
        {
            **(extra_changes or {}),
            "observed_state": ObservedState.STARTING.value,
            "spark_master": target.master,
            "launched_at": datetime.now(UTC),
            "heartbeat_at": None,
            "last_error": None,
            **DriverHandle(kind=target.driver_kind).registry_changes(),
        },
        reason,
    )
    assert leased.lease_token is not None  # acquire_lease always sets one
    try:
        handle = launch(
            target,
            leased.deployment_id,
            leased.config,
            leased.lease_token,
            registry.lake_root,
            kafka_security,
        )
    except (LaunchError, OSError) as error:
        mark_failed(registry, leased, str(error), actor, "launch failed")
        raise DeploymentFailedError(
            f"could not launch deployment {leased.deployment_id!r}: {error}"
        ) from error
    launched = registry.update(
        leased.deployment_id,
        handle.registry_changes(),
        actor,
        expected_lease=leased.lease_token,
        events=[
            RegistryEvent(
                leased.deployment_id,
                "launched",
                actor,
                None,
                f"pid {handle.pid} on {handle.host}" if handle.kind == "local" else handle.submission_id,
                reason,
                {"lease_token": leased.lease_token, "log_path": handle.log_path, "master": target.master},
            )
        ],
    )
    progress(
        f"[deploy] {launched.deployment_id}: launched driver ({target.master}, "
        f"lease {launched.lease_token}); driver log: {launched.driver_log_path or launched.submission_id}"
    )
    return wait_for_first_heartbeat(registry, launched, start_timeout_s, actor, progress)


def deploy(
    request: DeployRequest,
    target: SparkTarget,
    registry: DeploymentRegistry,
    actor: str,
    kafka_bootstrap: str | None = None,
    progress: Callable[[str], None] = print,
    kafka_client_config: Mapping[str, Any] | None = None,
    kafka_security: KafkaClientSecurity | None = None,
) -> dict[str, Any]:
    """Register and launch `request` unless its driver is already alive; return what was done.

    `kafka_bootstrap` and `kafka_security` come from the Kafka connection; the servers are part of the
    registered config, the security settings (credentials) only reach the driver. With a Kafka client
    config, output topics that do not exist yet (a deployment's own) are created.
    """
    refuse_over_running_cap(registry, request.deployment_id)
    config = resolve_config(request, registry.lake_root, kafka_bootstrap, registry)
    fields = registration_fields(config, request.colour)
    deployment_id = request.deployment_id
    existing = registry.find(deployment_id)
    if existing is not None and _driver_running(existing):
        _keep_running(registry, existing, fields["config_hash"], actor)
        progress(
            f"[deploy] {deployment_id} is already running (pid {existing.driver_pid} on "
            f"{existing.driver_host}, lease {existing.lease_token}): nothing launched"
        )
        return _outcome("already_running", registry.get(deployment_id))

    _register(registry, deployment_id, existing, fields, actor)
    record = registry.get(deployment_id)
    progress(
        f"[deploy] {deployment_id}: registered config {record.config_hash[:12]} "
        f"(version {record.app_version})"
    )
    if kafka_client_config is not None:
        created = ensure_output_topics(kafka_client_config, config)
        if created:
            progress(f"[deploy] {deployment_id}: created its output topics {', '.join(created)}")
    started = launch_and_wait(
        registry,
        record,
        target,
        actor,
        "deploy",
        request.start_timeout_s,
        progress,
        kafka_security=kafka_security,
    )
    return _outcome("launched", started)


def refuse_over_running_cap(registry: DeploymentRegistry, deployment_id: str) -> None:
    """ConfigError, before anything is written, when `deployment_id` would be one more deployment meant
    to run than MAX_RUNNING_DEPLOYMENTS (one already meant to run is no more)."""
    running = sorted(
        r.deployment_id
        for r in registry.deployments()
        if r.desired_state == DesiredState.RUNNING.value and r.deployment_id != deployment_id
    )
    if len(running) >= MAX_RUNNING_DEPLOYMENTS:
        raise ConfigError(
            f"deployment_id {deployment_id!r} would be deployment {len(running) + 1} meant to run; at most "
            f"{MAX_RUNNING_DEPLOYMENTS} run at once (each is a supervised driver on the host): "
            f"{', '.join(running)} are. Stop one with stop_streaming_app first; nothing was registered"
        )


def _driver_running(existing: DeploymentRecord) -> bool:
    """Whether the deployment's leased driver is alive (its process, or else a fresh heartbeat)."""
    if existing.lease_token is None:
        return False
    observation = observe_driver(existing, datetime.now(UTC))
    return observation.process_alive or (
        observation.process_alive is None and observation.alive(DEFAULT_HEARTBEAT_STALE_S)
    )


def _keep_running(
    registry: DeploymentRegistry, existing: DeploymentRecord, config_hash: str, actor: str
) -> None:
    """A deploy of a running deployment: refuse a different config (before any change), else make sure
    it is meant to run."""
    deployment_id = existing.deployment_id
    if existing.config_hash != config_hash:
        # A green run that applied nothing would read as "rolled out"; refuse before any change.
        raise ConfigError(
            f"deployment {deployment_id!r} is running with config {existing.config_hash[:12]}, not "
            f"the requested {config_hash[:12]}; nothing was changed. A running deployment "
            "is never reconfigured in place: roll the new config out with the blue_green_replay DAG "
            '(e.g. {"green_deployment_id": "<new id>", "config_overrides": {...}}), which replays it '
            "next to this one and switches live once it is caught up and checked; or stop it with "
            "stop_streaming_app and deploy again to restart it from its checkpoint with the new "
            "config."
        )
    if existing.desired_state != DesiredState.RUNNING.value:
        registry.update(
            deployment_id,
            {"desired_state": DesiredState.RUNNING.value},
            actor,
            events=[
                RegistryEvent(
                    deployment_id, "desired_state", actor, existing.desired_state, "running", "deploy"
                )
            ],
        )


def _register(
    registry: DeploymentRegistry,
    deployment_id: str,
    existing: DeploymentRecord | None,
    fields: dict[str, Any],
    actor: str,
) -> None:
    """Register a new deployment, or store the (possibly new) config of a known one whose driver is not
    running; either way it is meant to run."""
    if existing is None:
        registry.register(
            DeploymentRecord(deployment_id=deployment_id, **fields),
            actor,
            events=[RegistryEvent(deployment_id, "desired_state", actor, None, "running", "deploy")],
        )
        return
    events = [
        RegistryEvent(deployment_id, "desired_state", actor, existing.desired_state, "running", "deploy")
    ]
    if existing.config_hash != fields["config_hash"]:
        events.append(
            RegistryEvent(
                deployment_id,
                "config_changed",
                actor,
                existing.config_hash,
                fields["config_hash"],
                "deploy",
            )
        )
    # A deliberate deploy resets the supervisor's restart budget.
    registry.update(deployment_id, {**fields, "restart_history_json": "[]"}, actor, events=events)


def _outcome(action: str, record: DeploymentRecord) -> dict[str, Any]:
    return {
        "action": action,
        "deployment_id": record.deployment_id,
        "observed_state": record.observed_state,
        "lease_token": record.lease_token,
        "driver_pid": record.driver_pid,
        "driver_host": record.driver_host,
        "driver_log_path": record.driver_log_path,
        "submission_id": record.submission_id,
        "config_hash": record.config_hash,
    }
