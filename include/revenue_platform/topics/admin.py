"""Thin I/O layer between the topic plan and a Kafka cluster, over confluent_kafka's AdminClient.

``describe_cluster`` reads what exists (live brokers, each topic's partition count, replication
factor and topic-level config overrides); ``apply_plan`` makes the changes a ``TopicPlan`` lists:
create topics with their configs, add partitions, and SET drifted configs with
``incremental_alter_configs`` (never the legacy whole-config ``alter_configs``, which would reset
every undeclared config). Every call has a timeout and a bounded number of retries for transient
errors; a cluster that never answers becomes ``BrokerUnreachableError`` with a hint on how to fix it.
Apply is idempotent: re-running a plan whose changes already happened is a no-op, and a plan with
refused changes nobody opted in to changes nothing at all.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from dataclasses import dataclass, field
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

# From their defining modules: `confluent_kafka.admin` re-exports these without `__all__`, which strict
# type checking does not count as an export (confluent-kafka is pinned in requirements.txt).
from confluent_kafka.admin._config import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource
from confluent_kafka.admin._resource import ResourceType
from confluent_kafka.cimpl import NewPartitions, NewTopic

from revenue_platform.errors import PlatformError
from revenue_platform.kafka_connection import admin_client, bootstrap_servers, broker_unreachable
from revenue_platform.topics.errors import DestructiveChangeRefused
from revenue_platform.topics.plan import Action, ObservedTopic, TopicChange, TopicPlan

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_ATTEMPTS = 3
_BACKOFF_S = 1.0

# Errors that mean "could not reach/authenticate to the cluster" rather than "the request was bad".
_UNREACHABLE_CODES = frozenset(
    {
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._RESOLVE,
        KafkaError._AUTHENTICATION,
        KafkaError._SSL,
        KafkaError.SASL_AUTHENTICATION_FAILED,
    }
)
# Worth another attempt: the cluster may be electing a controller or a leader right now.
_TRANSIENT_CODES = frozenset(
    {
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NOT_CONTROLLER,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NETWORK_EXCEPTION,
    }
)


class TopicApplyError(PlatformError):
    """Some operations of an allowed plan failed; the others may have been applied (re-run to converge)."""

    def __init__(self, failures: Mapping[str, str], result: ApplyResult) -> None:
        self.failures = dict(failures)
        self.result = result
        lines = "\n".join(f"  - {what}: {why}" for what, why in self.failures.items())
        super().__init__(
            f"{len(self.failures)} topic operation(s) failed (already applied: {result.summary()}); "
            f"the DAG is idempotent, re-run it after fixing the cause:\n{lines}"
        )


@dataclass(frozen=True)
class ClusterState:
    """What the cluster has: live broker count and the observed state of the described topics."""

    broker_count: int
    topics: dict[str, ObservedTopic] = field(default_factory=dict)
    cluster_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "broker_count": self.broker_count,
            "cluster_id": self.cluster_id,
            "topics": {name: topic.to_dict() for name, topic in sorted(self.topics.items())},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClusterState:
        return cls(
            broker_count=int(data["broker_count"]),
            cluster_id=None if data.get("cluster_id") is None else str(data["cluster_id"]),
            topics={name: ObservedTopic.from_dict(t) for name, t in dict(data.get("topics", {})).items()},
        )


@dataclass
class ApplyResult:
    """What ``apply_plan`` did, for the task log and XCom."""

    created: list[str] = field(default_factory=list)
    partitions_increased: dict[str, tuple[int, int]] = field(default_factory=dict)
    configs_altered: dict[str, list[str]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    already_done: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.created or self.partitions_increased or self.configs_altered)

    def summary(self) -> str:
        return (
            f"{len(self.created)} created, {len(self.partitions_increased)} with partitions added, "
            f"{len(self.configs_altered)} with configs altered, {len(self.skipped)} skipped"
        )

    def render(self) -> str:
        lines = [f"Applied: {self.summary()}"]
        lines.extend(f"  created {name}" for name in self.created)
        lines.extend(
            f"  {name}: partitions {old} -> {new}" for name, (old, new) in self.partitions_increased.items()
        )
        lines.extend(f"  {name}: set {', '.join(keys)}" for name, keys in self.configs_altered.items())
        lines.extend(f"  skipped {what}" for what in self.skipped)
        lines.extend(f"  already done: {what}" for what in self.already_done)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "created": list(self.created),
            "partitions_increased": {k: list(v) for k, v in self.partitions_increased.items()},
            "configs_altered": {k: list(v) for k, v in self.configs_altered.items()},
            "skipped": list(self.skipped),
            "already_done": list(self.already_done),
            "changed": self.changed,
        }


def describe_cluster(
    client_config: Mapping[str, Any],
    topics: Collection[str] | None = None,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    attempts: int = DEFAULT_ATTEMPTS,
) -> ClusterState:
    """Describe the live brokers and the given ``topics`` (all non-internal topics when None).

    Topics that do not exist are simply absent from ``ClusterState.topics``. Raises
    ``BrokerUnreachableError`` when the cluster does not answer within ``attempts`` tries.
    """
    client = admin_client(client_config)
    servers = bootstrap_servers(dict(client_config))
    description = _call(
        "describe cluster",
        lambda: client.describe_cluster(request_timeout=timeout_s).result(timeout=timeout_s + 5),
        servers,
        attempts,
    )
    metadata = _call("list topics", lambda: client.list_topics(timeout=timeout_s), servers, attempts)

    wanted = set(topics) if topics is not None else None
    present: dict[str, tuple[int, int]] = {}
    for name, meta in metadata.topics.items():
        if meta.error is not None or name.startswith("__"):
            # An errored entry is a topic being deleted or not yet ready: treat it as absent.
            continue
        if wanted is not None and name not in wanted:
            continue
        replica_counts = [len(p.replicas) for p in meta.partitions.values()]
        # Max, not the first partition: mid-reassignment a partition can temporarily have more.
        present[name] = (len(meta.partitions), max(replica_counts, default=0))

    configs = _describe_topic_configs(client, sorted(present), servers, timeout_s, attempts)
    observed = {
        name: ObservedTopic(
            name=name,
            partitions=partitions,
            replication_factor=replication_factor,
            configs=configs[name][0],
            inherited=configs[name][1],
        )
        for name, (partitions, replication_factor) in present.items()
        if name in configs
    }
    return ClusterState(
        broker_count=len(description.nodes),
        topics=observed,
        cluster_id=description.cluster_id,
    )


def apply_plan(
    client_config: Mapping[str, Any],
    plan: TopicPlan,
    *,
    timeout_s: float = 30.0,
    attempts: int = DEFAULT_ATTEMPTS,
) -> ApplyResult:
    """Make the changes ``plan`` lists, in the order create -> add partitions -> set configs.

    Raises ``DestructiveChangeRefused`` (before contacting the broker, changing nothing) when the
    plan holds refused changes that are not opted in via ``allow_destructive``. Opted-in partition
    decreases and replication-factor changes are skipped with the reason in ``ApplyResult.skipped``.
    Raises ``TopicApplyError`` if some operations failed after retries.
    """
    blocking = plan.blocking_refusals
    if blocking:
        raise DestructiveChangeRefused(blocking)

    result = ApplyResult(skipped=[refusal.describe() for refusal in plan.skipped_refusals])
    if not plan.has_changes:
        return result

    client = admin_client(client_config)
    servers = bootstrap_servers(dict(client_config))
    # Fail on an unreachable cluster before the first change, not halfway through the plan.
    probe_timeout = min(timeout_s, DEFAULT_TIMEOUT_S)
    _call(
        "describe cluster",
        lambda: client.describe_cluster(request_timeout=probe_timeout).result(timeout=probe_timeout + 5),
        servers,
        attempts,
    )
    failures = {
        **_create_topics(client, plan.by_action(Action.CREATE), result, timeout_s, attempts),
        **_add_partitions(client, plan.by_action(Action.INCREASE_PARTITIONS), result, timeout_s, attempts),
        **_set_configs(client, plan.by_action(Action.ALTER_CONFIGS), result, timeout_s, attempts),
    }
    if failures:
        raise TopicApplyError(failures, result)
    return result


def _create_topics(
    client: AdminClient, changes: list[TopicChange], result: ApplyResult, timeout_s: float, attempts: int
) -> dict[str, str]:
    """Create the topics of `changes` with their configs; record them in `result`, return failures."""
    if not changes:
        return {}
    failures: dict[str, str] = {}
    new_topics = {
        change.topic: NewTopic(
            change.topic,
            num_partitions=change.spec.partitions,
            replication_factor=change.spec.replication_factor,
            config=dict(change.spec.configs),
        )
        for change in changes
    }
    outcomes = _run_batch(
        lambda names: client.create_topics(
            [new_topics[n] for n in names], operation_timeout=timeout_s, request_timeout=timeout_s
        ),
        list(new_topics),
        attempts,
        timeout_s,
    )
    for name, error in outcomes.items():
        if error is None:
            result.created.append(name)
        elif error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
            # Created since describe (another run, auto-creation): the next run diffs it properly.
            result.already_done.append(f"{name} already exists; re-run to converge its configs")
        else:
            failures[f"create {name}"] = _describe_error(error)
    _wait_for_topics(client, {n: new_topics[n].num_partitions for n in result.created}, timeout_s)
    return failures


def _add_partitions(
    client: AdminClient, changes: list[TopicChange], result: ApplyResult, timeout_s: float, attempts: int
) -> dict[str, str]:
    """Grow the topics of `changes` to their spec's partition count; record in `result`, return failures."""
    if not changes:
        return {}
    failures: dict[str, str] = {}
    to_grow = {change.topic: change for change in changes}
    outcomes = _run_batch(
        lambda names: client.create_partitions(
            [NewPartitions(n, to_grow[n].spec.partitions) for n in names],
            operation_timeout=timeout_s,
            request_timeout=timeout_s,
        ),
        list(to_grow),
        attempts,
        timeout_s,
    )
    for name, error in outcomes.items():
        change = to_grow[name]
        if error is None:
            result.partitions_increased[name] = (change.current_partitions or 0, change.spec.partitions)
        elif error.code() == KafkaError.INVALID_PARTITIONS and "already has" in error.str():
            # Kafka rejects "increase" to the current count; that means an earlier run did it.
            result.already_done.append(f"{name} already has {change.spec.partitions} partitions")
        else:
            failures[f"add partitions to {name}"] = _describe_error(error)
    _wait_for_topics(client, {n: to_grow[n].spec.partitions for n in result.partitions_increased}, timeout_s)
    return failures


def _set_configs(
    client: AdminClient, changes: list[TopicChange], result: ApplyResult, timeout_s: float, attempts: int
) -> dict[str, str]:
    """SET each drifted config of `changes` (others untouched); record in `result`, return failures."""
    if not changes:
        return {}
    failures: dict[str, str] = {}
    to_alter = {change.topic: change for change in changes}
    resources = {
        name: ConfigResource(
            ResourceType.TOPIC,
            name,
            incremental_configs=[
                ConfigEntry(drift.key, drift.expected, incremental_operation=AlterConfigOpType.SET)
                for drift in change.config_drift
            ],
        )
        for name, change in to_alter.items()
    }
    outcomes = _run_batch(
        lambda names: {
            resource.name: future
            for resource, future in client.incremental_alter_configs(
                [resources[n] for n in names], request_timeout=timeout_s
            ).items()
        },
        list(resources),
        attempts,
        timeout_s,
    )
    for name, error in outcomes.items():
        if error is None:
            result.configs_altered[name] = [drift.key for drift in to_alter[name].config_drift]
        else:
            failures[f"set configs on {name}"] = _describe_error(error)
    return failures


def _call(what: str, operation: Callable[[], T], servers: str, attempts: int) -> T:
    """Run one cluster-wide call with bounded retries; map connectivity failures to BrokerUnreachableError."""
    last: KafkaError | None = None
    for attempt in range(1, max(attempts, 1) + 1):
        try:
            return operation()
        except KafkaException as exc:
            last = _kafka_error(exc)
        except FutureTimeoutError:
            last = KafkaError(KafkaError._TIMED_OUT, "no answer before the timeout")
        if last.code() not in _TRANSIENT_CODES and not last.retriable():
            break
        if attempt < attempts:
            log.warning(
                "%s failed (%s), attempt %d/%d; retrying", what, _describe_error(last), attempt, attempts
            )
            time.sleep(_BACKOFF_S * attempt)
    assert last is not None
    if last.code() in _UNREACHABLE_CODES:
        raise broker_unreachable(
            servers, f"{what} failed after {attempts} attempt(s): {_describe_error(last)}"
        )
    raise KafkaException(last)


def _run_batch(
    submit: Callable[[list[str]], Mapping[str, Future[Any]]],
    names: list[str],
    attempts: int,
    timeout_s: float,
) -> dict[str, KafkaError | None]:
    """Submit a per-topic admin request; retry only the topics that failed transiently."""
    outcomes: dict[str, KafkaError | None] = {}
    pending = list(names)
    for attempt in range(1, max(attempts, 1) + 1):
        futures = submit(pending)
        retry: list[str] = []
        for name, future in futures.items():
            try:
                future.result(timeout=timeout_s + 5)
                outcomes[name] = None
            except KafkaException as exc:
                outcomes[name] = _kafka_error(exc)
            except FutureTimeoutError:
                outcomes[name] = KafkaError(KafkaError._TIMED_OUT, "no answer before the timeout")
            error = outcomes[name]
            if error is not None and (error.code() in _TRANSIENT_CODES or error.retriable()):
                retry.append(name)
        if not retry or attempt == attempts:
            break
        log.warning("retrying %s after transient errors (attempt %d/%d)", ", ".join(retry), attempt, attempts)
        time.sleep(_BACKOFF_S * attempt)
        pending = retry
    return outcomes


def _describe_topic_configs(
    client: AdminClient, names: list[str], servers: str, timeout_s: float, attempts: int
) -> dict[str, tuple[dict[str, str], dict[str, str]]]:
    """Per topic: (configs set on the topic itself, effective values inherited from defaults)."""
    if not names:
        return {}

    def describe() -> dict[str, tuple[dict[str, str], dict[str, str]]]:
        futures = client.describe_configs(
            [ConfigResource(ResourceType.TOPIC, name) for name in names], request_timeout=timeout_s
        )
        described: dict[str, tuple[dict[str, str], dict[str, str]]] = {}
        for resource, future in futures.items():
            try:
                entries = future.result(timeout=timeout_s + 5)
            except KafkaException as exc:
                if _kafka_error(exc).code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    # Deleted between listing and describing: report it as absent.
                    continue
                raise
            own: dict[str, str] = {}
            inherited: dict[str, str] = {}
            for key, entry in entries.items():
                if entry.value is None or entry.is_sensitive:
                    continue
                # Only DYNAMIC_TOPIC_CONFIG is the topic's own setting; note KRaft reports e.g.
                # min.insync.replicas as a non-default *cluster* config, which is not the topic's.
                target = own if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value else inherited
                target[key] = entry.value
            described[resource.name] = (own, inherited)
        return described

    return _call("describe topic configs", describe, servers, attempts)


def _wait_for_topics(client: AdminClient, partitions: Mapping[str, int], timeout_s: float) -> None:
    """Wait until metadata shows the new topics/partitions, so a re-run right after sees them."""
    if not partitions:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            topics = client.list_topics(timeout=min(5.0, timeout_s)).topics
        except KafkaException:
            topics = {}
        if all(
            name in topics and topics[name].error is None and len(topics[name].partitions) >= count
            for name, count in partitions.items()
        ):
            return
        time.sleep(0.2)
    log.warning(
        "metadata for %s not visible after %.0fs; a re-run will converge", sorted(partitions), timeout_s
    )


def _kafka_error(exc: KafkaException) -> KafkaError:
    error = exc.args[0] if exc.args else None
    if isinstance(error, KafkaError):
        return error
    return KafkaError(KafkaError._FAIL, str(exc))


def _describe_error(error: KafkaError) -> str:
    return f"{error.name()}: {error.str()}"
