"""The environment of every process the platform starts from Airflow: an allow-list, not a copy.

An Airflow task process holds the deployment's secrets in its environment: the API server's JWT
secret (AIRFLOW__API_AUTH__JWT_SECRET, which mints admin tokens), AIRFLOW__API__SECRET_KEY, the
Fernet key, and every connection and variable set as AIRFLOW_CONN_* / AIRFLOW_VAR_*. A child that
copies `os.environ` (subprocess's default, and the Spark provider's hook) hands all of them to
spark-submit, the JVM, the Python driver and anything the app runs, and to whoever can read those
processes' environments or a core dump. `child_environment` keeps only what Spark, the JVM, the Kafka
clients and the platform's code read, and never an AIRFLOW* variable. Every spawn of a child goes
through it: `spark_submit.spark_submit_env` (streaming drivers, cluster submits and kills) and
`spark_submit_operator.PlatformSparkSubmitOperator` (the reprocess job).

The lake's object-store key pair (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) is allowed by name, since
S3A reads it from spark-submit's environment. A site that needs more (other AWS SDK settings, a proxy)
names it in
`REVENUE_PLATFORM_CHILD_ENV_ALLOW`: comma-separated names, a trailing `*` for a prefix
(`AWS_*,HTTPS_PROXY`). AIRFLOW* can not be allowed that way.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from revenue_platform.errors import ConfigError
from spark_apps.contract.object_store import ACCESS_KEY_ENV, SECRET_KEY_ENV

EXTRA_ALLOW_ENV = "REVENUE_PLATFORM_CHILD_ENV_ALLOW"
# Exact names a child may inherit.
ALLOWED_NAMES: frozenset[str] = frozenset(
    {
        # The process basics: where programs are, whose home, which locale and zone, where temp files go.
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        # Python of the driver and its workers (spark_submit.spark_python_env sets the first three).
        "PYTHONPATH",
        "VIRTUAL_ENV",
        "PYTHONHASHSEED",
        "PYTHONUNBUFFERED",
        "PYTHONIOENCODING",
        "PYTHONWARNINGS",
        "PYTHONDONTWRITEBYTECODE",
        # The JVM: spark-submit finds Java through JAVA_HOME or PATH; JDK_JAVA_OPTIONS is the java launcher's.
        "JDK_JAVA_OPTIONS",
        "_JAVA_OPTIONS",
        # Kubernetes masters: the client's cluster login file (a path, the file holds the secret).
        "KUBECONFIG",
        # The platform's own settings, read by the app and the job (paths, topic spec, environment).
        "PLATFORM_STATE_DIR",
        "PLATFORM_LAKE_ROOT",
        "PLATFORM_ENV",
        "TOPIC_SPEC_PATH",
        "JVM_ARTIFACTS_DIR",
        # The Kafka connection's security settings for the driver: set by the launcher, or by the
        # reprocess task (kafka_connection.client_security_environment), or the worker's own.
        "REVENUE_PLATFORM_KAFKA_SECURITY",
        # The lake's object-store credentials, the two names S3A's EnvironmentVariableCredentialsProvider
        # reads (spark_apps.contract.object_store): set by the launcher, or by the reprocess task
        # (reprocessing.object_store_credentials_environment). No other AWS_* name: a site that
        # needs one (a session token, a profile) allows it in REVENUE_PLATFORM_CHILD_ENV_ALLOW.
        ACCESS_KEY_ENV,
        SECRET_KEY_ENV,
    }
)
# Prefixes a child may inherit: Spark's and PySpark's settings (SPARK_HOME, SPARK_CONF_DIR,
# SPARK_LOCAL_IP, SPARK_JARS_DIR ...), the JVM's (JAVA_HOME, JAVA_TOOL_OPTIONS), locale categories,
# Hadoop and YARN client configuration, Kerberos tickets (the Spark hook sets KRB5CCNAME), and the
# streaming app's fault points (armed by the crash tests, inert otherwise: spark_apps.contract.fault_points).
ALLOWED_PREFIXES: tuple[str, ...] = (
    "SPARK_",
    "PYSPARK_",
    "JAVA_",
    "LC_",
    "HADOOP_",
    "YARN_",
    "KRB5",
    "ORDERS_APP_FAULT_",
)
# Never in a child, whatever the allow-lists say: Airflow's configuration, connections and variables.
DENIED_PREFIX = "AIRFLOW"


class ChildEnvironmentError(ConfigError):
    """A child environment was asked to carry an Airflow variable, or the extra allow-list is malformed."""


def _extra_allowed(environ: Mapping[str, str]) -> tuple[frozenset[str], tuple[str, ...]]:
    """The site's additions from REVENUE_PLATFORM_CHILD_ENV_ALLOW: (names, prefixes)."""
    names: set[str] = set()
    prefixes: list[str] = []
    for raw in environ.get(EXTRA_ALLOW_ENV, "").split(","):
        entry = raw.strip()
        if not entry:
            continue
        if entry.upper().startswith(DENIED_PREFIX) or entry == "*":
            raise ChildEnvironmentError(
                f"{EXTRA_ALLOW_ENV} names {entry!r}: Airflow's variables (AIRFLOW*) hold its secrets and "
                "never reach a child process; remove it (the platform's children do not read them)"
            )
        if entry.endswith("*"):
            prefixes.append(entry[:-1])
        else:
            names.add(entry)
    return frozenset(names), tuple(prefixes)


def is_inherited(name: str, extra_names: Iterable[str] = (), extra_prefixes: tuple[str, ...] = ()) -> bool:
    """Whether a child inherits the variable `name` (never an AIRFLOW* one)."""
    if name.upper().startswith(DENIED_PREFIX):
        return False
    return (
        name in ALLOWED_NAMES
        or name in extra_names
        or name.startswith(ALLOWED_PREFIXES)
        or (bool(extra_prefixes) and name.startswith(extra_prefixes))
    )


def child_environment(
    overrides: Mapping[str, str] | None = None, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The allow-listed part of `environ` (default: this process's) with `overrides` on top.

    `overrides` is what the caller sets on purpose (Spark's Python, a job's env_vars); an AIRFLOW*
    name there is a bug and fails with ChildEnvironmentError rather than being passed or dropped.
    """
    source = os.environ if environ is None else environ
    extra_names, extra_prefixes = _extra_allowed(source)
    inherited = {
        name: value for name, value in source.items() if is_inherited(name, extra_names, extra_prefixes)
    }
    chosen = dict(overrides or {})
    airflow = sorted(name for name in chosen if name.upper().startswith(DENIED_PREFIX))
    if airflow:
        raise ChildEnvironmentError(
            f"a child process was to get {', '.join(airflow)}: Airflow's variables never leave the "
            "Airflow processes; pass what the child needs under another name"
        )
    return {**inherited, **chosen}
