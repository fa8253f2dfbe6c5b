"""The four steps of the ``provision_topics`` DAG, as plain functions over JSON-serialisable payloads.

Each step takes and returns dicts so the DAG can pass them through XCom unchanged, and so the steps
can be run and tested without Airflow: ``load_spec_step`` validates the spec and the run's request
(environment, topic selection, destructive opt-ins) without touching Kafka; ``describe_cluster_step``
reads the cluster; ``plan_changes_step`` diffs (pure); ``apply_plan_step`` changes the cluster. The
Airflow connection is read only in the steps that talk to Kafka, so a broken spec is reported even
when the connection or broker is broken too.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from revenue_platform.kafka_connection import DEFAULT_KAFKA_CONN_ID, client_config_from_connection
from revenue_platform.topics.errors import DestructiveChangeRefused, SpecIssue, TopicSpecError
from revenue_platform.topics.plan import ObservedTopic, TopicPlan, compute_plan
from revenue_platform.topics.spec import (
    TopicSpec,
    default_spec_path,
    load_topic_spec,
    resolve_environment,
    select_topics,
)

log = logging.getLogger(__name__)


def load_spec_step(
    environment: str | None = None,
    topics: Sequence[str] | None = None,
    allow_destructive: Sequence[str] | None = None,
    spec_path: str | Path | None = None,
) -> dict[str, Any]:
    """Validate the spec and the run's request; return the selected, resolved topics as a payload.

    ``spec_path`` defaults to ``$TOPIC_SPEC_PATH`` or ``include/topics/topics.yaml``; ``environment``
    to ``$PLATFORM_ENV`` or ``local``. Raises ``TopicSpecError``; never contacts Kafka.
    """
    path = Path(spec_path) if spec_path else default_spec_path()
    env = resolve_environment(environment)
    specs = load_topic_spec(path, env)
    selected = select_topics(specs, topics)
    declared = {spec.name for spec in specs}
    unknown_opt_ins = sorted(set(allow_destructive or []) - declared)
    if unknown_opt_ins:
        # A typo here would silently leave the intended topic blocked; say so instead.
        raise TopicSpecError(
            [SpecIssue(name, "allow_destructive", "not declared in the spec") for name in unknown_opt_ins],
            str(path),
        )
    log.info(
        "Topic spec %s is valid for environment %r: %d topic(s) selected: %s",
        path,
        env,
        len(selected),
        ", ".join(spec.name for spec in selected),
    )
    return {
        "spec_path": str(path),
        "environment": env,
        "topics": [spec.to_dict() for spec in selected],
        "allow_destructive": sorted(set(allow_destructive or [])),
    }


def describe_cluster_step(
    spec_payload: Mapping[str, Any], conn_id: str = DEFAULT_KAFKA_CONN_ID
) -> dict[str, Any]:
    """Describe the brokers and the spec's topics through Airflow connection ``conn_id``."""
    # Imported here: confluent_kafka is heavy and only needed by the steps that reach the broker.
    from revenue_platform.topics.admin import describe_cluster

    names = [str(topic["name"]) for topic in spec_payload["topics"]]
    state = describe_cluster(client_config_from_connection(conn_id), names)
    log.info(
        "Cluster %s: %d live broker(s); %d of %d spec topic(s) exist",
        state.cluster_id,
        state.broker_count,
        len(state.topics),
        len(names),
    )
    return state.to_dict()


def plan_changes_step(spec_payload: Mapping[str, Any], cluster_payload: Mapping[str, Any]) -> TopicPlan:
    """Diff the spec payload against the cluster payload (pure; see ``compute_plan``)."""
    desired = [TopicSpec.from_dict(topic) for topic in spec_payload["topics"]]
    observed = {
        name: ObservedTopic.from_dict(topic)
        for name, topic in dict(cluster_payload.get("topics", {})).items()
    }
    return compute_plan(
        desired,
        observed,
        int(cluster_payload["broker_count"]),
        set(spec_payload.get("allow_destructive", [])),
    )


def apply_plan_step(plan_payload: Mapping[str, Any], conn_id: str = DEFAULT_KAFKA_CONN_ID) -> dict[str, Any]:
    """Apply a plan payload (from ``TopicPlan.to_dict``) through Airflow connection ``conn_id``.

    Raises ``DestructiveChangeRefused`` before reading the connection when the plan has refused
    changes nobody opted in to; nothing is changed in that case.
    """
    from revenue_platform.topics.admin import ApplyResult, apply_plan

    plan = TopicPlan.from_dict(plan_payload)
    blocking = plan.blocking_refusals
    if blocking:
        raise DestructiveChangeRefused(blocking)
    for refusal in plan.skipped_refusals:
        log.warning("Skipping %s", refusal.describe())
    if not plan.has_changes:
        log.info("Nothing to apply: every selected topic matches the spec.")
        result = ApplyResult(skipped=[refusal.describe() for refusal in plan.skipped_refusals])
        return result.to_dict()
    result = apply_plan(client_config_from_connection(conn_id), plan)
    log.info("%s", result.render())
    return result.to_dict()
