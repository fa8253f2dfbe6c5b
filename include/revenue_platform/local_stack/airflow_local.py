"""Airflow 3 on one machine: `airflow standalone` with SQLite and everything pre-configured.

The environment built here is the only place local Airflow settings come from: the
project's dags/ and plugins/, the `kafka_default` and `spark_default` connections (as
AIRFLOW_CONN_* variables, so nothing is configured by hand), the local login, and
unpaused DAGs. `make up`, the tests and the demo all use it.

The stack is closed by default: the API server listens on loopback only (AIRFLOW_HOST opens
it, e.g. AIRFLOW_HOST=0.0.0.0), the admin password and the signing secrets are generated once
with `secrets` into 0600 files under `<state dir>/secrets/`, and `make up` prints the password.
Airflow 3.3's log servers (scheduler and triggerer "serve-logs") would bind every interface with
no setting to change that, so standalone runs without them
(`revenue_platform.airflow.standalone`): on one machine
the API server reads task logs from the local log folder. Airflow's own metrics go out over StatsD
(UDP, fire and forget) to loopback, where a statsd_exporter can turn them into Prometheus metrics.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from revenue_platform import processes
from revenue_platform.connections import KAFKA_CONN_ID, SPARK_CONN_ID, connection_env_var
from revenue_platform.errors import ConfigError, PrerequisiteError
from revenue_platform.local_object_store import ObjectStoreSettings, store_environment
from revenue_platform.local_stack.prerequisites import require_free_port
from revenue_platform.paths import DAGS_DIR, PLUGINS_DIR, PROJECT_PYTHONPATH, REPO_ROOT, state_dir
from revenue_platform.private_files import private_json, replace_private_json

LOCAL_ADMIN_USER = "admin"
# A second person of the local stack: a blue-green switch is never approved by the user who asked for
# it (bluegreen.logic.approved_by_a_requester), so a replay triggered as admin is approved as approver.
LOCAL_APPROVER_USER = "approver"
LOCAL_USERS = (LOCAL_ADMIN_USER, LOCAL_APPROVER_USER)
LOOPBACK = "127.0.0.1"
# Files under the secrets dir; every one is created 0600 and generated only once.
PASSWORDS_FILE = "airflow_passwords.json"
SIGNING_SECRETS_FILE = "airflow_signing_secrets.json"
# HS512 wants a key at least as long as its 64-byte hash (PyJWT warns below that).
SIGNING_SECRET_BYTES = 64
# The Airflow CLI imports its `dags show` command module on every call, which warns that the optional
# graphviz package is missing; the platform never renders DAG images, so the CLI runs without it.
CLI_WARNING_FILTER = "ignore:Could not import graphviz:UserWarning"
# StatsD's usual port; statsd_exporter users point AIRFLOW_STATSD_PORT at its 9125 instead.
DEFAULT_STATSD_PORT = 8125
DAG_REPARSE_INTERVAL_S = 300
"""Seconds before the DAG processor parses an unchanged DAG file again (see airflow_environment)."""
STATSD_PREFIX = "airflow"
STATSD_OFF = "off"
LOOPBACK_STATSD_CLIENT = "revenue_platform.local_stack.loopback_statsd.LoopbackStatsClient"


def local_parallelism(cpus: int | None = None) -> int:
    """Task slots of the local LocalExecutor: twice the cores, at least 4, at most Airflow's default 32.

    LocalExecutor forks `[core] parallelism` worker processes when the scheduler starts (~30 MiB
    each); the default 32 means ~1 GiB of idle workers on a 2-core machine where at most a few
    tasks (and one or two spark-submits) can make progress at once. AIRFLOW__CORE__PARALLELISM in
    the environment wins.
    """
    return max(4, min(32, 2 * (cpus or os.cpu_count() or 2)))


@dataclass(frozen=True)
class AirflowLocalSettings:
    """Where local Airflow lives and what it talks to."""

    home: Path
    """AIRFLOW_HOME: SQLite DB, logs, generated config; env AIRFLOW_HOME_DIR."""
    port: int = 8080
    """API server / UI port; env AIRFLOW_PORT."""
    kafka_bootstrap_servers: str = "localhost:9092"
    """Written into the kafka_default connection."""
    spark_master: str = "local[*]"
    """Written into the spark_default connection; env SPARK_MASTER."""
    host: str = LOOPBACK
    """Interface the API server (UI) listens on; env AIRFLOW_HOST (0.0.0.0 opens it to the network)."""
    secrets_dir: Path | None = None
    """Generated admin password and signing secrets (0600 files); None = next to `home` (`../secrets`)."""
    platform_env: str | None = None
    """PLATFORM_ENV for Airflow's tasks (the topic spec's environment); None = the caller's, else `local`."""
    statsd_port: int | None = DEFAULT_STATSD_PORT
    """UDP port on 127.0.0.1 that Airflow sends its StatsD metrics to; None switches them off;
    env AIRFLOW_STATSD_PORT (`off` switches them off)."""
    lake_root: str | None = None
    """PLATFORM_LAKE_ROOT for Airflow's tasks; None = the caller's (else `paths.lake_root`)."""
    object_store: ObjectStoreSettings | None = None
    """The local object store the lake is on (the cluster's, unless CLUSTER_LAKE=local): its
    OBJECT_STORE_* variables, so tasks find it and its 0600 credentials file; None = the caller's."""
    spark_conf_dir: Path | None = None
    """SPARK_CONF_DIR for Airflow's spark-submits: the one-machine cluster's, whose spark-defaults.conf
    carries its authentication secret (`cluster.LocalCluster.client_environment`); None = Spark's."""

    @classmethod
    def from_env(cls, kafka_bootstrap_servers: str) -> AirflowLocalSettings:
        raw_port = os.environ.get("AIRFLOW_PORT", "8080")
        if not raw_port.isdigit():
            raise ConfigError(f"AIRFLOW_PORT={raw_port!r} is not a TCP port.")
        return cls(
            home=Path(os.environ.get("AIRFLOW_HOME_DIR", state_dir() / "airflow")),
            port=int(raw_port),
            kafka_bootstrap_servers=kafka_bootstrap_servers,
            spark_master=os.environ.get("SPARK_MASTER", "local[*]"),
            host=os.environ.get("AIRFLOW_HOST") or LOOPBACK,
            secrets_dir=state_dir() / "secrets",
            statsd_port=statsd_port_from_env(os.environ.get("AIRFLOW_STATSD_PORT")),
        )

    @property
    def base_url(self) -> str:
        return f"http://localhost:{self.port}"

    @property
    def secrets_path(self) -> Path:
        """Outside AIRFLOW_HOME, so wiping the metadata DB keeps the login and running tokens valid."""
        return self.secrets_dir if self.secrets_dir is not None else self.home.parent / "secrets"

    @property
    def passwords_file(self) -> Path:
        return self.secrets_path / PASSWORDS_FILE


def statsd_port_from_env(raw: str | None) -> int | None:
    """AIRFLOW_STATSD_PORT: unset = the default port, `off` = no metrics, else a UDP port (1-65535)."""
    if raw is None:
        return DEFAULT_STATSD_PORT
    if raw.strip().lower() == STATSD_OFF:
        return None
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ConfigError(f"AIRFLOW_STATSD_PORT={raw!r} is neither a UDP port (1-65535) nor {STATSD_OFF!r}.")
    return int(raw)


def statsd_env(statsd_port: int | None) -> dict[str, str]:
    """Airflow's [metrics] settings: StatsD to 127.0.0.1:`statsd_port` with the prefix `airflow`, or off.

    Loopback keeps the metrics (DAG and task ids among them) on this machine. Sending UDP needs no
    listener, so nothing is checked or bound here: without a collector the datagrams are dropped.
    Set explicitly either way, so an airflow.cfg left in AIRFLOW_HOME cannot switch them on or off.
    """
    if statsd_port is None:
        return {"AIRFLOW__METRICS__STATSD_ON": "False"}
    return {
        "AIRFLOW__METRICS__STATSD_ON": "True",
        "AIRFLOW__METRICS__STATSD_HOST": LOOPBACK,
        "AIRFLOW__METRICS__STATSD_PORT": str(statsd_port),
        "AIRFLOW__METRICS__STATSD_PREFIX": STATSD_PREFIX,
        # Its socket bound to loopback: a plain client's would receive on every interface.
        "AIRFLOW__METRICS__STATSD_CUSTOM_CLIENT_PATH": LOOPBACK_STATSD_CLIENT,
    }


def connection_env(kafka_bootstrap_servers: str, spark_master: str) -> dict[str, str]:
    """AIRFLOW_CONN_* variables for the two connections the DAGs use.

    librdkafka settings (including SASL/SSL on a real cluster) belong in the kafka_default
    extra; the DAGs never hard-code them.
    """
    kafka = {
        "conn_type": "kafka",
        "extra": {"bootstrap.servers": kafka_bootstrap_servers, "group.id": "airflow-control-plane"},
    }
    spark = {"conn_type": "spark", "host": spark_master, "extra": {"deploy-mode": "client"}}
    return {
        connection_env_var(KAFKA_CONN_ID): json.dumps(kafka),
        connection_env_var(SPARK_CONN_ID): json.dumps(spark),
    }


def local_admin_password(settings: AirflowLocalSettings) -> str:
    """The local admin's password: generated once (secrets.token_urlsafe) into a 0600 file."""
    return local_password(settings, LOCAL_ADMIN_USER)


def local_password(settings: AirflowLocalSettings, user: str) -> str:
    """The password of one of LOCAL_USERS: each generated once (secrets.token_urlsafe) into the 0600
    passwords file; one a file of an older version lacks is added to it."""
    stored = private_json(
        settings.passwords_file, lambda: {u: secrets.token_urlsafe(24) for u in LOCAL_USERS}
    )
    missing = [u for u in LOCAL_USERS if u not in stored]
    if missing:
        stored = {**stored, **{u: secrets.token_urlsafe(24) for u in missing}}
        replace_private_json(settings.passwords_file, stored)
    return stored[user]


def signing_secrets(settings: AirflowLocalSettings) -> dict[str, str]:
    """JWT signing key (API tokens) and the API server's secret key (log-server tokens, sessions)."""
    return private_json(
        settings.secrets_path / SIGNING_SECRETS_FILE,
        lambda: {
            "jwt_secret": secrets.token_urlsafe(SIGNING_SECRET_BYTES),
            "secret_key": secrets.token_urlsafe(SIGNING_SECRET_BYTES),
        },
    )


def airflow_environment(settings: AirflowLocalSettings) -> dict[str, str]:
    """The variables (on top of os.environ) under which every local Airflow process runs.

    Creates the secrets files on first use (see `local_admin_password`, `signing_secrets`).
    """
    venv_bin = str(Path(sys.executable).parent)
    local_admin_password(settings)
    signing = signing_secrets(settings)
    parallelism = os.environ.get("AIRFLOW__CORE__PARALLELISM") or str(local_parallelism())
    env = {
        "AIRFLOW_HOME": str(settings.home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_DIR),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(PLUGINS_DIR),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        # "user:role"; the password is in the passwords file.
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{user}:admin" for user in LOCAL_USERS),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(settings.passwords_file),
        # Who may approve a blue-green switch (bluegreen.logic.APPROVERS_OPTION): the second person
        # only; Airflow's HITL API refuses an answer from anyone else (docs/security.md).
        "AIRFLOW__REVENUE_PLATFORM__APPROVERS": LOCAL_APPROVER_USER,
        "AIRFLOW__API__HOST": settings.host,
        "AIRFLOW__API__PORT": str(settings.port),
        # Same secrets for every component (they must agree), instead of 16 random bytes per airflow.cfg.
        "AIRFLOW__API_AUTH__JWT_SECRET": signing["jwt_secret"],
        "AIRFLOW__API__SECRET_KEY": signing["secret_key"],
        "AIRFLOW__API__BASE_URL": settings.base_url,
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{settings.base_url}/execution/",
        # SQLite serializes writers; with scheduler, DAG processor, API server and task processes
        # all writing on 2 cores, the 5 s default lock wait is too short (HTTP 500 "database is locked").
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{settings.home / 'airflow.db'}?timeout=30",
        # New DAG files show up within seconds locally instead of the default minutes.
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "15",
        # How often an unchanged DAG file is parsed again: each parse imports the platform's package
        # in a fresh process (0.5-1.3 CPU-s a file here), so Airflow's 30 s kept an idle stack's DAG
        # processor at ~15 % of a core. An edited DAG file is parsed at once whatever this says (the
        # processor's default `file_parsing_sort_mode`, modified_time, queues files changed since
        # their last parse); a change only to the package's forms shows within this interval, or at
        # once with `make airflow CMD="dags reserialize"`.
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": str(DAG_REPARSE_INTERVAL_S),
        "AIRFLOW__LOGGING__COLORED_CONSOLE_LOG": "False",
        # LocalExecutor workers sized to the machine (see local_parallelism).
        "AIRFLOW__CORE__PARALLELISM": parallelism,
        # spark-submit and the project's code come from the same virtualenv as Airflow.
        "PATH": venv_bin + os.pathsep + os.environ.get("PATH", ""),
        "PYTHONPATH": PROJECT_PYTHONPATH,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    env.update(connection_env(settings.kafka_bootstrap_servers, settings.spark_master))
    env.update(statsd_env(settings.statsd_port))
    if settings.platform_env is not None:
        env["PLATFORM_ENV"] = settings.platform_env
    if settings.lake_root is not None:
        env["PLATFORM_LAKE_ROOT"] = settings.lake_root
    if settings.object_store is not None:
        env.update(store_environment(settings.object_store))
    if settings.spark_conf_dir is not None:
        env["SPARK_CONF_DIR"] = str(settings.spark_conf_dir)
    return env


def cli_environment(settings: AirflowLocalSettings) -> dict[str, str]:
    """The variables (on top of os.environ) for `make airflow CMD=...`: the stack's, minus the CLI's
    graphviz warning (any PYTHONWARNINGS of the caller is kept)."""
    warnings = ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"), CLI_WARNING_FILTER]))
    return {**airflow_environment(settings), "PYTHONWARNINGS": warnings}


def migrate_db(settings: AirflowLocalSettings, progress: Callable[[str], None] = print) -> None:
    """Run `airflow db migrate` (idempotent) against the local SQLite metadata DB."""
    settings.home.mkdir(parents=True, exist_ok=True)
    progress(f"[airflow] migrating the metadata DB in {settings.home} ...")
    completed = subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"],
        env={**os.environ, **airflow_environment(settings)},
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        raise PrerequisiteError(
            "`airflow db migrate` failed; the metadata DB is unusable. Remove "
            f"{settings.home} to start afresh. Output:\n{(completed.stdout + completed.stderr)[-3000:]}"
        )


# `airflow standalone` with the scheduler's and triggerer's log servers off
# (see revenue_platform.airflow.standalone).
STANDALONE_MODULE = "revenue_platform.airflow.standalone"


class LocalAirflow:
    """`airflow standalone` (without log servers) as a detached process group with a pid file."""

    def __init__(self, settings: AirflowLocalSettings) -> None:
        self.settings = settings
        self.pid_path = settings.home / "standalone.pid"
        self.log_path = settings.home / "standalone.log"

    def pid(self) -> int | None:
        pid = processes.read_live_pid(self.pid_path, expected_cmdline_fragment="standalone")
        # Every `airflow standalone` looks alike on the command line; ours is the one with our AIRFLOW_HOME
        # (a reused pid of another stack's Airflow must not be stopped by us).
        if pid is not None and processes.environment(pid).get("AIRFLOW_HOME") != str(self.settings.home):
            return None
        return pid

    def healthy(self) -> bool:
        """True when the API server reports the metadatabase and scheduler healthy."""
        try:
            with urllib.request.urlopen(
                f"{self.settings.base_url}/api/v2/monitor/health", timeout=3
            ) as response:
                health = json.load(response)
        except (urllib.error.URLError, OSError, ValueError):
            return False
        return all(
            health.get(component, {}).get("status") == "healthy"
            for component in ("metadatabase", "scheduler")
        )

    def start(self, timeout_s: float = 240.0, progress: Callable[[str], None] = print) -> None:
        """Start standalone unless running; wait until healthy; print URL and login."""
        if self.pid() is None:
            require_free_port(self.settings.port, "the Airflow API server (UI)", "AIRFLOW_PORT")
            migrate_db(self.settings, progress)
            processes.spawn_detached(
                [sys.executable, "-m", STANDALONE_MODULE],
                self.pid_path,
                self.log_path,
                # Standalone prints its components' lines to the log file: unbuffered, the log is live
                # (`tail -f`) and a standalone killed at the end of `down`'s grace loses no line.
                env={**os.environ, **airflow_environment(self.settings), "PYTHONUNBUFFERED": "1"},
                cwd=REPO_ROOT,
            )
            progress(f"[airflow] starting standalone, log: {self.log_path}")
        started = time.monotonic()
        last_report = started
        while not self.healthy():
            if self.pid() is None:
                raise PrerequisiteError(
                    f"Airflow standalone exited during start-up. Last lines of {self.log_path}:\n"
                    f"{processes.tail(self.log_path, 30)}"
                )
            if time.monotonic() - started > timeout_s:
                raise PrerequisiteError(
                    f"Airflow did not become healthy within {timeout_s:.0f}s; see {self.log_path}."
                )
            if time.monotonic() - last_report >= 10:
                progress(
                    "[airflow] waiting for the API server and scheduler "
                    f"({time.monotonic() - started:.0f}s) ..."
                )
                last_report = time.monotonic()
            time.sleep(1)
        password = local_admin_password(self.settings)
        approver = local_password(self.settings, LOCAL_APPROVER_USER)
        progress(
            f"[airflow] ready: UI {self.settings.base_url} (listening on {self.settings.host})  "
            f"login {LOCAL_ADMIN_USER} / {password}; a second person to approve blue-green switches: "
            f"{LOCAL_APPROVER_USER} / {approver}  (kept in {self.settings.passwords_file})"
        )

    def stop(self, grace_s: float = 30.0, progress: Callable[[str], None] = print) -> None:
        """Stop standalone and all its components (scheduler, api-server, dag-processor, triggerer)."""
        pid = self.pid()
        if pid is None:
            progress("[airflow] not running")
            self.pid_path.unlink(missing_ok=True)
            return
        progress(f"[airflow] stopping pid {pid} and its components ...")
        # standalone treats SIGINT like Ctrl-C: it stops each component and waits for it. Airflow runs
        # each task in a process group of its own, and a task's children (a reprocess job's
        # spark-submit, its JVM and Python driver) in it: the whole session goes, or they outlive
        # Airflow. A streaming app its DAGs deployed has a session of its own and keeps running.
        killed = processes.terminate(pid, grace_s, signal.SIGINT, whole_session=True)
        self.pid_path.unlink(missing_ok=True)
        if killed:
            progress(
                f"[airflow] stopped; what had not stopped within {grace_s:.0f} s was killed "
                f"(the last lines of {self.log_path} say where it was)"
            )
        else:
            progress("[airflow] stopped")
