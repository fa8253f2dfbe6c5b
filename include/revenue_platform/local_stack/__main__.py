"""Command line of the local stack: `python -m revenue_platform.local_stack COMMAND`.

The Makefile calls these commands; platform errors are printed as one clear message
(what is wrong, how to fix it) and exit with status 2 instead of a stack trace.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

from revenue_platform import processes
from revenue_platform.errors import PlatformError
from revenue_platform.local_object_store import ObjectStoreSettings
from revenue_platform.local_stack import jvm, prerequisites
from revenue_platform.local_stack.airflow_local import AirflowLocalSettings, LocalAirflow
from revenue_platform.local_stack.cluster import (
    ClusterSettings,
    LocalCluster,
    active_cluster,
    provision_cluster_topics,
)
from revenue_platform.local_stack.kafka_broker import KafkaBrokerSettings, LocalKafkaBroker
from revenue_platform.local_stack.object_store import LocalObjectStore
from revenue_platform.paths import LAKE_ROOT_ENV, lake_root, state_dir


def _broker() -> LocalKafkaBroker:
    return LocalKafkaBroker(KafkaBrokerSettings.from_env())


def _object_store() -> LocalObjectStore:
    return LocalObjectStore(ObjectStoreSettings.from_env())


def _airflow(cluster: LocalCluster | None = None) -> LocalAirflow:
    """Local Airflow; connected to the one-machine cluster when it runs (or is given), else to the broker."""
    cluster = cluster or active_cluster()
    if cluster is None:
        return LocalAirflow(AirflowLocalSettings.from_env(KafkaBrokerSettings.from_env().bootstrap_servers))
    settings = dataclasses.replace(
        AirflowLocalSettings.from_env(cluster.settings.bootstrap_servers),
        spark_master=cluster.settings.spark_master_url,
        platform_env="cluster",
        # The cluster's authentication secret reaches the drivers through their SPARK_CONF_DIR.
        spark_conf_dir=Path(cluster.client_environment()["SPARK_CONF_DIR"]),
    )
    if cluster.settings.on_object_store:
        # The lake on the cluster's store: tasks get its root and where the store and its credentials
        # file are (the credentials themselves stay in that file).
        settings = dataclasses.replace(
            settings, lake_root=cluster.settings.lake_root, object_store=cluster.settings.object_store
        )
    return LocalAirflow(settings)


def _status() -> None:
    airflow = _airflow()
    cluster = active_cluster()
    if cluster is not None:
        print("\n".join(cluster.describe()))
    else:
        broker = _broker()
        kafka_state = "up" if broker.pid() and broker.answers_metadata() else "down"
        print(f"kafka   {kafka_state:8} {broker.settings.bootstrap_servers}  (pid {broker.pid()})")
    airflow_state = "up" if airflow.pid() and airflow.healthy() else ("starting" if airflow.pid() else "down")
    print(f"airflow {airflow_state:8} {airflow.settings.base_url}  (pid {airflow.pid()})")
    # Each environment has its own lake (the cluster's while it runs): say which one is in use.
    print(f"lake    {lake_root()}")


def _check() -> None:
    major = prerequisites.require_java()
    prerequisites.require_maven()
    print(f"java {major}: ok; maven: ok")


def _up() -> None:
    cluster = active_cluster()
    if cluster is not None:  # `make demo` after `make cluster-up`: the cluster is the stack
        _cluster_up()
        return
    _broker().start()
    _airflow().start()


def _cluster_up() -> None:
    cluster = LocalCluster(ClusterSettings.from_env())
    if _broker().pid() is not None:
        raise PlatformError(
            "The one-broker stack of `make up` is running; stop it with `make down` before `make cluster-up` "
            "(both share Airflow's home and port)."
        )
    airflow = _airflow(cluster)
    airflow_pid = airflow.pid()
    if airflow_pid is not None:
        running = processes.environment(airflow_pid)
        if running.get("PLATFORM_ENV") != "cluster":
            # Its connections point at the one broker; they are fixed when Airflow starts.
            raise PlatformError("Airflow of `make up` is running; stop it with `make down` first.")
        wanted_root = airflow.settings.lake_root or os.environ.get(LAKE_ROOT_ENV)
        if running.get(LAKE_ROOT_ENV) != wanted_root:
            # Its lake is fixed when it starts too (CLUSTER_LAKE switched while it runs).
            raise PlatformError(
                f"Airflow runs on the lake {running.get(LAKE_ROOT_ENV) or 'in the cluster state dir'}, "
                f"not on {wanted_root or 'the one in the cluster state dir'}; `make cluster-down` first."
            )
    cluster.start()
    provision_cluster_topics(cluster.settings.bootstrap_servers)
    airflow.start()


def _cluster_down() -> None:
    cluster = LocalCluster(ClusterSettings.from_env())
    if active_cluster() is not None:
        _stop_streaming_apps()
        _airflow(cluster).stop()
    cluster.stop()


def _stop_streaming_apps() -> None:
    """Stop the local streaming drivers the registry knows of, before the broker they commit to."""
    # Imported here: the registry pulls in deltalake, which the other commands do not need.
    from deltalake.exceptions import DeltaError

    from revenue_platform.streaming.stop import stop_streaming_apps

    try:
        stop_streaming_apps(timeout_s=60.0)
    except (PlatformError, DeltaError, OSError) as error:
        # `down` must still stop Airflow and Kafka; a driver left behind is named here.
        print(f"WARNING: could not stop the streaming apps cleanly: {error}", file=sys.stderr)


def _down() -> None:
    if active_cluster() is not None:
        _cluster_down()
        return
    _stop_streaming_apps()
    _airflow().stop()
    _broker().stop()


def _browser() -> None:
    # Imported here like the registry above: only the browser tests need it.
    from revenue_platform.local_stack.browser import ensure_chromium

    print(f"chromium: {ensure_chromium()}")


def _promtool() -> None:
    # Imported here like the browser: only the alert rule tests need it.
    from revenue_platform.local_stack.promtool import ensure_promtool

    print(f"promtool: {ensure_promtool()}")


COMMANDS = {
    "check": _check,
    "jvm": jvm.install_jvm_artifacts,
    "object-store-jars": jvm.fetch_object_store_artifacts,
    "objectstore-up": lambda: _object_store().start(),
    "objectstore-down": lambda: _object_store().stop(),
    "kafka-up": lambda: _broker().start(),
    "kafka-down": lambda: _broker().stop(),
    "airflow-up": lambda: _airflow().start(),
    "airflow-down": lambda: _airflow().stop(),
    "streaming-down": _stop_streaming_apps,
    "up": _up,
    "down": _down,
    "cluster-up": _cluster_up,
    "cluster-down": _cluster_down,
    "status": _status,
    "browser": _browser,
    "promtool": _promtool,
}


def run_airflow_cli(arguments: list[str]) -> int:
    """Run the `airflow` CLI with the local stack's environment (its DB, DAGs and connections)."""
    import subprocess

    from revenue_platform.local_stack.airflow_local import cli_environment

    settings = _airflow().settings
    command = [sys.executable, "-m", "airflow", *arguments]
    return subprocess.run(command, env={**os.environ, **cli_environment(settings)}, check=False).returncode


def keep_state_private() -> None:
    """What the stack and everything it starts create (the lake, broker data, Airflow's DB and logs,
    the drivers' files) is readable by its owner only: umask 077 here, inherited by every child, and
    a state folder created 0700. An existing state folder keeps its mode (it may be one a person chose
    to share, or a system folder); `chmod 700 .local` tightens one an earlier version created."""
    os.umask(0o077)
    state_dir().mkdir(parents=True, exist_ok=True, mode=0o700)


# Commands that install tools (Maven artifacts, Debian packages) rather than create the stack's state:
# they keep the caller's umask, so what they install stays readable as its packages define.
INSTALLING_COMMANDS = frozenset({"jvm", "object-store-jars", "browser", "promtool"})


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if not set(arguments[:1]) & INSTALLING_COMMANDS:
        keep_state_private()
    if arguments[:1] == ["airflow"]:
        return run_airflow_cli(arguments[1:])
    if arguments[:1] == ["kafka"]:
        from revenue_platform.local_stack.kafka_tools import run_kafka_tool

        try:
            return run_kafka_tool(arguments[1:])
        except PlatformError as error:
            print(f"ERROR: {error}", file=sys.stderr)
            return 2
    parser = argparse.ArgumentParser(prog="python -m revenue_platform.local_stack", description=__doc__)
    parser.add_argument(
        "command",
        choices=[*sorted(COMMANDS), "airflow", "kafka"],
        help="`airflow ARGS...` runs the Airflow CLI; `kafka TOOL ARGS...` one of Kafka's CLI tools",
    )
    args = parser.parse_args(arguments)
    try:
        COMMANDS[args.command]()
    except PlatformError as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
