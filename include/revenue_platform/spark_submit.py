"""Build spark-submit command lines for the platform's Spark apps on the local stack.

Jobs get the Maven-fetched jars with --jars (never --packages), so nothing is
resolved over the network when a job starts, and the project's code through
PYTHONPATH (local master) or a zipped --py-files bundle (cluster masters).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from revenue_platform.child_env import child_environment
from revenue_platform.lake_storage import SparkObjectStoreAccess
from revenue_platform.paths import PROJECT_PYTHONPATH, REPO_ROOT, SPARK_APPS_DIR, SPARK_JARS_DIR
from spark_apps.contract.kafka_security import KAFKA_SECURITY_ENV, KafkaClientSecurity
from spark_apps.contract.object_store import ACCESS_KEY_ENV, SECRET_KEY_ENV


def spark_jars() -> list[str]:
    """The connector jars for --jars, or a clear error naming `make jvm`."""
    from spark_apps.engine.session import local_jar_paths

    return local_jar_paths(SPARK_JARS_DIR)


# WARN and above from the JVM (Spark's default INFO logs every idle micro-batch); see the file.
DRIVER_LOG4J2_CONFIG = REPO_ROOT / "include" / "config" / "spark-driver-log4j2.properties"
# The driver holds the cached micro-batch, the state store and (local master) the executors:
# Spark's 1 GiB default is too small for 200,000-record batches at 20,000 orders/s.
DRIVER_MEMORY = "2g"


def spark_submit_command(
    app: str,
    app_args: list[str],
    master: str = "local[2]",
    object_store: SparkObjectStoreAccess | None = None,
    class_archive: bool = True,
    extra_java_options: str = "",
) -> list[str]:
    """`spark-submit` for `spark_apps/<app>` with the local jars and the given app arguments.

    `class_archive`: the driver maps `make jvm`'s class archive when there is one
    (`driver_class_archive_options`) and takes the JIT setting (`SPARK_DRIVER_JIT`,
    `driver_jit_options`); both off for a driver that runs elsewhere (cluster deploy mode).
    `extra_java_options` go last on the driver's JVM options (a JFR recording, an archive's dump).

    A local master's driver listens on loopback only (`loopback_driver_conf`). `object_store`
    (`lake_storage.spark_object_store_access`, for a lake on s3a://) adds S3A's jars and settings;
    its credentials go into the process environment (`spark_submit_env`), never into this command.
    """
    from spark_apps.engine.session import local_driver_java_options, loopback_driver_conf

    spark_submit = Path(sys.executable).parent / "spark-submit"
    loopback = [
        part for key, value in loopback_driver_conf(master).items() for part in ("--conf", f"{key}={value}")
    ]
    access = object_store or SparkObjectStoreAccess()
    driver_options = local_driver_java_options() if class_archive else ""
    store_conf = [part for key, value in access.conf.items() for part in ("--conf", f"{key}={value}")]
    return [
        str(spark_submit),
        "--master",
        master,
        "--name",
        Path(app).stem,
        "--driver-memory",
        DRIVER_MEMORY,
        "--driver-java-options",
        " ".join(
            filter(
                None,
                [
                    f"-Dlog4j2.configurationFile=file:{DRIVER_LOG4J2_CONFIG}",
                    driver_options,
                    extra_java_options,
                ],
            )
        ),
        "--jars",
        ",".join([*spark_jars(), *access.jars]),
        "--conf",
        "spark.ui.enabled=false",
        *loopback,
        *store_conf,
        str(SPARK_APPS_DIR / app),
        *app_args,
    ]


def spark_python_env() -> dict[str, str]:
    """What a spark-submit needs on top of its parent's environment: this venv's Python for the
    driver and the workers, and the project's code importable."""
    return {
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": PROJECT_PYTHONPATH,
    }


def spark_submit_env(
    kafka_security: KafkaClientSecurity | None = None, object_store: SparkObjectStoreAccess | None = None
) -> dict[str, str]:
    """Environment for a spark-submit: the allow-listed part of this process's (`child_env`: never
    Airflow's secrets, nor any inherited Kafka login), plus `spark_python_env`, plus the Kafka
    connection's security settings for the driver and the object store's credentials for S3A (a
    child's environment is readable only by its owner, unlike its command line). Kafka and store
    logins this process inherited are dropped: a driver gets only the ones passed here."""
    security = kafka_security.environment() if kafka_security is not None else {}
    store_credentials = object_store.environment if object_store is not None else {}
    # Only the logins given here: none inherited from this process (a worker's own AWS keys included).
    dropped = {KAFKA_SECURITY_ENV, ACCESS_KEY_ENV, SECRET_KEY_ENV}
    inherited = {key: value for key, value in os.environ.items() if key not in dropped}
    return child_environment({**spark_python_env(), **security, **store_credentials}, environ=inherited)
