"""Launch, observe and signal a long-running streaming driver, for client or cluster deploy modes.

Client mode (the local stack's `local[*]`, or a client-mode cluster master) runs the driver
on this machine as a detached `spark-submit` (own session, log file, pid file) so it
outlives the Airflow task that launched it. Cluster mode submits without waiting for the
app to finish (`*.waitAppCompletion=false`) and records the submission id; that path is
built and unit-tested but not exercised against a real cluster here. A driver is
identified by its fencing token on its command line, so a recycled pid is never mistaken
for it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import subprocess
import zipfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from revenue_platform import processes
from revenue_platform.connections import SPARK_CONN_ID, read_connection
from revenue_platform.errors import PlatformError
from revenue_platform.lake_storage import (
    SparkObjectStoreAccess,
    list_side_files,
    read_side_file,
    spark_object_store_access,
)
from revenue_platform.paths import REPO_ROOT, SPARK_APPS_DIR, state_dir
from revenue_platform.registry import DeploymentRecord
from revenue_platform.spark_submit import spark_submit_command, spark_submit_env
from spark_apps.contract.kafka_security import KafkaClientSecurity
from spark_apps.contract.naming import DeploymentNames, local_driver_dir
from spark_apps.contract.object_store import is_object_store_root

LOG = logging.getLogger(__name__)
APP = "orders_streaming_app.py"
# Submit and return: the app is meant to run forever, the submitting task must not.
NO_WAIT_CONF = {
    "spark.yarn.submit.waitAppCompletion": "false",
    "spark.standalone.submit.waitAppCompletion": "false",
    "spark.kubernetes.submission.waitAppCompletion": "false",
}
_SUBMISSION_ID = re.compile(r"(driver-\d{14}-\d{4}|application_\d+_\d+|spark-[a-z0-9-]+-driver)")


class LaunchError(PlatformError):
    """The driver could not be launched or signalled."""


@dataclass(frozen=True)
class SparkTarget:
    """Where drivers run: the Spark master and deploy mode of the `spark_default` connection."""

    master: str
    deploy_mode: str = "client"

    @property
    def driver_kind(self) -> str:
        """`local`: the driver is a process on this machine; `cluster`: the cluster manager runs it."""
        return "cluster" if self.deploy_mode == "cluster" else "local"


def require_supported_deploy_mode(target: SparkTarget) -> None:
    """Refuse cluster deploy mode on a standalone master before submitting anything.

    spark-submit refuses it for Python apps ("Cluster deploy mode is currently not supported for
    python applications on standalone clusters", SparkSubmit.prepareSubmitEnvironment, Spark 4.x):
    the standalone master can only launch JVM drivers. YARN and Kubernetes run Python drivers.
    """
    if target.driver_kind == "cluster" and target.master.startswith("spark://"):
        raise LaunchError(
            f"spark_default asks for cluster deploy mode on the standalone master {target.master}, which "
            'Spark refuses for Python apps. Set the connection\'s extra to {"deploy-mode": "client"} '
            "(the driver runs on the Airflow worker, executors on the cluster); see docs/cluster.md."
        )


def spark_target_from_connection(conn_id: str = SPARK_CONN_ID) -> SparkTarget:
    """Master and deploy mode from an Airflow Spark connection (call inside a task, never at parse time).

    Mirrors the Spark provider's reading: the host is the master URL unless a port is set separately.
    """
    connection = read_connection(conn_id)
    if connection is None:
        raise LaunchError(
            f"Airflow connection {conn_id!r} is not defined: it names the Spark master the app runs on, "
            'e.g. AIRFLOW_CONN_SPARK_DEFAULT=\'{"conn_type": "spark", "host": "local[2]"}\' '
            "(docs/cluster.md)."
        )
    host = connection.host or "yarn"
    master = host if ("://" in host or not connection.port) else f"{host}:{connection.port}"
    extra = connection.extra
    return SparkTarget(master=master, deploy_mode=str(extra.get("deploy-mode") or "client"))


def lake_object_store_access(config: dict[str, Any], registry_root: str) -> SparkObjectStoreAccess:
    """What the driver adds to reach the object store its lake or its registry is on (S3A's jars,
    settings and credentials; `lake_storage.spark_object_store_access`); nothing for a local lake."""
    roots = [str(config.get("lake_root") or ""), registry_root]
    on_store = next((root for root in roots if is_object_store_root(root)), None)
    return spark_object_store_access(on_store) if on_store is not None else SparkObjectStoreAccess()


def app_arguments(config_file: str, lease_token: str, registry_root: str) -> list[str]:
    """Arguments of the app: the registered config as a file, the fencing token, the registry."""
    return ["--config", config_file, "--lease-token", lease_token, "--registry-root", registry_root]


def py_files_bundle(out_dir: Path) -> Path:
    """Zip of the `spark_apps` package for --py-files (cluster drivers have no checkout)."""
    bundle = out_dir / "spark_apps.zip"
    out_dir.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(bundle, "w") as archive:
        for source in sorted(SPARK_APPS_DIR.rglob("*.py")):
            archive.write(source, source.relative_to(REPO_ROOT).as_posix())
    return bundle


def cluster_submit_command(
    target: SparkTarget, config_file: str, lease_token: str, registry_root: str, py_files: str
) -> list[str]:
    """spark-submit in cluster deploy mode that returns once submitted; the config travels via --files."""
    # The driver starts on a worker: this machine's class archive is not its to map.
    local = spark_submit_command(APP, [], master=target.master, class_archive=False)
    app_path = local[-1]
    options = local[1:-1]
    extra: list[str] = ["--deploy-mode", "cluster", "--py-files", py_files, "--files", config_file]
    for key, value in NO_WAIT_CONF.items():
        extra += ["--conf", f"{key}={value}"]
    # --files lands in the driver's working directory under its base name.
    args = app_arguments(Path(config_file).name, lease_token, registry_root)
    return [local[0], *options, *extra, app_path, *args]


def parse_submission_id(output: str) -> str | None:
    """The driver/application id spark-submit printed (standalone, YARN or Kubernetes)."""
    match = _SUBMISSION_ID.search(output)
    return match.group(1) if match else None


@dataclass(frozen=True)
class DriverHandle:
    """How to find a launched driver again."""

    kind: str
    host: str | None = None
    pid: int | None = None
    log_path: str | None = None
    submission_id: str | None = None

    def registry_changes(self) -> dict[str, Any]:
        return {
            "driver_kind": self.kind,
            "driver_host": self.host,
            "driver_pid": self.pid,
            "driver_log_path": self.log_path,
            "submission_id": self.submission_id,
        }


def write_config_file(deployment_id: str, config: dict[str, Any], lease_token: str) -> Path:
    """The registered config as a file the driver reads (JSON is valid YAML for the app's loader)."""
    run_dir = Path(local_driver_dir(str(state_dir()), deployment_id))
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / f"config-{lease_token}.json"
    path.write_text(json.dumps(config, indent=2, sort_keys=True))
    return path


def launch(
    target: SparkTarget,
    deployment_id: str,
    config: dict[str, Any],
    lease_token: str,
    registry_root: str,
    kafka_security: KafkaClientSecurity | None = None,
) -> DriverHandle:
    """Start the driver with `lease_token`; return without waiting for it to start processing.

    `kafka_security` (from the Kafka connection) and the object store's login (a lake on `s3a://`)
    reach a local driver through its environment only: never the config file, the registry or the
    command line.
    """
    require_supported_deploy_mode(target)
    object_store = lake_object_store_access(config, registry_root)
    if object_store.environment and target.driver_kind == "cluster":
        raise LaunchError(
            "the lake is on an object store, and handing its credentials to a cluster-mode driver is not "
            "supported (it would put them on the spark-submit command line); run the drivers in client "
            "mode (spark_default extra deploy-mode: client)"
        )
    secured = kafka_security is not None and kafka_security.protocol != "PLAINTEXT"
    if secured and target.driver_kind == "cluster":
        # A cluster driver's environment is set with --conf (spark.*Env.*), i.e. on the command line.
        raise LaunchError(
            "the Kafka connection has security settings, and handing credentials to a cluster-mode "
            "driver is not supported (it would put them on the spark-submit command line); run the "
            "drivers in client mode (spark_default extra deploy-mode: client)"
        )
    config_file = write_config_file(deployment_id, config, lease_token)
    run_dir = config_file.parent
    if target.driver_kind == "cluster":
        command = cluster_submit_command(
            target, str(config_file), lease_token, registry_root, str(py_files_bundle(run_dir))
        )
        completed = subprocess.run(
            command, capture_output=True, text=True, env=spark_submit_env(), check=False, timeout=300
        )
        output = completed.stdout + completed.stderr
        submission = parse_submission_id(output)
        if completed.returncode != 0 or submission is None:
            raise LaunchError(f"cluster submission failed (exit {completed.returncode}):\n{output[-3000:]}")
        return DriverHandle(kind="cluster", submission_id=submission)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    log_path = run_dir / f"driver-{stamp}-{lease_token}.log"
    command = spark_submit_command(
        APP,
        app_arguments(str(config_file), lease_token, registry_root),
        master=target.master,
        object_store=object_store,
    )
    environment = spark_submit_env(kafka_security, object_store=object_store)
    pid = processes.spawn_detached(command, run_dir / "driver.pid", log_path, env=environment, cwd=REPO_ROOT)
    LOG.info("launched driver of %s: pid %s, log %s", deployment_id, pid, log_path)
    return DriverHandle(kind="local", host=socket.gethostname(), pid=pid, log_path=str(log_path))


def local_process_alive(record: DeploymentRecord) -> bool | None:
    """Is the record's local driver process running? None when that cannot be seen from this machine."""
    if record.driver_kind != "local":
        return None
    if record.driver_pid is None or record.lease_token is None:
        return False
    if record.driver_host != socket.gethostname():
        return None
    pid = record.driver_pid
    # A driver this process launched: its own exit status. Else: alive, and the lease's token on its
    # command line (not another process that reused the pid).
    own = processes.spawned_and_running(pid)
    return own if own is not None else processes.runs_command_with(pid, record.lease_token)


def read_driver_status(record: DeploymentRecord) -> dict[str, Any] | None:
    """The driver's heartbeat file, if it belongs to the record's current lease."""
    status = read_side_file(DeploymentNames(record.lake_root, record.deployment_id).driver_status_file)
    return status if status is not None and status.get("lease_token") == record.lease_token else None


def heartbeat_age_s(status: dict[str, Any] | None, now: datetime) -> float | None:
    if not status or not status.get("heartbeat_at"):
        return None
    return (now - datetime.fromisoformat(status["heartbeat_at"])).total_seconds()


def read_query_progress(record: DeploymentRecord) -> dict[str, dict[str, Any]]:
    """Latest progress JSON of each query of the deployment, by query name."""
    progress: dict[str, dict[str, Any]] = {}
    for location in list_side_files(record.progress_dir) if record.progress_dir else []:
        name = location.rpartition("/")[2].removesuffix(".json")
        document = None if name.startswith("_") else read_side_file(location)
        if document is not None:
            progress[name] = document
    return progress


_ERROR_LINE = re.compile(r"(ERROR: |Error: |Exception: )")


# A local driver's log is rotated by the supervisor (every minute) once it passes this size; with
# JVM logging at WARN (spark_submit.DRIVER_LOG4J2_CONFIG) an idle app rarely gets there.
DRIVER_LOG_MAX_BYTES = 20 * 1024 * 1024
DRIVER_LOG_BACKUPS = 3


def rotate_driver_log(record: DeploymentRecord) -> bool:
    """Rotate the record's local driver log (copy + truncate, see processes.rotate_copytruncate)."""
    if record.driver_kind != "local" or record.driver_log_path is None:
        return False
    if record.driver_host not in (None, socket.gethostname()):
        return False  # another machine's file
    return processes.rotate_copytruncate(
        Path(record.driver_log_path), DRIVER_LOG_MAX_BYTES, DRIVER_LOG_BACKUPS
    )


def log_tail(record: DeploymentRecord, lines: int = 40) -> str:
    """The driver log's last lines, led by its last error line (the cause, not the stack frames)."""
    if record.driver_log_path is None:
        return ""
    tail = processes.tail(Path(record.driver_log_path), lines)
    error = last_error_line(tail)
    return f"{error}\n---\n{tail}" if error else tail


def last_error_line(log_text: str) -> str | None:
    """The last line of `log_text` that reports an error (the app's `ERROR: ...`, an exception's
    message), stripped; None when there is none."""
    errors = [line for line in log_text.splitlines() if _ERROR_LINE.search(line)]
    return errors[-1].strip() if errors else None


def driver_python_pid(record: DeploymentRecord) -> int | None:
    """The Python driver's pid (child of the spark-submit JVM) from its heartbeat, if it is ours and alive."""
    status = read_driver_status(record)
    if not status or record.driver_pid is None:
        return None
    pid = int(status["pid"])
    try:
        same_group = os.getpgid(pid) == os.getpgid(record.driver_pid)
    except ProcessLookupError:
        return None
    return pid if same_group and processes.is_alive(pid) else None


@dataclass(frozen=True)
class DriverObservation:
    """What can be seen of a deployment's driver right now."""

    process_alive: bool | None
    """Local driver process state; None when not visible from here (cluster mode, another host)."""
    heartbeat_age_s: float | None
    """Seconds since the driver's own heartbeat for the current lease; None if it never reported."""
    status: dict[str, Any] | None

    def alive(self, stale_after_s: float) -> bool:
        """Alive = a live process (where visible) with a fresh heartbeat, or a fresh heartbeat alone."""
        fresh = self.heartbeat_age_s is not None and self.heartbeat_age_s < stale_after_s
        if self.process_alive is None:
            return fresh
        return self.process_alive and fresh


def observe_driver(record: DeploymentRecord, now: datetime) -> DriverObservation:
    status = read_driver_status(record)
    return DriverObservation(local_process_alive(record), heartbeat_age_s(status, now), status)
