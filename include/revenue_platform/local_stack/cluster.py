"""A small real cluster on one machine: Spark standalone (1 master + 2 workers) and 3 KRaft brokers.

`make cluster-up` starts it without Docker: the master and workers are the pyspark
distribution's own daemons (`spark-class org.apache.spark.deploy.master.Master` /
`...worker.Worker`), the brokers are three `LocalKafkaBroker` nodes with their own ports and
data dirs forming one controller quorum. Everything binds loopback (SPARK_LOCAL_IP,
`--host 127.0.0.1`, Kafka listeners on localhost). Airflow is the same control plane as
`make up`'s; only its connections differ: `spark_default` points at `spark://127.0.0.1:<port>`
(client deploy mode, see docs/cluster.md), `kafka_default` at the three brokers, and
`PLATFORM_ENV=cluster` makes topic provisioning use the spec's `cluster` environment
(replication factor 3, min ISR 2). The topics are converged once at start-up as well.

While the cluster runs, a marker file (`<state dir>/cluster/cluster.json`) tells `make up`,
`make demo` and `make status` to use it instead of the one-broker stack, and gives it a lake of
its own (`revenue_platform.paths.lake_root` reads it from the marker).

By default the cluster shares no disk for its lake either: it starts its own S3 object store
(`local_stack.object_store`, S3Proxy, on its own port with its data under the cluster's state dir) and
its lake is `s3a://<bucket>/lake` there, recorded in the marker. CLUSTER_LAKE=local is the way back to
a lake in a folder of the state dir (`<state dir>/cluster/lake`), no store started.
On the store, the workers start with the store's credentials in their environment, read from the store's
0600 credentials file: executors inherit their worker's environment, which is how S3A's
`EnvironmentVariableCredentialsProvider` finds them on each worker without them ever travelling in
Spark's configuration (`spark.executorEnv.*` would put them in the app's conf, its UI and event log).
Each worker has its own work dir (SPARK_WORKER_DIR, `--work-dir`) and its own scratch dirs
(SPARK_LOCAL_DIRS: shuffle and spill files of its executors) under its folder in the state dir.

Only holders of the cluster's secret may use it: the master, the workers and every application
authenticate with `spark.authenticate` and one shared secret, generated once into
`<home>/spark-conf/spark-defaults.conf` (0600 in a 0700 folder). Daemons and drivers find it through
SPARK_CONF_DIR (`client_environment`: Airflow's tasks get it while the cluster runs), so the secret is
on no command line; executors get it from their worker's environment (Spark's `_SPARK_AUTH_SECRET`).
An application without it never registers ("Failed to connect to master"): another local account
cannot run code on the workers, which hold the object store's keys.

Each worker advertises 1 core and 1 GiB; the master gives an application 1 core unless it
asks for more (`spark.deploy.defaultCores`), so two deployments (blue and green) fit at once
and an application whose worker dies gets its executor back on the other one.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from revenue_platform import processes
from revenue_platform.errors import ConfigError, PrerequisiteError
from revenue_platform.local_object_store import ObjectStoreSettings, local_lake_object_store
from revenue_platform.local_stack.kafka_broker import KafkaBrokerSettings, LocalKafkaBroker
from revenue_platform.local_stack.object_store import LocalObjectStore
from revenue_platform.local_stack.prerequisites import require_free_disk, require_free_port, require_java
from revenue_platform.local_stack.service_jit import service_jit_options, with_service_jit
from revenue_platform.paths import CLUSTER_MARKER_FILE, REPO_ROOT, cluster_state_dir, running_cluster_marker
from revenue_platform.private_files import private_text

LOOPBACK = "127.0.0.1"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
# The master and worker daemons themselves are small; executors get the worker's memory.
DAEMON_MEMORY = "256m"
# Where the cluster's lake lives (env CLUSTER_LAKE): a folder in its state dir, or its own object store.
LOCAL_LAKE = "local"
OBJECT_STORE_LAKE = "object-store"
LAKE_CHOICES = (LOCAL_LAKE, OBJECT_STORE_LAKE)
# What `make cluster-up` starts when CLUSTER_LAKE is not set: a cluster of several machines can share no
# local disk, so the one on this machine does not lean on one either.
DEFAULT_CLUSTER_LAKE = OBJECT_STORE_LAKE


def _port(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ConfigError(f"{name}={raw!r} is not a TCP port (1-65535).")
    return int(raw)


@dataclass(frozen=True)
class ClusterSettings:
    """Ports, sizes and folders of the one-machine cluster."""

    home: Path
    """Broker data dirs, Spark work dirs, logs, pid files and the marker; `<state dir>/cluster`."""
    spark_master_port: int = 7077
    """Master RPC port; env SPARK_MASTER_PORT."""
    spark_master_webui_port: int = 8180
    """Master web UI (JSON status at /json); env SPARK_MASTER_WEBUI_PORT."""
    spark_worker_base_port: int = 7078
    """Worker i (from 0) listens on base+i; env SPARK_WORKER_BASE_PORT."""
    spark_worker_webui_base_port: int = 8181
    """Worker i's web UI on base+i; env SPARK_WORKER_WEBUI_BASE_PORT."""
    workers: int = 2
    worker_cores: int = 1
    worker_memory: str = "1g"
    """Each worker's memory for executors; env SPARK_WORKER_MEMORY."""
    kafka_base_port: int = 9192
    """Broker i's client port is base+i, its controller port base+brokers+i; env CLUSTER_KAFKA_BASE_PORT."""
    brokers: int = 3
    kafka_heap: str = "512m"
    """Each broker's JVM heap; env CLUSTER_KAFKA_HEAP."""
    lake: str = LOCAL_LAKE
    """`local` (`<home>/lake`) or `object-store` (its own S3 store, lake `s3a://<bucket>/lake`). From the
    environment (`from_env`, what `make cluster-up` reads): CLUSTER_LAKE, else what the running cluster's
    marker records, else `object-store` (DEFAULT_CLUSTER_LAKE). A cluster laid out by number alone
    (`from_base_port`: the cluster benchmark's) keeps `local`: its runs name lakes of their own."""
    object_store_port: int = 9420
    """The cluster's object store (when its lake is on one); env CLUSTER_OBJECT_STORE_PORT."""
    object_store_bucket: str = "lake"
    """Its bucket; env OBJECT_STORE_BUCKET."""
    base_port_variable: str | None = None
    """The variable whose one number lays out every port (`from_base_port`), which a port taken
    names as the way to move them; None: each port's own variable (above) moves it."""

    @classmethod
    def from_base_port(cls, home: Path, base: int, base_port_variable: str) -> ClusterSettings:
        """Every port laid out from one number: master `base`, its UI +1, workers +2.., their UIs
        +4.., brokers +10.., controllers +13..; a second cluster next to the first (the fault tests',
        the cluster benchmark's). `base_port_variable` is where `base` came from."""
        return cls(
            home=home,
            spark_master_port=base,
            spark_master_webui_port=base + 1,
            spark_worker_base_port=base + 2,
            spark_worker_webui_base_port=base + 4,
            kafka_base_port=base + 10,
            object_store_port=base + 20,
            base_port_variable=base_port_variable,
        )

    @classmethod
    def from_env(cls) -> ClusterSettings:
        """Ports from the environment. CLUSTER_BASE_PORT=<p> lays every port out from one number
        (`from_base_port`), e.g. for a second cluster next to the first; the single variables still win."""
        base = _port("CLUSTER_BASE_PORT", 0)
        home = cluster_state_dir()
        laid_out = cls.from_base_port(home, base, "CLUSTER_BASE_PORT") if base else cls(home=home)
        return replace(
            laid_out,
            # Each port's own variable wins over the base here, so it is the one to name.
            base_port_variable=None,
            spark_master_port=_port("SPARK_MASTER_PORT", laid_out.spark_master_port),
            spark_master_webui_port=_port("SPARK_MASTER_WEBUI_PORT", laid_out.spark_master_webui_port),
            spark_worker_base_port=_port("SPARK_WORKER_BASE_PORT", laid_out.spark_worker_base_port),
            spark_worker_webui_base_port=_port(
                "SPARK_WORKER_WEBUI_BASE_PORT", laid_out.spark_worker_webui_base_port
            ),
            worker_memory=os.environ.get("SPARK_WORKER_MEMORY", laid_out.worker_memory),
            kafka_base_port=_port("CLUSTER_KAFKA_BASE_PORT", laid_out.kafka_base_port),
            kafka_heap=os.environ.get("CLUSTER_KAFKA_HEAP", laid_out.kafka_heap),
            lake=_lake_from_env(),
            object_store_port=_port("CLUSTER_OBJECT_STORE_PORT", laid_out.object_store_port),
            object_store_bucket=os.environ.get("OBJECT_STORE_BUCKET", laid_out.object_store_bucket),
        )

    @property
    def on_object_store(self) -> bool:
        return self.lake == OBJECT_STORE_LAKE

    @property
    def object_store(self) -> ObjectStoreSettings:
        """The cluster's own object store: its port, its bucket, its data under `<home>/object-store`."""
        return ObjectStoreSettings.from_env(
            {
                "OBJECT_STORE_PORT": str(self.object_store_port),
                "OBJECT_STORE_DATA_DIR": str(self.home / "object-store"),
                "OBJECT_STORE_BUCKET": self.object_store_bucket,
            }
        )

    @property
    def lake_root(self) -> str:
        """The cluster's lake: `s3a://<bucket>/lake` on its store, or `<home>/lake`."""
        return self.object_store.lake_root if self.on_object_store else str(self.home / "lake")

    def worker_local_dir(self, index: int) -> Path:
        """Worker i's SPARK_LOCAL_DIRS: its executors' shuffle and spill files, on its own disk."""
        return self.home / f"spark-worker-{index + 1}" / "local"

    @property
    def spark_master_url(self) -> str:
        return f"spark://{LOOPBACK}:{self.spark_master_port}"

    @property
    def master_status_url(self) -> str:
        return f"http://{LOOPBACK}:{self.spark_master_webui_port}/json/"

    def broker_port(self, index: int) -> int:
        return self.kafka_base_port + index

    def controller_port(self, index: int) -> int:
        return self.kafka_base_port + self.brokers + index

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"localhost:{self.broker_port(i)}" for i in range(self.brokers))

    def broker_settings(self, index: int, cluster_id: str | None) -> KafkaBrokerSettings:
        return KafkaBrokerSettings(
            port=self.broker_port(index),
            controller_port=self.controller_port(index),
            data_dir=self.home / f"kafka-{index + 1}",
            heap=self.kafka_heap,
            node_id=index + 1,
            quorum=tuple((i + 1, self.controller_port(i)) for i in range(self.brokers)),
            cluster_id=cluster_id,
        )

    @property
    def marker_path(self) -> Path:
        return self.home / CLUSTER_MARKER_FILE

    @property
    def spark_conf_dir(self) -> Path:
        """SPARK_CONF_DIR of the daemons and of every driver using the cluster: its spark-defaults.conf
        holds the cluster's authentication secret (`ensure_spark_auth_conf`)."""
        return self.home / "spark-conf"


SPARK_DEFAULTS_FILE = "spark-defaults.conf"
SPARK_AUTH_SECRET_BYTES = 32


def ensure_spark_auth_conf(conf_dir: Path) -> Path:
    """`<conf_dir>/spark-defaults.conf` with `spark.authenticate` and a secret of
    SPARK_AUTH_SECRET_BYTES random bytes, generated once (0600, O_EXCL: two starts at once never
    write two secrets; an existing file is kept, its mode tightened). Also switches off the master
    UI's kill links: its web port has no login."""
    conf_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(conf_dir, 0o700)  # also a folder an earlier start left wider
    path = conf_dir / SPARK_DEFAULTS_FILE
    private_text(
        path,
        lambda: (
            "# Generated by `make cluster-up`; the cluster's shared secret. Keep it 0600.\n"
            "spark.authenticate true\n"
            f"spark.authenticate.secret {secrets.token_hex(SPARK_AUTH_SECRET_BYTES)}\n"
            "spark.ui.killEnabled false\n"
        ),
    )
    return path


def _lake_from_env() -> str:
    """CLUSTER_LAKE, else the lake the running cluster was started with (so `make demo` or `make status`
    after `make cluster-up CLUSTER_LAKE=local` need not repeat it), else DEFAULT_CLUSTER_LAKE."""
    raw = os.environ.get("CLUSTER_LAKE")
    if not raw:
        marker = running_cluster_marker()
        if marker is None:
            return DEFAULT_CLUSTER_LAKE
        # A marker that records no lake was written before the lake could be chosen: its lake is local.
        recorded = marker.get("lake")
        return recorded if isinstance(recorded, str) and recorded in LAKE_CHOICES else LOCAL_LAKE
    if raw not in LAKE_CHOICES:
        raise ConfigError(f"CLUSTER_LAKE={raw!r} is not one of {', '.join(LAKE_CHOICES)}.")
    return raw


def spark_home() -> Path:
    """The pyspark distribution's SPARK_HOME (bin/spark-class, jars/)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class SparkDaemon:
    """One standalone master or worker JVM, detached, with a pid file and a log."""

    def __init__(self, name: str, main_class: str, arguments: list[str], settings: ClusterSettings) -> None:
        self.name = name
        self.main_class = main_class
        self.arguments = arguments
        self.settings = settings
        self.pid_path = settings.home / f"{name}.pid"
        self.log_path = settings.home / f"{name}.log"

    def pid(self) -> int | None:
        # Class and own port: a recycled pid, or another stack's daemon, is never ours.
        fragment = f"{self.main_class} {' '.join(self.arguments[:4])}"
        return processes.read_live_pid(self.pid_path, expected_cmdline_fragment=fragment)

    def start(self, env: dict[str, str]) -> None:
        if self.pid() is not None:
            return
        command = [str(spark_home() / "bin" / "spark-class"), self.main_class, *self.arguments]
        # spark-class execs the JVM, so the spawned pid is the daemon itself.
        processes.spawn_detached(command, self.pid_path, self.log_path, env=env, cwd=self.settings.home)

    def kill_with_children(self) -> int | None:
        """SIGKILL the daemon's whole process group (a worker's executors too): a lost machine."""
        pid = self.pid()
        if pid is None:
            return None
        os.killpg(os.getpgid(pid), signal.SIGKILL)
        return pid

    def spawned_alive(self) -> bool:
        """Whether the process we spawned still runs (during start-up its command line changes:
        spark-class is a shell script that execs the JVM, so `pid()` may briefly not match)."""
        try:
            return processes.is_alive(int(self.pid_path.read_text().strip()))
        except (OSError, ValueError):
            return False

    def stop(self, grace_s: float = 20.0) -> None:
        pid = self.pid()
        if pid is not None:
            processes.terminate(pid, grace_s)
        self.pid_path.unlink(missing_ok=True)


class LocalCluster:
    """Start, stop, probe and break (for fault tests) the one-machine cluster."""

    def __init__(self, settings: ClusterSettings) -> None:
        self.settings = settings
        self._cluster_id_path = settings.home / "kafka-cluster-id"

    # --- parts ---------------------------------------------------------------------------------
    @property
    def master(self) -> SparkDaemon:
        s = self.settings
        arguments = [
            "--host",
            LOOPBACK,
            "--port",
            str(s.spark_master_port),
            "--webui-port",
            str(s.spark_master_webui_port),
        ]
        return SparkDaemon("spark-master", MASTER_CLASS, arguments, s)

    def worker(self, index: int) -> SparkDaemon:
        s = self.settings
        arguments = [
            "--host",
            LOOPBACK,
            "--port",
            str(s.spark_worker_base_port + index),
            "--webui-port",
            str(s.spark_worker_webui_base_port + index),
            "--cores",
            str(s.worker_cores),
            "--memory",
            s.worker_memory,
            "--work-dir",
            str(s.home / f"spark-worker-{index + 1}" / "work"),
            s.spark_master_url,
        ]
        return SparkDaemon(f"spark-worker-{index + 1}", WORKER_CLASS, arguments, s)

    @property
    def object_store(self) -> LocalObjectStore | None:
        """The cluster's own object store, when its lake is on one."""
        return LocalObjectStore(self.settings.object_store) if self.settings.on_object_store else None

    @property
    def workers(self) -> list[SparkDaemon]:
        return [self.worker(i) for i in range(self.settings.workers)]

    def broker(self, index: int) -> LocalKafkaBroker:
        cluster_id = self._cluster_id_path.read_text().strip() if self._cluster_id_path.exists() else None
        return LocalKafkaBroker(self.settings.broker_settings(index, cluster_id))

    @property
    def brokers(self) -> list[LocalKafkaBroker]:
        return [self.broker(i) for i in range(self.settings.brokers)]

    def client_environment(self) -> dict[str, str]:
        """What a process using the cluster needs in its environment: SPARK_CONF_DIR, whose
        spark-defaults.conf authenticates its drivers (created if missing)."""
        ensure_spark_auth_conf(self.settings.spark_conf_dir)
        return {"SPARK_CONF_DIR": str(self.settings.spark_conf_dir)}

    def _daemon_env(self) -> dict[str, str]:
        return {
            **os.environ,
            **self.client_environment(),
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": LOOPBACK,
            "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
            # The master's and workers' JIT (STACK_SERVICES_JIT); the executors' is in `worker_env`.
            "SPARK_DAEMON_JAVA_OPTS": with_service_jit(os.environ.get("SPARK_DAEMON_JAVA_OPTS")),
            # No REST submission server: Python apps cannot use cluster deploy mode on a standalone
            # master (docs/cluster.md), and an open submission port is one more thing listening.
            "SPARK_MASTER_OPTS": "-Dspark.deploy.defaultCores=1 -Dspark.master.rest.enabled=false",
            "SPARK_LOG_DIR": str(self.settings.home),
            # Executors inherit the worker's environment: the project's code and the venv's Python.
            "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), str(REPO_ROOT / "include")]),
            "PYSPARK_PYTHON": sys.executable,
        }

    def worker_env(self, index: int, daemon_env: dict[str, str]) -> dict[str, str]:
        """A worker's environment, which its executors inherit: its own scratch dirs, the services' JIT
        (STACK_SERVICES_JIT: an executor's JVM options come from the app, so it is passed the way every
        JVM reads from its environment, JAVA_TOOL_OPTIONS) and, with the lake on the object store, the
        store's credentials (from its 0600 file; never in Spark's conf)."""
        env = {**daemon_env, "SPARK_LOCAL_DIRS": str(self.settings.worker_local_dir(index))}
        executor_options = with_service_jit(daemon_env.get("JAVA_TOOL_OPTIONS"))
        if executor_options:
            env["JAVA_TOOL_OPTIONS"] = executor_options
        if self.settings.on_object_store:
            env.update(local_lake_object_store(self.settings.object_store).credentials_environment())
        return env

    # --- probing -------------------------------------------------------------------------------
    def master_status(self) -> dict[str, Any] | None:
        """The master's JSON status (workers, applications), or None if it does not answer."""
        try:
            with urllib.request.urlopen(self.settings.master_status_url, timeout=3) as response:
                status: dict[str, Any] = json.load(response)
        except (urllib.error.URLError, OSError, ValueError):
            return None
        return status

    def alive_workers(self) -> int:
        status = self.master_status() or {}
        return sum(1 for worker in status.get("workers", []) if worker.get("state") == "ALIVE")

    def live_broker_ids(self) -> list[int]:
        """Node ids of the brokers the cluster's metadata lists as live."""
        import logging

        from confluent_kafka.admin import AdminClient

        # A probe of a cluster that is still starting: librdkafka's connection chatter is expected.
        quiet = logging.getLogger("revenue_platform.cluster_probe")
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False
        client: dict[str, Any] = {"bootstrap.servers": self.settings.bootstrap_servers, "logger": quiet}
        admin = AdminClient(client)
        try:
            description = admin.describe_cluster(request_timeout=5).result(timeout=10)
        except Exception:
            return []
        return sorted(node.id for node in description.nodes)

    def is_running(self) -> bool:
        return self.settings.marker_path.exists() and self.master.pid() is not None

    # --- lifecycle -----------------------------------------------------------------------------
    def require_free_ports(self) -> None:
        """PrerequisiteError naming the variable that moves it when a port a stopped part needs is taken."""
        s = self.settings
        wanted = []
        if self.master.pid() is None:
            wanted += [
                (s.spark_master_port, "SPARK_MASTER_PORT"),
                (s.spark_master_webui_port, "SPARK_MASTER_WEBUI_PORT"),
            ]
        for index, worker in enumerate(self.workers):
            if worker.pid() is None:
                wanted += [
                    (s.spark_worker_base_port + index, "SPARK_WORKER_BASE_PORT"),
                    (s.spark_worker_webui_base_port + index, "SPARK_WORKER_WEBUI_BASE_PORT"),
                ]
        for index, broker in enumerate(self.brokers):
            if broker.pid() is None:
                wanted += [(s.broker_port(index), "CLUSTER_KAFKA_BASE_PORT")]
                wanted += [(s.controller_port(index), "CLUSTER_KAFKA_BASE_PORT")]
        store = self.object_store
        if store is not None and store.pid() is None:
            wanted += [(store.settings.port, "CLUSTER_OBJECT_STORE_PORT")]
        for port, variable in wanted:
            require_free_port(port, "the local cluster", s.base_port_variable or variable)

    def start(self, timeout_s: float = 180.0, progress: Callable[[str], None] = print) -> None:
        """Start whatever part is not running (idempotent) and wait until all of it answers."""
        require_java()
        service_jit_options()  # a bad STACK_SERVICES_JIT is refused before any part starts
        self._require_same_lake()
        self.settings.home.mkdir(parents=True, exist_ok=True)
        require_free_disk(self.settings.home)
        self.require_free_ports()
        self._require_store_jars()
        if not self._cluster_id_path.exists():
            self._cluster_id_path.write_text(self.brokers[0].random_cluster_id())
        for broker in self.brokers:
            broker.start(progress=progress, wait=False)
        store = self.object_store
        if store is not None:
            # Before the workers: they start with its credentials, generated at its first start.
            store.start(progress=progress)
        env = self._daemon_env()
        self.master.start(env)
        progress(f"[spark] master {self.settings.spark_master_url}, UI {self.settings.master_status_url}")
        deadline = time.monotonic() + timeout_s
        self._wait("the Spark master", lambda: self.master_status() is not None, deadline, self.master)
        for index, worker in enumerate(self.workers):
            worker.start(self.worker_env(index, env))
        self._wait(
            f"{self.settings.workers} Spark workers",
            lambda: self.alive_workers() >= self.settings.workers,
            deadline,
            *self.workers,
        )
        progress(
            f"[spark] {self.settings.workers} workers alive ({self.settings.worker_cores} core, "
            f"{self.settings.worker_memory} each)"
        )
        self._wait(
            f"{self.settings.brokers} Kafka brokers",
            lambda: len(self.live_broker_ids()) >= self.settings.brokers,
            deadline,
        )
        progress(f"[kafka] {self.settings.brokers} brokers ready on {self.settings.bootstrap_servers}")
        self.settings.marker_path.write_text(json.dumps(self.marker(), indent=2))

    def _require_store_jars(self) -> None:
        """Before anything starts: without S3Proxy's jars the cluster would stop half started, its
        brokers up and its store missing."""
        store = self.object_store
        if store is None or store.pid() is not None:
            return
        try:
            store.require_jars()
        except PrerequisiteError as error:
            raise PrerequisiteError(
                f"{error} The cluster's lake is on its own object store by default; "
                "`make cluster-up CLUSTER_LAKE=local` keeps it on the local disk instead."
            ) from None

    def marker(self) -> dict[str, Any]:
        """What the marker tells the stack's other commands and Airflow's tasks: where the cluster is,
        and its lake (with the store it is on; no secret, the credentials stay in the store's file)."""
        s = self.settings
        marker: dict[str, Any] = {
            "spark_master": s.spark_master_url,
            "bootstrap_servers": s.bootstrap_servers,
            "lake": s.lake,
            "lake_root": s.lake_root,
        }
        if s.on_object_store:
            store = s.object_store
            marker["object_store"] = {
                "endpoint_url": store.endpoint_url,
                "port": store.port,
                "data_dir": str(store.data_dir),
                "bucket": store.bucket,
            }
        return marker

    def _require_same_lake(self) -> None:
        """A running cluster keeps the lake it was started with: its workers' environment and Airflow's
        are fixed at their start."""
        if not self.is_running():
            return
        recorded = (running_cluster_marker() or {}).get("lake", LOCAL_LAKE)
        if recorded != self.settings.lake:
            raise PrerequisiteError(
                f"The cluster runs with CLUSTER_LAKE={recorded}; stop it with `make cluster-down` before "
                f"starting it with CLUSTER_LAKE={self.settings.lake}."
            )

    def _wait(self, what: str, ready: Callable[[], bool], deadline: float, *daemons: SparkDaemon) -> None:
        while not ready():
            for daemon in daemons:
                if not daemon.spawned_alive():
                    raise PrerequisiteError(
                        f"{daemon.name} exited during start-up. Last lines of {daemon.log_path}:\n"
                        f"{processes.tail(daemon.log_path, 25)}"
                    )
            if time.monotonic() > deadline:
                raise PrerequisiteError(
                    f"{what} did not come up in time; see the logs in {self.settings.home}."
                )
            time.sleep(1)

    def restart_broker(self, index: int, progress: Callable[[str], None] = print) -> None:
        """Start a stopped broker again and wait until the cluster lists it."""
        self.broker(index).start(progress=progress, wait=False)
        deadline = time.monotonic() + 120
        self._wait(f"broker {index + 1}", lambda: index + 1 in self.live_broker_ids(), deadline)

    def stop(self, progress: Callable[[str], None] = print) -> None:
        """Stop workers, master and brokers (data kept); removes the marker first."""
        self.settings.marker_path.unlink(missing_ok=True)
        for daemon in [*self.workers, self.master]:
            if daemon.pid() is not None:
                progress(f"[spark] stopping {daemon.name}")
            daemon.stop()
        # All brokers at once: stopped one by one, the last of a three-node KRaft quorum always has no
        # quorum left for its controlled shutdown and waits out its grace before a SIGKILL (an unclean
        # shutdown, whose logs the next start recovers): 32 s against 7 s (docs/cluster.md). Together,
        # a broker far slower than the others can still be left without one (seen once under load).
        with ThreadPoolExecutor(max_workers=len(self.brokers) or 1) as pool:
            for stopping in [pool.submit(broker.stop, progress=progress) for broker in self.brokers]:
                stopping.result()
        # Whatever the switch says now: a store the cluster started must not outlive it.
        store = LocalObjectStore(self.settings.object_store)
        if store.pid() is not None:
            store.stop(progress=progress)

    def describe(self) -> list[str]:
        """One line per part, for `make status`."""
        lines = []
        master_pid = self.master.pid()
        master_state = "up" if master_pid and self.master_status() is not None else "down"
        lines.append(f"spark-master   {master_state:8} {self.settings.spark_master_url}  (pid {master_pid})")
        alive = self.alive_workers()
        for worker in self.workers:
            state = "up" if worker.pid() else "down"
            lines.append(f"{worker.name:14} {state:8} (pid {worker.pid()})")
        lines.append(f"               {alive} of {self.settings.workers} workers registered with the master")
        live = self.live_broker_ids() if any(b.pid() for b in self.brokers) else []
        for index, broker in enumerate(self.brokers):
            state = "up" if broker.pid() and index + 1 in live else ("starting" if broker.pid() else "down")
            lines.append(
                f"kafka-{index + 1:<8} {state:8} {broker.settings.bootstrap_servers}  (pid {broker.pid()})"
            )
        store = self.object_store
        if store is not None:
            state = "up" if store.pid() and store.answers_http() else ("starting" if store.pid() else "down")
            lines.append(
                f"object-store   {state:8} {store.settings.endpoint_url}  bucket {store.settings.bucket!r} "
                f"in {store.settings.blobs_dir}  (pid {store.pid()})"
            )
        return lines


def active_cluster() -> LocalCluster | None:
    """The one-machine cluster when `make cluster-up` started it (its marker file exists), else None."""
    settings = ClusterSettings.from_env()
    return LocalCluster(settings) if settings.marker_path.exists() else None


def stack_bootstrap_servers() -> str:
    """The running stack's brokers: the cluster's three after `make cluster-up`, else `make up`'s one."""
    cluster = active_cluster()
    return cluster.settings.bootstrap_servers if cluster else KafkaBrokerSettings.from_env().bootstrap_servers


def provision_cluster_topics(bootstrap_servers: str, progress: Callable[[str], None] = print) -> None:
    """Converge the spec's topics for the `cluster` environment, as provision_topics does (no Airflow)."""
    from revenue_platform.topics import compute_plan, load_topic_spec
    from revenue_platform.topics.admin import apply_plan, describe_cluster
    from revenue_platform.topics.spec import default_spec_path

    client = {"bootstrap.servers": bootstrap_servers}
    desired = load_topic_spec(default_spec_path(), "cluster")
    state = describe_cluster(client, [spec.name for spec in desired])
    plan = compute_plan(desired, state.topics, state.broker_count, set())
    if plan.has_changes:
        result = apply_plan(client, plan)
        progress(f"[topics] {result.render()}")
    else:
        progress("[topics] every topic matches the spec's cluster environment")
