"""The platform on a secured Kafka: SASL/SCRAM logins, ACLs enforced, credentials from the Airflow connection.

A broker of its own (`LocalKafkaBroker` with `BrokerSasl`): SCRAM users created at format time, an
admin super user, and a `platform` principal that may only do what the streaming app needs (its
topics; its consumer groups). The `kafka_default` connection holds the platform's login in its extra,
as an operator would configure it. The real DAGs deploy the app (a detached spark-submit), the
supervisor restarts it after it is killed, and gold must match the generator's oracle exactly; then
the password is looked for everywhere it must not be (task output and logs, registry rows, the
launched config file, driver logs, every driver process's command line) and found where it must be
(the driver's environment, readable only by its owner). Clients without the login, or with a wrong
password, are refused.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from revenue_platform import processes
from revenue_platform.local_stack.kafka_broker import (
    BrokerSasl,
    KafkaBrokerSettings,
    LocalKafkaBroker,
    ScramUser,
)
from revenue_platform.orders_generator import GeneratorSettings, generate_orders, generate_stores, produce
from revenue_platform.paths import state_dir
from revenue_platform.registry import DeploymentRegistry
from spark_apps.contract.kafka_security import KAFKA_SECURITY_ENV
from spark_apps.contract.naming import DeploymentNames, local_driver_dir
from tests.kafka_helpers import (
    APP_TOPIC_FIELDS,
    ClientLog,
    app_topic_overrides,
    create_app_topics,
    unique_suffix,
)
from tests.streaming_helpers import (
    DEPLOY_DEFAULTS,
    load_dags,
    spark_drivers,
    supervise,
    task_states,
    wait_for_gold,
    xcom,
)

pytestmark = pytest.mark.integration

SASL_PORT = int(os.environ.get("TEST_SASL_KAFKA_PORT", "19292"))
SUCCESS = "success"


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBrokerSettings]:
    """A SASL/SCRAM broker with ACLs, fresh for this module, stopped at the end whatever happened."""
    sasl = BrokerSasl(
        admin=ScramUser("admin", secrets.token_urlsafe(16)),
        users=(ScramUser("platform", secrets.token_urlsafe(16)),),
    )
    settings = KafkaBrokerSettings(
        port=SASL_PORT,
        controller_port=SASL_PORT + 1,
        data_dir=tmp_path_factory.mktemp("sasl-kafka"),
        heap="512m",
        sasl=sasl,
        retention_ms=-1,  # as the session's broker: test records never age out (docs/testing.md)
    )
    broker = LocalKafkaBroker(settings)
    try:
        broker.start()
        yield settings
    finally:
        broker.stop()


def platform_user(settings: KafkaBrokerSettings) -> ScramUser:
    assert settings.sasl is not None
    return settings.sasl.users[0]


def grant_platform_acls(settings: KafkaBrokerSettings, topics: list[str], deployment_id: str) -> None:
    """What the streaming app needs, nothing more: read/write/describe its topics; read its groups;
    write its revenue topic's transactional id."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    principal = f"User:{platform_user(settings).name}"

    def allow(kind: Any, name: str, pattern: Any, operation: Any) -> AclBinding:
        return AclBinding(kind, name, pattern, principal, "*", operation, AclPermissionType.ALLOW)

    bindings = [
        allow(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, operation)
        for topic in topics
        for operation in (AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE)
    ]
    bindings += [
        # Spark's Kafka source and batch reads name their own groups spark-kafka-source-*/-relation-*.
        allow(ResourceType.GROUP, "spark-kafka-", ResourcePatternType.PREFIXED, AclOperation.READ),
        # The app commits processed offsets to its deployment's group (lag tools read it).
        allow(
            ResourceType.GROUP,
            DeploymentNames("unused", deployment_id).consumer_group,
            ResourcePatternType.LITERAL,
            AclOperation.READ,
        ),
        allow(ResourceType.GROUP, "stores-watermarks", ResourcePatternType.LITERAL, AclOperation.READ),
    ]
    # The streaming driver's transactional producer of the revenue topic (spark_apps.storage.revenue_topic).
    bindings += [
        allow(
            ResourceType.TRANSACTIONAL_ID,
            DeploymentNames("unused", deployment_id).revenue_producer_id,
            ResourcePatternType.LITERAL,
            operation,
        )
        for operation in (AclOperation.WRITE, AclOperation.DESCRIBE)
    ]
    admin = AdminClient(settings.admin_client_config())
    for future in admin.create_acls(bindings).values():
        future.result(timeout=30)
    # ACLs reach the broker's authorizer through the metadata log: wait until the platform sees its topics.
    assert settings.sasl is not None
    platform = AdminClient(
        {
            "bootstrap.servers": settings.bootstrap_servers,
            **settings.sasl.client_config(platform_user(settings)),
        }
    )
    deadline = time.monotonic() + 30
    while not set(topics) <= set(platform.list_topics(timeout=10).topics):
        assert time.monotonic() < deadline, "the platform's ACLs did not take effect within 30 s"
        time.sleep(0.5)


def kafka_connection(settings: KafkaBrokerSettings, password: str) -> str:
    """AIRFLOW_CONN_KAFKA_DEFAULT as an operator writes it: librdkafka settings in the extra."""
    extra = {
        "bootstrap.servers": settings.bootstrap_servers,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": platform_user(settings).name,
        "sasl.password": password,
        "group.id": "airflow-control-plane",
    }
    return json.dumps({"conn_type": "kafka", "extra": extra})


def refusal(client_config: dict[str, str]) -> str:
    """Why a librdkafka client's metadata request failed: the error and the client's log ('' if answered)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    collected = ClientLog()
    admin = AdminClient({**client_config, "logger": collected.logger})
    try:
        admin.list_topics(timeout=8)
    except KafkaException as error:
        admin.poll(1)  # serves the log callbacks queued meanwhile
        return " ".join([str(error), *collected.lines])
    return ""


def test_clients_without_the_platform_login_are_refused(sasl_broker: KafkaBrokerSettings) -> None:
    servers = {"bootstrap.servers": sasl_broker.bootstrap_servers}
    assert sasl_broker.sasl is not None
    user = platform_user(sasl_broker)

    assert refusal(sasl_broker.admin_client_config()) == "", "the check needs a broker that answers"
    assert "Broker transport failure" in refusal(servers)
    wrong = sasl_broker.sasl.client_config(ScramUser(user.name, "not-" + user.password))
    assert "invalid credentials" in refusal({**servers, **wrong})

    # Logged in, the platform sees only what an ACL grants it: no topic of anyone else's.
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(sasl_broker.admin_client_config())
    for future in admin.create_topics([NewTopic(f"private_{unique_suffix()}", 1, 1)]).values():
        future.result(timeout=30)
    platform = AdminClient({**servers, **sasl_broker.sasl.client_config(user)})
    assert platform.list_topics(timeout=10).topics == {}


def _acl_command(settings: KafkaBrokerSettings, *arguments: str) -> subprocess.CompletedProcess[str]:
    """Kafka's AclCommand straight to the controller listener (`--bootstrap-controller`), with no login:
    what anyone who can reach the controller port can try."""
    from revenue_platform.paths import KAFKA_TOOLS_JARS_DIR

    quick = Path(tempfile.mkdtemp()) / "client.properties"
    # Fail within seconds when the listener does not talk to an unauthenticated client.
    quick.write_text("request.timeout.ms=5000\ndefault.api.timeout.ms=10000\n")
    command = [
        "java",
        "-Xmx128m",
        "-cp",
        str(KAFKA_TOOLS_JARS_DIR / "*"),
        "org.apache.kafka.tools.AclCommand",
        "--bootstrap-controller",
        f"localhost:{settings.controller_port}",
        "--command-config",
        str(quick),
        *arguments,
    ]
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except subprocess.TimeoutExpired as hung:
        return subprocess.CompletedProcess(command, -1, str(hung.stdout), str(hung.stderr))


def test_the_controller_listener_makes_no_anonymous_super_user(sasl_broker: KafkaBrokerSettings) -> None:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    intruder = f"User:intruder_{unique_suffix()}"
    granted = _acl_command(
        sasl_broker, "--add", "--allow-principal", intruder, "--operation", "All", "--topic", "*"
    )
    assert granted.returncode != 0, granted.stdout + granted.stderr

    # Whatever the tool said: the cluster holds no ACL for the intruder.
    every = AclBindingFilter(
        ResourceType.ANY,
        None,
        ResourcePatternType.ANY,
        intruder,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    admin = AdminClient(sasl_broker.admin_client_config())
    assert admin.describe_acls(every).result(timeout=30) == []


def _texts_under(root: Path) -> dict[str, str]:
    """Every file under `root` as text (binary files decoded loosely: a secret in clear still shows)."""
    return {
        str(path): path.read_bytes().decode("utf-8", errors="replace")
        for path in root.rglob("*")
        if path.is_file()
    }


def _where(password: str, texts: dict[str, str]) -> list[str]:
    return [name for name, text in texts.items() if password in text]


def test_the_platform_runs_with_the_connection_s_credentials_which_are_never_written_down(
    sasl_broker: KafkaBrokerSettings,
    airflow_db: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    assert sasl_broker.sasl is not None
    user = platform_user(sasl_broker)
    login = {"bootstrap.servers": sasl_broker.bootstrap_servers, **sasl_broker.sasl.client_config(user)}
    suffix = unique_suffix()
    deployment_id = f"sasl{suffix}"
    lake = str(tmp_path / "lake")
    monkeypatch.setenv("PLATFORM_LAKE_ROOT", lake)
    monkeypatch.setenv("AIRFLOW_CONN_KAFKA_DEFAULT", kafka_connection(sasl_broker, user.password))
    create_app_topics(sasl_broker.bootstrap_servers, suffix, client_config=sasl_broker.admin_client_config())
    topics = [f"{base}_{suffix}" for base in APP_TOPIC_FIELDS.values()]
    grant_platform_acls(sasl_broker, topics, deployment_id)
    overrides = {**app_topic_overrides(suffix), "trigger.interval": "2 seconds", "shuffle_partitions": 2}
    first = list(
        generate_orders(GeneratorSettings(orders=150, stores=3, span_seconds=60, duplicate_every=20))
    )
    produce(
        sasl_broker.bootstrap_servers, overrides["kafka.stores_topic"], generate_stores(3), extra_config=login
    )
    produce(sasl_broker.bootstrap_servers, overrides["kafka.orders_topic"], first, extra_config=login)
    dags = load_dags("deploy_streaming_app", "supervise_streaming_apps", "stop_streaming_app")
    registry = DeploymentRegistry(lake)
    driver_group_commands: list[str] = []
    driver_environ_modes: list[int] = []
    try:
        # 1. deploy through the DAG: servers and login from kafka_default; gold exact.
        run = dags["deploy_streaming_app"].test(
            run_conf={**DEPLOY_DEFAULTS, "deployment_id": deployment_id, "config_overrides": overrides}
        )
        assert run.state == SUCCESS, task_states(run)
        record = registry.get(deployment_id)
        assert record.driver_pid is not None
        wait_for_gold(registry, deployment_id, first)
        members = processes.group_members(os.getpgid(record.driver_pid))
        driver_group_commands += [processes.cmdline(pid) for pid in members]
        # The login reached the driver in its environment, which only its owner can read.
        environments = [processes.environment(pid) for pid in members]
        assert any(
            KAFKA_SECURITY_ENV in env and user.password in env[KAFKA_SECURITY_ENV] for env in environments
        )
        driver_environ_modes += [stat.S_IMODE(os.stat(f"/proc/{pid}/environ").st_mode) for pid in members]

        # 2. the driver is killed; the supervisor's restart authenticates the same way.
        os.killpg(os.getpgid(record.driver_pid), signal.SIGKILL)
        deadline = time.monotonic() + 30
        while processes.is_alive(record.driver_pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        second = list(
            generate_orders(
                GeneratorSettings(
                    orders=100,
                    stores=3,
                    start=GeneratorSettings().start + timedelta(seconds=60),
                    span_seconds=30,
                    seed=5,
                    first_order_id=200_000,
                )
            )
        )
        produce(sasl_broker.bootstrap_servers, overrides["kafka.orders_topic"], second, extra_config=login)
        run = supervise(dags, deployment_id)
        assert run.state == SUCCESS, task_states(run)
        [entry] = xcom(run, "supervise")["deployments"]
        assert entry["action"] == "restart", entry
        assert entry["start_error"] is None, entry["start_error"]
        restarted = registry.get(deployment_id)
        assert restarted.driver_pid is not None
        wait_for_gold(registry, deployment_id, first + second)
        driver_group_commands += [
            processes.cmdline(pid) for pid in processes.group_members(os.getpgid(restarted.driver_pid))
        ]

        run = dags["stop_streaming_app"].test(run_conf={"deployment_id": deployment_id, "timeout_s": 60})
        assert run.state == SUCCESS, task_states(run)
    finally:
        for pid in spark_drivers(lake):
            processes.terminate(pid, 5.0)

    # 3. the password is nowhere it must not be.
    assert driver_environ_modes
    assert all(mode & 0o077 == 0 for mode in driver_environ_modes), driver_environ_modes
    assert len(driver_group_commands) >= 4, "spark-submit JVM and Python driver, twice"
    assert [c for c in driver_group_commands if user.password in c] == []
    task_output = "".join(capfd.readouterr())
    assert "[deploy]" in task_output, "the deploy task's output was captured"
    assert user.password not in task_output
    airflow_logs = _texts_under(airflow_db.home / "logs") if (airflow_db.home / "logs").exists() else {}
    assert _where(user.password, airflow_logs) == []
    registry_rows = [repr(row) for row in registry.deployments()] + [repr(e) for e in registry.events()]
    assert any(deployment_id in row for row in registry_rows)
    assert [row for row in registry_rows if user.password in row] == []
    run_dir = Path(local_driver_dir(str(state_dir()), deployment_id))
    run_files = _texts_under(run_dir)
    assert any("config-" in name for name in run_files), run_files.keys()
    assert any("driver-" in name for name in run_files), run_files.keys()
    assert _where(user.password, run_files) == []
    assert _where(user.password, _texts_under(Path(lake))) == []
    for name, text in run_files.items():
        if "config-" in name:
            kafka = json.loads(text)["kafka"]
            assert "security" not in kafka, name
            assert kafka["options"] == {}, name
            assert kafka["bootstrap_servers"] == sasl_broker.bootstrap_servers, "servers from kafka_default"
