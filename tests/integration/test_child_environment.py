"""What the processes the platform starts from Airflow see of its environment: the allow-list only.

A task process holds Airflow's secrets in its environment (the conftest puts the test stack's JWT
secret, API secret key and connections there, as `make up` does; the tests add a Fernet key, a
variable and an unrelated token). Each child is real: the streaming app's detached spark-submit
started by the launcher (its environment read from /proc/<pid>/environ), and the reprocess DAG's
Spark task class running a real spark-submit whose Python driver writes down the environment it got.
"""

from __future__ import annotations

import json
import secrets
import sys
import time
from pathlib import Path

import pytest

from revenue_platform import processes
from revenue_platform.paths import PROJECT_PYTHONPATH
from spark_apps.contract.kafka_security import KAFKA_SECURITY_ENV, KafkaClientSecurity
from tests.streaming_helpers import load_dags

pytestmark = pytest.mark.integration

# Planted next to what the conftest already set (AIRFLOW__API_AUTH__JWT_SECRET, AIRFLOW__API__SECRET_KEY,
# AIRFLOW_CONN_KAFKA_DEFAULT, AIRFLOW_CONN_SPARK_DEFAULT).
PLANTED = {
    "AIRFLOW__CORE__FERNET_KEY": secrets.token_urlsafe(32),
    "AIRFLOW_VAR_PAYMENTS_API_KEY": secrets.token_urlsafe(16),
    "AIRFLOW_CONN_WAREHOUSE": "postgresql://etl:" + secrets.token_urlsafe(12) + "@db/warehouse",
    "UNRELATED_SERVICE_TOKEN": secrets.token_urlsafe(16),
}
DUMP_ENV_APP = """\
import json, os, sys
with open(sys.argv[1], "w") as out:
    json.dump(dict(os.environ), out)
"""


@pytest.fixture
def secrets_in_the_task(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The task process's environment with Airflow's secrets in it; returns every secret planted."""
    import os

    for name, value in PLANTED.items():
        monkeypatch.setenv(name, value)
    present = {name: value for name, value in os.environ.items() if name.startswith("AIRFLOW")}
    assert {"AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__API__SECRET_KEY"} <= set(present)
    return {**present, "UNRELATED_SERVICE_TOKEN": PLANTED["UNRELATED_SERVICE_TOKEN"]}


def assert_nothing_leaked(environment: dict[str, str], planted: dict[str, str]) -> None:
    assert [name for name in environment if name.startswith("AIRFLOW")] == []
    assert "UNRELATED_SERVICE_TOKEN" not in environment
    # Nor under another name (short settings such as a parallelism of "4" are no secret to look for).
    values = "\n".join(environment.values())
    assert [name for name, value in planted.items() if len(value) >= 16 and value in values] == []


def _environment_once_set(pid: int, timeout_s: float = 10.0) -> dict[str, str]:
    """The environment of `pid`, read again while it comes back empty and the process lives: in the
    middle of an exec (spark-submit is a script that execs the JVM) /proc/<pid>/environ reads as
    nothing until the new program's stack is set up."""
    deadline = time.monotonic() + timeout_s
    environment = processes.environment(pid)
    while not environment and processes.is_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
        environment = processes.environment(pid)
    return environment


def test_a_launched_streaming_driver_gets_no_airflow_secret(
    secrets_in_the_task: dict[str, str], tmp_path: Path
) -> None:
    from revenue_platform.streaming.launcher import SparkTarget, launch

    security = KafkaClientSecurity.model_validate(
        {
            "protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_username": "platform",
            "sasl_password": "kafka-" + secrets.token_urlsafe(8),
        }
    )
    deployment_id = f"childenv{secrets.token_hex(3)}"
    handle = launch(SparkTarget("local[1]"), deployment_id, {}, secrets.token_hex(8), str(tmp_path), security)
    assert handle.pid is not None
    try:
        environment = _environment_once_set(handle.pid)
    finally:
        processes.terminate(handle.pid, 10.0)
    assert environment, "the driver was gone before its environment could be read"
    assert_nothing_leaked(environment, secrets_in_the_task)
    # What spark-submit and the driver need is there: this venv's Python, the project, the Kafka login.
    assert environment["PYSPARK_PYTHON"] == sys.executable
    assert environment["PYTHONPATH"] == PROJECT_PYTHONPATH
    assert environment["PATH"]
    assert json.loads(environment[KAFKA_SECURITY_ENV])["sasl_username"] == "platform"


def test_the_reprocess_job_s_spark_submit_gets_no_airflow_secret_and_only_this_run_s_login(
    secrets_in_the_task: dict[str, str], tmp_path: Path
) -> None:
    """The DAG's operator class with its `secret_environment`: the login reaches spark-submit and
    never the task process's environment, and a later run of the same operator object without one
    (a plaintext connection, as `dag.test()` runs the next task in the same process) hands none on."""
    import os

    from revenue_platform.reprocessing import JOB_SPARK_CONF, spark_env, spark_jars_csv

    submit = load_dags("reprocess_revenue")["reprocess_revenue"].get_task("submit_reprocess_job")
    assert submit._secret_environment is not None  # the DAG wires its secrets this way
    app = tmp_path / "dump_env.py"
    app.write_text(DUMP_ENV_APP)
    dumped = tmp_path / "environment.json"
    kafka_login = json.dumps({"protocol": "SASL_PLAINTEXT", "sasl_password": secrets.token_hex(8)})
    logins = iter([{KAFKA_SECURITY_ENV: kafka_login}, {}])
    # The DAG's own operator class and settings; only the application and the secrets differ.
    operator = type(submit)(
        task_id="submit_reprocess_job",
        conn_id=submit._conn_id,
        application=str(app),
        application_args=[str(dumped)],
        jars=spark_jars_csv(),
        env_vars=spark_env(),
        # The plan's settings for a local lake (the DAG renders them from the plan's XCom).
        conf=dict(JOB_SPARK_CONF),
        secret_environment=lambda _context: next(logins),
    )
    assert KAFKA_SECURITY_ENV not in os.environ
    operator.execute(context={})

    environment = json.loads(dumped.read_text())
    assert_nothing_leaked(environment, secrets_in_the_task)
    assert environment[KAFKA_SECURITY_ENV] == kafka_login
    assert environment["PYSPARK_PYTHON"] == sys.executable
    assert KAFKA_SECURITY_ENV not in os.environ

    dumped.unlink()
    operator.execute(context={})
    assert KAFKA_SECURITY_ENV not in json.loads(dumped.read_text())
