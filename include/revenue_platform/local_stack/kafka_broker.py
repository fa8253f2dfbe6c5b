"""An Apache Kafka broker in KRaft mode (broker + controller in one JVM).

Alone (`make up`) it is a one-node cluster; with `quorum` set it is one node of a
multi-node cluster whose controllers form a static voter set (`make cluster-up`, three
nodes, see `cluster.py`). Run from the Maven-fetched jars, formatted on first start,
data and logs under the state dir. Start waits until the broker answers a metadata request; start and stop
are idempotent, and stop escalates from SIGTERM to SIGKILL only after a grace period.

With `BrokerSasl` the client listener is SASL_PLAINTEXT with SCRAM users created at format time,
the controller listener SASL_PLAINTEXT with the admin's PLAIN login, and ACLs are enforced (KRaft's
StandardAuthorizer, nothing allowed without an ACL; the admin is the only super user): a secured
cluster on one machine, which the tests use to prove the platform runs with credentials and that a
client without them is refused.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from revenue_platform import processes
from revenue_platform.errors import BrokerUnreachableError, ConfigError, PrerequisiteError
from revenue_platform.kafka_connection import without_consumer_settings
from revenue_platform.local_stack.prerequisites import require_free_disk, require_free_port, require_java
from revenue_platform.local_stack.service_jit import service_jit_options
from revenue_platform.paths import KAFKA_BROKER_JARS_DIR, state_dir


@dataclass(frozen=True)
class ScramUser:
    """A SCRAM login the broker knows from its first start."""

    name: str
    password: str = field(repr=False)


@dataclass(frozen=True)
class BrokerSasl:
    """SASL on both listeners (SCRAM for clients, PLAIN for the controller), and ACLs. `admin` is the
    only super user (and the broker's own login to both listeners); every other principal needs ACLs."""

    admin: ScramUser
    users: tuple[ScramUser, ...] = ()
    mechanism: str = "SCRAM-SHA-512"

    def client_config(self, user: ScramUser) -> dict[str, str]:
        """librdkafka settings to log in as `user`."""
        return {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": self.mechanism,
            "sasl.username": user.name,
            "sasl.password": user.password,
        }


@dataclass(frozen=True)
class KafkaBrokerSettings:
    """Where and how the local broker runs."""

    port: int = 9092
    """Client (PLAINTEXT) listener port on localhost; env KAFKA_PORT."""
    controller_port: int = 9093
    """KRaft controller listener port on localhost; env KAFKA_CONTROLLER_PORT."""
    data_dir: Path = Path(".local/kafka")
    """Log dirs, generated config, pid file and broker log; env KAFKA_DATA_DIR."""
    heap: str = "1g"
    """Maximum JVM heap (-Xmx); env KAFKA_HEAP."""
    jars_dir: Path = KAFKA_BROKER_JARS_DIR
    """Folder with the broker's classpath, fetched by `make jvm`."""
    node_id: int = 1
    """This node's id in the KRaft quorum."""
    quorum: tuple[tuple[int, int], ...] = ()
    """(node id, controller port) of every voter of a multi-node cluster; empty = a one-node cluster."""
    cluster_id: str | None = None
    """Shared cluster id every node of a multi-node cluster is formatted with (one-node: generated)."""
    sasl: BrokerSasl | None = None
    """None: a PLAINTEXT client listener without ACLs (the local stack); set: SASL/SCRAM and ACLs."""
    retention_ms: int | None = None
    """The broker's default `log.retention.ms` for topics that set none: None keeps Kafka's (7 days),
    -1 keeps records whatever their timestamps. Test brokers use -1: their fixtures carry fixed event
    times as Kafka timestamps, which a time-based retention would delete once the calendar passes them."""

    def __post_init__(self) -> None:
        if self.retention_ms is not None and self.retention_ms != -1 and self.retention_ms <= 0:
            raise ConfigError(
                f"retention_ms={self.retention_ms} is neither -1 (keep forever) nor a positive number of ms."
            )

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> KafkaBrokerSettings:
        """Read overrides from the environment, failing on a malformed value with its variable name."""
        env = dict(os.environ if environ is None else environ)
        return cls(
            port=_port(env, "KAFKA_PORT", 9092),
            controller_port=_port(env, "KAFKA_CONTROLLER_PORT", 9093),
            data_dir=Path(env.get("KAFKA_DATA_DIR", state_dir() / "kafka")),
            heap=env.get("KAFKA_HEAP", "1g"),
        )

    @property
    def bootstrap_servers(self) -> str:
        return f"localhost:{self.port}"

    def admin_client_config(self) -> dict[str, str]:
        """librdkafka settings of a client with every right on this broker (the SASL admin, if any)."""
        login = self.sasl.client_config(self.sasl.admin) if self.sasl is not None else {}
        return {"bootstrap.servers": self.bootstrap_servers, **login}


def _port(env: dict[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ConfigError(f"{name}={raw!r} is not a TCP port (1-65535).")
    return int(raw)


RETENTION_CHECK_INTERVAL_MS = 10_000
"""How often the local broker deletes segments past their retention."""
FIRST_RETENTION_CHECK_MS = 30_000
"""How long after its start the broker first checks retention (Kafka's default, stated here)."""


def server_properties(settings: KafkaBrokerSettings) -> str:
    """The broker's server.properties: a one-node KRaft cluster on localhost, or one node of a
    multi-node cluster (internal topics then get 3 replicas and a min ISR of 2, as the spec's
    `cluster` environment asks of the platform's topics)."""
    log_dirs = settings.data_dir / "data"
    replicas = str(min(3, len(settings.quorum))) if settings.quorum else "1"
    min_isr = "2" if settings.quorum and len(settings.quorum) >= 3 else "1"
    quorum = (
        {"controller.quorum.voters": ",".join(f"{node}@localhost:{port}" for node, port in settings.quorum)}
        if settings.quorum
        else {"controller.quorum.bootstrap.servers": f"localhost:{settings.controller_port}"}
    )
    lines = {
        "process.roles": "broker,controller",
        "node.id": str(settings.node_id),
        **quorum,
        "listeners": f"PLAINTEXT://localhost:{settings.port},CONTROLLER://localhost:{settings.controller_port}",
        "advertised.listeners": f"PLAINTEXT://localhost:{settings.port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(log_dirs),
        "num.partitions": "1",
        # One broker: internal topics cannot have more replicas than that.
        "offsets.topic.replication.factor": replicas,
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": min_isr,
        "share.coordinator.state.topic.replication.factor": replicas,
        "share.coordinator.state.topic.min.isr": min_isr,
        # Topics are infrastructure, created by the provision_topics DAG; a typo must fail, not create.
        "auto.create.topics.enable": "false",
        "group.initial.rebalance.delay.ms": "0",
        # Retention and compaction act within a minute locally, so retention tests stay short.
        "log.retention.check.interval.ms": str(RETENTION_CHECK_INTERVAL_MS),
        "log.initial.task.delay.ms": str(FIRST_RETENTION_CHECK_MS),
        "log.cleaner.backoff.ms": "5000",
    }
    if settings.retention_ms is not None:
        lines["log.retention.ms"] = str(settings.retention_ms)
    if settings.sasl is not None:
        lines.update(_sasl_properties(settings))
    return "\n".join(f"{key}={value}" for key, value in lines.items()) + "\n"


def _sasl_properties(settings: KafkaBrokerSettings) -> dict[str, str]:
    """SASL on both listeners, ACLs on, the admin the only super user.

    The client listener takes SCRAM (the broker logs in to it as the admin). The controller listener
    takes PLAIN with the admin's login alone: SCRAM credentials live in the metadata log, which a
    controller serves only after its listener is up, so KRaft cannot use SCRAM there. Without a login
    on that listener its principal is ANONYMOUS, which would then have to be a super user: anyone
    who reaches the controller port could grant themselves every ACL.
    """
    assert settings.sasl is not None
    sasl = settings.sasl
    admin = sasl.admin
    return {
        "listeners": f"SASL_PLAINTEXT://localhost:{settings.port},CONTROLLER://localhost:{settings.controller_port}",
        "advertised.listeners": f"SASL_PLAINTEXT://localhost:{settings.port}",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": sasl.mechanism,
        "sasl.mechanism.inter.broker.protocol": sasl.mechanism,
        f"listener.name.sasl_plaintext.{sasl.mechanism.lower()}.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{admin.name}" password="{admin.password}";'
        ),
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN",
        # username/password: the login this JVM's broker half uses; user_<name>: who the listener admits.
        "listener.name.controller.plain.sasl.jaas.config": (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            f'username="{admin.name}" password="{admin.password}" user_{admin.name}="{admin.password}";'
        ),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "super.users": f"User:{admin.name}",
    }


LOG4J2_PROPERTIES = """\
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
"""


class LocalKafkaBroker:
    """Start, stop and probe the local KRaft broker described by `settings`."""

    def __init__(self, settings: KafkaBrokerSettings) -> None:
        self.settings = settings
        self.config_path = settings.data_dir / "server.properties"
        self.log4j_path = settings.data_dir / "log4j2.properties"
        self.pid_path = settings.data_dir / "broker.pid"
        self.log_path = settings.data_dir / "broker.log"

    # --- probing -------------------------------------------------------------------------------
    def pid(self) -> int | None:
        """PID of our running broker, or None (a stale pid file is ignored)."""
        # This broker's own config path, not just "kafka.Kafka": pids get reused quickly (pid_max can be
        # 32768), and a stale pid file must never make us stop another stack's broker.
        return processes.read_live_pid(
            self.pid_path, expected_cmdline_fragment=f"kafka.Kafka {self.config_path}"
        )

    def answers_metadata(self, timeout_s: float = 3.0) -> bool:
        """True when the broker answers a metadata request within `timeout_s`."""
        return broker_answers_metadata(
            self.settings.bootstrap_servers, timeout_s, self.settings.admin_client_config()
        )

    # --- lifecycle -----------------------------------------------------------------------------
    def _classpath(self) -> str:
        if not any(self.settings.jars_dir.glob("kafka_2.13-*.jar")):
            raise PrerequisiteError(
                f"No Kafka broker jars in {self.settings.jars_dir}. Fetch them with `make jvm`."
            )
        return str(self.settings.jars_dir / "*")

    def _java(self, *args: str) -> list[str]:
        return [
            "java",
            *service_jit_options(),
            f"-Dlog4j2.configurationFile={self.log4j_path}",
            "-cp",
            self._classpath(),
            *args,
        ]

    def random_cluster_id(self) -> str:
        """A new KRaft cluster id from Kafka's own StorageTool."""
        return subprocess.run(
            self._java("kafka.tools.StorageTool", "random-uuid"),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()[-1]

    def _format_storage_once(self) -> None:
        if (self.settings.data_dir / "data" / "meta.properties").exists():
            return
        cluster_id = self.settings.cluster_id or self.random_cluster_id()
        # A static voter set (controller.quorum.voters) needs no --standalone bootstrap of the quorum.
        standalone = [] if self.settings.quorum else ["--standalone"]
        # SCRAM credentials of a KRaft cluster are bootstrapped into its metadata at format time.
        scram: list[str] = []
        if (sasl := self.settings.sasl) is not None:
            for user in (sasl.admin, *sasl.users):
                scram += ["--add-scram", f"{sasl.mechanism}=[name={user.name},password={user.password}]"]
        formatted = subprocess.run(
            self._java(
                "kafka.tools.StorageTool",
                "format",
                *standalone,
                "-t",
                cluster_id,
                "-c",
                str(self.config_path),
                *scram,
            ),
            capture_output=True,
            text=True,
            check=False,
        )
        if formatted.returncode != 0:
            raise PrerequisiteError(
                f"Formatting Kafka storage in {self.settings.data_dir} failed: "
                f"{(formatted.stdout + formatted.stderr).strip()[-2000:]}"
            )

    def start(
        self, timeout_s: float = 90.0, progress: Callable[[str], None] = print, wait: bool = True
    ) -> None:
        """Start the broker unless it already runs, and wait until it answers metadata requests.

        `wait=False` returns once the process is spawned: the nodes of a multi-node quorum must all
        be started before any of them can elect a controller and answer.
        """
        if self.pid() is not None and self.answers_metadata():
            progress(f"[kafka] already running on {self.settings.bootstrap_servers} (pid {self.pid()})")
            return
        spawned: int | None = None
        if self.pid() is None:
            require_java()
            service_jit_options()  # a bad STACK_SERVICES_JIT is refused before any file is written
            require_free_port(self.settings.port, "the Kafka broker", "KAFKA_PORT")
            require_free_port(self.settings.controller_port, "the Kafka controller", "KAFKA_CONTROLLER_PORT")
            self.settings.data_dir.mkdir(parents=True, exist_ok=True)
            require_free_disk(self.settings.data_dir)
            # 0600: with SASL it holds the admin's password.
            self.config_path.touch(mode=0o600)
            self.config_path.chmod(0o600)
            self.config_path.write_text(server_properties(self.settings))
            self.log4j_path.write_text(LOG4J2_PROPERTIES)
            self._format_storage_once()
            command = self._java("kafka.Kafka", str(self.config_path))
            command[1:1] = [
                f"-Xmx{self.settings.heap}",
                "-Xms256m",
                "-XX:+UseG1GC",
                "-Djava.awt.headless=true",
            ]
            spawned = processes.spawn_detached(command, self.pid_path, self.log_path)
            progress(f"[kafka] starting on {self.settings.bootstrap_servers}, log: {self.log_path}")
        if not wait:
            return
        with processes.stopped_if_never_ready(spawned, self.pid_path):
            self.wait_until_ready(timeout_s, progress, spawned)

    def wait_until_ready(
        self, timeout_s: float, progress: Callable[[str], None], spawned: int | None = None
    ) -> None:
        """Wait until the broker answers metadata requests. `spawned`: the pid this process just
        started (its child: alive until it exits, whatever its pid file and command line say)."""
        service = processes.StartingService("kafka", "the Kafka broker", self.log_path, spawned, self.pid)
        waited = processes.wait_until_answering(
            service, lambda: self.answers_metadata(timeout_s=2.0), timeout_s, progress
        )
        if waited is not None:
            progress(f"[kafka] ready on {self.settings.bootstrap_servers} after {waited:.0f}s")
            return
        raise BrokerUnreachableError(
            f"The broker on {self.settings.bootstrap_servers} did not answer within {timeout_s:.0f}s. "
            f"See {self.log_path}."
        )

    def stop(self, grace_s: float = 30.0, progress: Callable[[str], None] = print) -> None:
        """Stop the broker cleanly (SIGTERM, controlled shutdown), SIGKILL after `grace_s`."""
        processes.stop_recorded("kafka", self.pid(), self.pid_path, grace_s, progress)


def broker_answers_metadata(
    bootstrap_servers: str, timeout_s: float = 3.0, client_config: dict[str, str] | None = None
) -> bool:
    """True when `bootstrap_servers` answers a metadata request within `timeout_s` (logging in with
    `client_config`'s settings, if any)."""
    import logging

    from confluent_kafka.admin import AdminClient

    quiet = logging.getLogger("revenue_platform.kafka_probe")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    settings: dict[str, Any] = {
        **without_consumer_settings(client_config or {}),
        "bootstrap.servers": bootstrap_servers,
        "logger": quiet,
    }
    admin = AdminClient(settings)
    try:
        admin.list_topics(timeout=timeout_s)
    except Exception:
        return False
    return True
