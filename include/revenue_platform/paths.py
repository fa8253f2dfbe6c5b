"""Where the project's files and its git-ignored local state live.

The repository root is found from this file, so every entry point (make, Airflow,
spark-submit, pytest) resolves the same folders. `PLATFORM_STATE_DIR` moves all local
state (Kafka data, Airflow home, the lake) elsewhere, e.g. to a bigger disk.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
INCLUDE_DIR = REPO_ROOT / "include"
DAGS_DIR = REPO_ROOT / "dags"
PLUGINS_DIR = REPO_ROOT / "plugins"
SPARK_APPS_DIR = REPO_ROOT / "spark_apps"
JVM_POMS_DIR = INCLUDE_DIR / "jvm"
JVM_ARTIFACTS_DIR = Path(os.environ.get("JVM_ARTIFACTS_DIR", REPO_ROOT / ".jvm"))
KAFKA_BROKER_JARS_DIR = JVM_ARTIFACTS_DIR / "kafka-broker"
SPARK_JARS_DIR = Path(os.environ.get("SPARK_JARS_DIR", JVM_ARTIFACTS_DIR / "spark-jars"))


def state_dir() -> Path:
    """Root of the local stack's state (git-ignored `.local/` unless overridden)."""
    return Path(os.environ.get("PLATFORM_STATE_DIR", REPO_ROOT / ".local"))


LAKE_ROOT_ENV = "PLATFORM_LAKE_ROOT"


def lake_root() -> str:
    """Delta tables, checkpoints, registry and reports: $PLATFORM_LAKE_ROOT, else `<state dir>/lake`."""
    return os.environ.get(LAKE_ROOT_ENV) or str(state_dir() / "lake")
