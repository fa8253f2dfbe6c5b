"""Session settings and the local connector-jar lookup."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spark_apps.engine.session import (
    DEFAULT_SPARK_JARS_DIR,
    DELTA_CONF,
    SparkJarsMissingError,
    default_jar_dir,
    local_jar_paths,
    required_spark_conf,
    spark_conf,
)


def test_fixture_session_is_utc_with_kafka_and_delta_jars(spark: SparkSession) -> None:
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"
    assert spark.conf.get("spark.sql.extensions") == "io.delta.sql.DeltaSparkSessionExtension"
    jars = spark.sparkContext.getConf().get("spark.jars", "")
    assert "spark-sql-kafka-0-10_2.13-4.2.0.jar" in jars
    assert "delta-spark_4.2_2.13" in jars


def test_conf_without_jars_has_no_delta_or_jars() -> None:
    conf = spark_conf()
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert conf["spark.ui.enabled"] == "false"
    assert "spark.jars" not in conf
    assert "spark.sql.extensions" not in conf


def test_conf_with_delta_jar_enables_delta() -> None:
    jars = ["/j/spark-sql-kafka-0-10_2.13-4.2.0.jar", "/j/delta-spark_4.2_2.13-4.4.0.jar"]
    conf = spark_conf(jars=jars)
    assert conf["spark.jars"] == ",".join(jars)
    for key, value in DELTA_CONF.items():
        assert conf[key] == value


def test_conf_with_only_kafka_jar_has_no_delta() -> None:
    conf = spark_conf(jars=["/j/spark-sql-kafka-0-10_2.13-4.2.0.jar"])
    assert "spark.sql.extensions" not in conf


def test_extra_conf_wins() -> None:
    assert spark_conf({"spark.sql.shuffle.partitions": "8"})["spark.sql.shuffle.partitions"] == "8"


def test_required_conf_is_utc() -> None:
    assert required_spark_conf() == {"spark.sql.session.timeZone": "UTC"}


def test_local_jar_paths_lists_jars_sorted(tmp_path: Path) -> None:
    for name in ("b.jar", "a.jar", "notes.txt"):
        (tmp_path / name).write_text("")
    assert local_jar_paths(tmp_path) == [str(tmp_path / "a.jar"), str(tmp_path / "b.jar")]


@pytest.mark.parametrize("make_dir", [True, False], ids=["empty", "missing"])
def test_local_jar_paths_without_jars_says_run_make_jvm(tmp_path: Path, make_dir: bool) -> None:
    folder = tmp_path / "spark-jars"
    if make_dir:
        folder.mkdir()
    with pytest.raises(SparkJarsMissingError, match=r"run `make jvm`") as error:
        local_jar_paths(folder)
    assert str(folder) in str(error.value)


def test_default_jar_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SPARK_JARS_DIR", raising=False)
    repo_jars = Path(__file__).resolve().parents[4] / ".jvm" / "spark-jars"
    assert default_jar_dir() == DEFAULT_SPARK_JARS_DIR == repo_jars
    monkeypatch.setenv("SPARK_JARS_DIR", str(tmp_path))
    assert default_jar_dir() == tmp_path
