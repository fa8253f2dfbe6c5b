"""The provision_topics DAG end to end: `dag.test()` against the session's real Kafka broker.

Each test writes its own copy of the shipped spec with topic names under a unique prefix and points
TOPIC_SPEC_PATH at it, so tests never see each other's topics on the shared broker. The broker
state is checked afterwards with a plain AdminClient, independent of the code under test.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from revenue_platform.errors import BrokerUnreachableError
from revenue_platform.kafka_connection import KafkaConnectionConfigError, broker_unreachable
from revenue_platform.paths import DAGS_DIR
from revenue_platform.topics.admin import ApplyResult, TopicApplyError, describe_cluster
from revenue_platform.topics.errors import DestructiveChangeRefused, TopicSpecError
from revenue_platform.topics.provision import load_spec_step
from revenue_platform.topics.spec import DEFAULT_SPEC_PATH

pytestmark = pytest.mark.integration

DAG_ID = "provision_topics"
SUCCESS = "success"
FAILED = "failed"
SKIPPED = "skipped"


@pytest.fixture(scope="module")
def provision_dag(airflow_db: Any) -> Any:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS_DIR / "provision_topics.py"))
    assert bag.import_errors == {}
    return bag.dags[DAG_ID]


@pytest.fixture
def admin(kafka_bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": kafka_bootstrap})


@pytest.fixture
def prefix() -> str:
    return f"it{uuid.uuid4().hex[:8]}_"


@pytest.fixture
def spec_file(tmp_path: Path, prefix: str, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Path]:
    """Write the shipped spec under this test's prefix (optionally edited) and point the DAG at it."""
    shipped = yaml.safe_load(DEFAULT_SPEC_PATH.read_text())
    path = tmp_path / "topics.yaml"
    monkeypatch.setenv("TOPIC_SPEC_PATH", str(path))

    def write(edit: Callable[[dict[str, Any]], None] | None = None) -> Path:
        document = yaml.safe_load(yaml.safe_dump(shipped))
        for topic in document["topics"]:
            topic["name"] = prefix + topic["name"]
        if edit is not None:
            edit(document)
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        return path

    write()
    return write


def topic_entry(document: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in document["topics"] if t["name"].endswith("_" + name))


# Every run passes every param: dag.test() runs tasks in this process against one DAG object, whose
# params keep the previous run's conf for keys a later run leaves out.
DEFAULT_CONF: dict[str, Any] = {
    "dry_run": False,
    "topics": [],
    "environment": "local",
    "allow_destructive": [],
}


def run_dag(dag: Any, **conf: Any) -> Any:
    return dag.test(run_conf={**DEFAULT_CONF, **conf})


def task_states(dag_run: Any) -> dict[str, str]:
    return {ti.task_id: ti.state for ti in dag_run.get_task_instances()}


def xcom(dag_run: Any, task_id: str) -> Any:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.scalars(
            XComModel.get_many(run_id=dag_run.run_id, dag_ids=DAG_ID, task_ids=task_id, key="return_value")
        ).first()
        assert row is not None, f"no XCom from {task_id}"
        return XComModel.deserialize_value(row)


def observed(admin: AdminClient, prefix: str) -> dict[str, dict[str, Any]]:
    """Partitions, replication factor and topic-level configs of every topic under ``prefix``."""
    metadata = admin.list_topics(timeout=10)
    names = sorted(name for name in metadata.topics if name.startswith(prefix))
    result: dict[str, dict[str, Any]] = {}
    if not names:
        return result
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, name) for name in names])
    for resource, future in futures.items():
        topic = metadata.topics[resource.name]
        result[resource.name] = {
            "partitions": len(topic.partitions),
            "replication_factor": max(len(p.replicas) for p in topic.partitions.values()),
            "configs": {
                key: entry.value
                for key, entry in future.result().items()
                if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
            },
        }
    return result


def set_topic_config(admin: AdminClient, topic: str, **configs: str) -> None:
    entries = [
        ConfigEntry(key.replace("_", "."), value, incremental_operation=AlterConfigOpType.SET)
        for key, value in configs.items()
    ]
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result()


@pytest.fixture(autouse=True)
def _delete_test_topics(admin: AdminClient, prefix: str) -> Iterator[None]:
    yield
    names = [name for name in admin.list_topics(timeout=10).topics if name.startswith(prefix)]
    if names:
        for future in admin.delete_topics(names).values():
            future.result()


def test_creates_every_spec_topic_on_an_empty_cluster_and_a_rerun_is_unchanged(
    provision_dag: Any, admin: AdminClient, prefix: str, spec_file: Callable[..., Path]
) -> None:
    assert observed(admin, prefix) == {}

    first = run_dag(provision_dag)

    assert first.state == SUCCESS, task_states(first)
    topics = observed(admin, prefix)
    shipped = {t["name"]: t for t in yaml.safe_load(DEFAULT_SPEC_PATH.read_text())["topics"]}
    assert sorted(topics) == sorted(prefix + name for name in shipped)
    for name, spec in shipped.items():
        topic = topics[prefix + name]
        assert topic["partitions"] == spec["partitions"], name
        assert topic["replication_factor"] == 1, name  # the local environment override
        assert topic["configs"]["min.insync.replicas"] == "1", name
        assert topic["configs"]["cleanup.policy"] == spec["configs"]["cleanup.policy"], name
    assert topics[prefix + "orders"]["configs"]["retention.ms"] == "604800000"
    assert xcom(first, "plan_changes")["summary"]["create"] == len(shipped)

    second = run_dag(provision_dag)

    assert second.state == SUCCESS, task_states(second)
    plan = xcom(second, "plan_changes")
    assert plan["summary"]["unchanged"] == len(shipped)
    assert plan["has_changes"] is False
    assert xcom(second, "apply_plan")["changed"] is False
    assert observed(admin, prefix) == topics


def test_a_partition_increase_in_the_spec_is_applied(
    provision_dag: Any, admin: AdminClient, prefix: str, spec_file: Callable[..., Path]
) -> None:
    assert run_dag(provision_dag).state == SUCCESS
    spec_file(lambda doc: topic_entry(doc, "orders").update(partitions=6))

    dag_run = run_dag(provision_dag)

    assert dag_run.state == SUCCESS, task_states(dag_run)
    orders = next(t for t in xcom(dag_run, "plan_changes")["topics"] if t["topic"] == prefix + "orders")
    assert orders["actions"] == ["increase_partitions"]
    assert observed(admin, prefix)[prefix + "orders"]["partitions"] == 6
    assert xcom(dag_run, "apply_plan")["partitions_increased"] == {prefix + "orders": [4, 6]}


def test_a_config_changed_by_hand_is_detected_and_converged(
    provision_dag: Any, admin: AdminClient, prefix: str, spec_file: Callable[..., Path]
) -> None:
    assert run_dag(provision_dag).state == SUCCESS
    orders = prefix + "orders"
    # retention.ms is declared in the spec; segment.ms is not and must be left alone.
    set_topic_config(admin, orders, retention_ms="1000", segment_ms="3600000")
    time.sleep(0.5)

    dag_run = run_dag(provision_dag)

    assert dag_run.state == SUCCESS, task_states(dag_run)
    change = next(t for t in xcom(dag_run, "plan_changes")["topics"] if t["topic"] == orders)
    assert change["actions"] == ["alter_configs"]
    assert [(d["key"], d["expected"], d["actual"]) for d in change["config_drift"]] == [
        ("retention.ms", "604800000", "1000")
    ]
    configs = observed(admin, prefix)[orders]["configs"]
    assert configs["retention.ms"] == "604800000"
    assert configs["segment.ms"] == "3600000"


def test_a_destructive_change_is_refused_and_nothing_is_applied_until_opted_in(
    provision_dag: Any, admin: AdminClient, prefix: str, spec_file: Callable[..., Path]
) -> None:
    assert run_dag(provision_dag).state == SUCCESS
    before = observed(admin, prefix)

    def edit(doc: dict[str, Any]) -> None:
        topic_entry(doc, "revenue_windows")["configs"]["cleanup.policy"] = "delete"  # drop compaction
        topic_entry(doc, "orders")["partitions"] = 2  # decrease: impossible in Kafka
        topic_entry(doc, "orders_dlq")["partitions"] = 3  # a safe change in the same run

    spec_file(edit)

    refused = run_dag(provision_dag)

    assert refused.state == FAILED
    states = task_states(refused)
    assert states["plan_changes"] == SUCCESS
    assert states["apply_plan"] == FAILED
    assert xcom(refused, "plan_changes")["blocking_refusals"] == 2
    # Nothing at all was applied, not even the safe partition increase.
    assert observed(admin, prefix) == before

    allowed = run_dag(provision_dag, allow_destructive=[prefix + "revenue_windows", prefix + "orders"])

    assert allowed.state == SUCCESS, task_states(allowed)
    after = observed(admin, prefix)
    assert after[prefix + "revenue_windows"]["configs"]["cleanup.policy"] == "delete"
    assert after[prefix + "orders"]["partitions"] == 4  # opted in, still impossible: skipped
    assert after[prefix + "orders_dlq"]["partitions"] == 3
    result = xcom(allowed, "apply_plan")
    assert any("decrease_partitions" in skipped for skipped in result["skipped"])


def test_an_invalid_spec_is_rejected_before_any_broker_call(
    provision_dag: Any,
    admin: AdminClient,
    prefix: str,
    spec_file: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    # Nothing listens on port 1: if any task reached for the broker it would fail differently, slowly.
    monkeypatch.setenv(
        "AIRFLOW_CONN_KAFKA_DEFAULT",
        '{"conn_type": "kafka", "extra": {"bootstrap.servers": "localhost:1"}}',
    )
    spec_file(lambda doc: topic_entry(doc, "orders").update(partitions=0))

    started = time.monotonic()
    dag_run = run_dag(provision_dag)

    assert dag_run.state == FAILED
    states = task_states(dag_run)
    assert states["load_spec"] == FAILED
    assert states["describe_cluster"] == "upstream_failed"
    assert time.monotonic() - started < 30
    task_log = "".join(capfd.readouterr())
    assert f"topic '{prefix}orders', field 'partitions'" in task_log
    assert "BrokerUnreachableError" not in task_log
    with pytest.raises(TopicSpecError, match=rf"topic '{prefix}orders', field 'partitions'"):
        load_spec_step()
    assert observed(admin, prefix) == {}


def test_dry_run_plans_but_changes_nothing(
    provision_dag: Any, admin: AdminClient, prefix: str, spec_file: Callable[..., Path]
) -> None:
    dag_run = run_dag(provision_dag, dry_run=True)

    assert dag_run.state == SUCCESS, task_states(dag_run)
    assert task_states(dag_run)["apply_plan"] == SKIPPED
    assert xcom(dag_run, "plan_changes")["summary"]["create"] == 6  # every topic of the shipped spec
    assert observed(admin, prefix) == {}


def test_the_topics_param_limits_the_run(
    provision_dag: Any, admin: AdminClient, prefix: str, spec_file: Callable[..., Path]
) -> None:
    dag_run = run_dag(provision_dag, topics=[prefix + "orders_dlq"])

    assert dag_run.state == SUCCESS, task_states(dag_run)
    assert sorted(observed(admin, prefix)) == [prefix + "orders_dlq"]


def test_the_cluster_environment_on_a_single_broker_fails_at_plan_time(
    provision_dag: Any, admin: AdminClient, prefix: str, spec_file: Callable[..., Path]
) -> None:
    dag_run = run_dag(provision_dag, environment="cluster")

    assert dag_run.state == FAILED
    states = task_states(dag_run)
    assert states["describe_cluster"] == SUCCESS
    assert states["plan_changes"] == FAILED
    assert observed(admin, prefix) == {}


def test_an_unreachable_broker_is_reported_with_the_servers_and_a_fix() -> None:
    started = time.monotonic()
    with pytest.raises(BrokerUnreachableError, match=r"localhost:1.*make kafka-up"):
        describe_cluster({"bootstrap.servers": "localhost:1"}, timeout_s=1, attempts=2)
    assert time.monotonic() - started < 15


def test_errors_that_retrying_cannot_fix_fail_the_task_at_once(provision_dag: Any) -> None:
    from airflow.sdk import RetryAction

    final = [
        TopicSpecError([]),
        DestructiveChangeRefused([]),
        broker_unreachable("localhost:1", "timed out"),
        KafkaConnectionConfigError("no bootstrap.servers"),
    ]
    transient = TopicApplyError({"create x": "REQUEST_TIMED_OUT"}, ApplyResult())
    for task in provision_dag.tasks:
        assert task.retries == 1
        for error in final:
            assert task.retry_policy.evaluate(error, 1, 2).action == RetryAction.FAIL, (task.task_id, error)
        assert task.retry_policy.evaluate(transient, 1, 2).action == RetryAction.DEFAULT
