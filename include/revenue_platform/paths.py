"""Where the project's files and its git-ignored local state live.

The repository root is found from this file, so every entry point (make, Airflow,
spark-submit, pytest) resolves the same folders. `PLATFORM_STATE_DIR` moves all local
state (Kafka data, Airflow home, the lake) elsewhere, e.g. to a bigger disk. Each environment
keeps its own lake: while the one-machine cluster runs (its marker file exists) the lake is
the cluster's, so checkpoints holding one Kafka cluster's offsets never meet another's brokers.
A lake root that comes from a trigger form must stay inside the platform's lake
(`require_inside_lake`).
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

from revenue_platform.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parents[2]
INCLUDE_DIR = REPO_ROOT / "include"
DAGS_DIR = REPO_ROOT / "dags"
PLUGINS_DIR = REPO_ROOT / "plugins"
SPARK_APPS_DIR = REPO_ROOT / "spark_apps"
# PYTHONPATH of every process that runs the project's code outside this one (Spark drivers, Airflow):
# the repository root (spark_apps) and include/ (revenue_platform), as the venv's .pth file has it.
PROJECT_PYTHONPATH = os.pathsep.join([str(REPO_ROOT), str(INCLUDE_DIR)])
# The streaming app's configuration: the app, the batch reprocessing job and the quality checks read it.
APP_CONFIG_PATH = INCLUDE_DIR / "config" / "streaming_app.yaml"
JVM_POMS_DIR = INCLUDE_DIR / "jvm"
JVM_ARTIFACTS_DIR = Path(os.environ.get("JVM_ARTIFACTS_DIR", REPO_ROOT / ".jvm"))
KAFKA_BROKER_JARS_DIR = JVM_ARTIFACTS_DIR / "kafka-broker"
KAFKA_TOOLS_JARS_DIR = JVM_ARTIFACTS_DIR / "kafka-tools"
SPARK_JARS_DIR = Path(os.environ.get("SPARK_JARS_DIR", JVM_ARTIFACTS_DIR / "spark-jars"))
# Fetched only for a lake on an object store (`make object-store-jars`): the local S3 server, and
# Hadoop's S3A filesystem that Spark adds to its jars only when the lake root is s3a://.
OBJECT_STORE_JARS_DIR = JVM_ARTIFACTS_DIR / "object-store"
SPARK_S3_JARS_DIR = Path(os.environ.get("SPARK_S3_JARS_DIR", JVM_ARTIFACTS_DIR / "spark-s3"))
# The order validator's JVM fast path: Java source beside the data plane it serves (never in the
# --py-files zip, which takes only .py), compiled by `make jvm` into a jar among the Spark jars, so
# every session and spark-submit of the project has it.
ORDER_VALIDATOR_SOURCE_DIR = SPARK_APPS_DIR / "jvm" / "order-validator" / "src" / "main" / "java"
ORDER_VALIDATOR_JAR = SPARK_JARS_DIR / "order-validator.jar"


def state_dir() -> Path:
    """Root of the local stack's state (git-ignored `.local/` unless overridden)."""
    return Path(os.environ.get("PLATFORM_STATE_DIR", REPO_ROOT / ".local"))


def cluster_state_dir() -> Path:
    """State of the one-machine cluster (`make cluster-up`): broker data, Spark work dirs, its lake."""
    return state_dir() / "cluster"


# Written by `make cluster-up` once the cluster answers, removed first by `make cluster-down`: while it
# exists, the stack's commands, Airflow's tasks and the demo work on the cluster.
CLUSTER_MARKER_FILE = "cluster.json"


def cluster_marker_path() -> Path:
    return cluster_state_dir() / CLUSTER_MARKER_FILE


def running_cluster_marker() -> dict[str, object] | None:
    """What `make cluster-up` recorded in its marker (master, brokers, lake), or None when no cluster
    runs. A marker that cannot be read (being written, damaged) reads as empty: the cluster runs, with
    the defaults of a marker that names nothing."""
    import json

    path = cluster_marker_path()
    try:
        text = path.read_text()
    except OSError:
        return None
    try:
        recorded = json.loads(text)
    except ValueError:
        return {}
    return recorded if isinstance(recorded, dict) else {}


LAKE_ROOT_ENV = "PLATFORM_LAKE_ROOT"
# Longest lake root a form may name (spark_apps.contract.config_rules.MAX_ROOT_LENGTH, the app's own bound).
MAX_ROOT_LENGTH = 1024


def lake_root() -> str:
    """Delta tables, checkpoints, registry and reports: $PLATFORM_LAKE_ROOT, else the running cluster's
    lake (the one its marker names: `s3a://<bucket>/lake` on its own object store, as `make cluster-up`
    starts it by default, or `<state dir>/cluster/lake` after `make cluster-up CLUSTER_LAKE=local`),
    else `<state dir>/lake`.

    The one place an environment's lake is chosen. A checkpoint holds offsets of the brokers that
    wrote it; the cluster's brokers are other brokers (other topics, other offsets), so after
    `make down` and `make cluster-up` the deployments of `make up` must not resume there.
    """
    explicit = os.environ.get(LAKE_ROOT_ENV)
    if explicit:
        return explicit
    marker = running_cluster_marker()
    if marker is not None:
        recorded = marker.get("lake_root")
        return recorded if isinstance(recorded, str) and recorded else str(cluster_state_dir() / "lake")
    return str(state_dir() / "lake")


def require_inside_lake(root: str, lake: str, field: str) -> str:
    """`root` if it is `lake` or a folder below it; else ConfigError naming `field`.

    Trigger forms may pick a sub-lake (tests, experiments) but never `/`, a `..` escape or another
    store: the control plane writes tables, checkpoints and reports there. Local roots must be
    absolute and are compared after resolving symlinks; URIs (s3a://...) by normalised prefix.
    """
    if not isinstance(root, str) or len(root) > MAX_ROOT_LENGTH or "\x00" in root:
        raise ConfigError(
            f"{field}: {str(root)[:80]!r} must be a path of at most {MAX_ROOT_LENGTH} characters inside the "
            f"platform's lake {lake!r}"
        )
    advice = f"{field}: {root[:200]!r} must be the platform's lake {lake!r} or a folder inside it"
    if not root:
        raise ConfigError(f"{advice} (it is empty)")
    if "://" in lake or "://" in root:
        scheme, _, rest = root.partition("://")
        lake_scheme, _, lake_rest = lake.partition("://")
        normalised = posixpath.normpath("/" + rest)
        inside = (
            scheme == lake_scheme
            and ".." not in rest.split("/")
            and (normalised + "/").startswith(posixpath.normpath("/" + lake_rest).rstrip("/") + "/")
        )
        if not inside:
            raise ConfigError(advice)
        return root
    if not Path(root).is_absolute():
        raise ConfigError(f"{advice} (give an absolute path; relative paths depend on the process)")
    if not Path(root).resolve().is_relative_to(Path(lake).resolve()):
        raise ConfigError(advice)
    return root


def pyspark_jars_dir() -> Path:
    """The folder of jars that the installed pyspark puts on Spark's classpath."""
    import pyspark

    return Path(pyspark.__file__).parent / "jars"
