"""The allow-list of a child process's environment (`revenue_platform.child_env`), as pure logic."""

from __future__ import annotations

import pytest

from revenue_platform.child_env import EXTRA_ALLOW_ENV, ChildEnvironmentError, child_environment

TASK_ENVIRONMENT = {
    "PATH": "/venv/bin:/usr/bin",
    "HOME": "/home/airflow",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TZ": "UTC",
    "JAVA_HOME": "/usr/lib/jvm/java-17",
    "SPARK_HOME": "/opt/spark",
    "SPARK_JARS_DIR": "/opt/jars",
    "PYSPARK_PYTHON": "/venv/bin/python",
    "PYTHONPATH": "/repo:/repo/include",
    "HADOOP_CONF_DIR": "/etc/hadoop",
    "KRB5CCNAME": "/tmp/krb5cc",
    "PLATFORM_STATE_DIR": "/state",
    "PLATFORM_LAKE_ROOT": "/lake",
    "REVENUE_PLATFORM_KAFKA_SECURITY": '{"protocol": "SASL_SSL"}',
    "ORDERS_APP_FAULT_POINT": "revenue.after_gold",
    # What must stay in the Airflow process.
    "AIRFLOW__API_AUTH__JWT_SECRET": "jwt",
    "AIRFLOW__API__SECRET_KEY": "key",
    "AIRFLOW__CORE__FERNET_KEY": "fernet",
    "AIRFLOW_CONN_KAFKA_DEFAULT": "{}",
    "AIRFLOW_VAR_ANYTHING": "x",
    "AIRFLOW_HOME": "/airflow",
    "airflow_lowercase": "x",
    "AWS_ACCESS_KEY_ID": "key-id",
    "AWS_SECRET_ACCESS_KEY": "aws",
    # AWS SDK settings S3A does not need from the platform: not inherited unless a site allows them.
    "AWS_SESSION_TOKEN": "session",
    "AWS_PROFILE": "admin",
    "GITHUB_TOKEN": "gh",
}


def test_only_what_spark_the_jvm_and_the_app_read_is_inherited() -> None:
    child = child_environment(environ=TASK_ENVIRONMENT)
    assert set(child) == {
        "PATH",
        "HOME",
        "LANG",
        "LC_ALL",
        "TZ",
        "JAVA_HOME",
        "SPARK_HOME",
        "SPARK_JARS_DIR",
        "PYSPARK_PYTHON",
        "PYTHONPATH",
        "HADOOP_CONF_DIR",
        "KRB5CCNAME",
        "PLATFORM_STATE_DIR",
        "PLATFORM_LAKE_ROOT",
        "REVENUE_PLATFORM_KAFKA_SECURITY",
        "ORDERS_APP_FAULT_POINT",
        # The lake's object-store key pair, which S3A reads from spark-submit's environment; no other AWS_*.
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
    }


def test_overrides_win_and_may_not_name_airflow_variables() -> None:
    child = child_environment({"PYSPARK_PYTHON": "/other/python", "EXTRA": "1"}, environ=TASK_ENVIRONMENT)
    assert (child["PYSPARK_PYTHON"], child["EXTRA"]) == ("/other/python", "1")
    with pytest.raises(ChildEnvironmentError, match="AIRFLOW_CONN_X"):
        child_environment({"AIRFLOW_CONN_X": "postgres://"}, environ=TASK_ENVIRONMENT)


def test_a_site_allows_more_by_name_or_prefix_but_never_airflow() -> None:
    site = {**TASK_ENVIRONMENT, EXTRA_ALLOW_ENV: "AWS_*, GITHUB_TOKEN"}
    child = child_environment(environ=site)
    assert (child["AWS_SESSION_TOKEN"], child["GITHUB_TOKEN"]) == ("session", "gh")
    assert not [name for name in child if name.upper().startswith("AIRFLOW")]
    for entry in ("AIRFLOW_*", "airflow__core__fernet_key", "*"):
        with pytest.raises(ChildEnvironmentError, match="never reach a child"):
            child_environment(environ={**TASK_ENVIRONMENT, EXTRA_ALLOW_ENV: entry})


def test_spark_submit_env_is_the_allow_list_plus_python_and_the_kafka_login(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from revenue_platform.spark_submit import spark_submit_env
    from spark_apps.contract.kafka_security import KAFKA_SECURITY_ENV

    monkeypatch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", "jwt")
    monkeypatch.setenv(KAFKA_SECURITY_ENV, '{"protocol": "SASL_SSL"}')  # a parent's, not this driver's
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "the worker's own")  # likewise
    env = spark_submit_env()
    assert "AIRFLOW__API_AUTH__JWT_SECRET" not in env
    assert KAFKA_SECURITY_ENV not in env
    assert "AWS_SECRET_ACCESS_KEY" not in env
    assert {"PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH", "PATH"} <= set(env)
