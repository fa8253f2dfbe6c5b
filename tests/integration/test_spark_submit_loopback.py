"""A job submitted without any bind settings (as SparkSubmitOperator submits the reprocess job) still
gets a driver that listens on loopback only when its master is local: the session builder reads the
master spark-submit passed. Before, it read "" and left Spark's default, every interface."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from revenue_platform.spark_submit import spark_submit_env

pytestmark = pytest.mark.integration

PROBE = """
from spark_apps.engine.session import build_spark_session

spark = build_spark_session("loopback-probe")
conf = spark.sparkContext.getConf()
print("BIND", conf.get("spark.driver.bindAddress"), conf.get("spark.driver.host"))
spark.stop()
"""


def test_a_plainly_submitted_job_binds_its_driver_to_loopback(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    spark_submit = Path(sys.executable).parent / "spark-submit"
    done = subprocess.run(
        [str(spark_submit), "--master", "local[1]", "--conf", "spark.ui.enabled=false", str(probe)],
        env=spark_submit_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "BIND 127.0.0.1 127.0.0.1" in done.stdout, done.stdout[-2000:]
