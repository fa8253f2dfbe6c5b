"""Only holders of the cluster's secret use it: the master, the workers and the platform's drivers
authenticate with `spark.authenticate` and the secret in the cluster's SPARK_CONF_DIR; a Spark
application of anyone else on the machine never registers, so it cannot run code on the workers,
which hold the object store's keys (docs/security.md, "The local cluster").

The other direction (the platform's own drivers do register) is what the fault test and the e2e
demo on the cluster run on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from revenue_platform.local_stack.cluster import SPARK_DEFAULTS_FILE, LocalCluster
from revenue_platform.spark_submit import spark_submit_env

pytestmark = pytest.mark.cluster

REFUSED = "Failed to connect to master"
WAIT_S = 180.0

OUTSIDER_APP = """
from pyspark.sql import SparkSession
spark = SparkSession.builder.appName("outsider").config("spark.ui.enabled", "false").getOrCreate()
print("OUTSIDER RAN", spark.range(10).count(), flush=True)
"""


def _secret(conf: Path) -> str:
    [line] = [line for line in conf.read_text().splitlines() if line.startswith("spark.authenticate.secret ")]
    return line.split(" ", 1)[1].strip()


def test_an_application_without_the_clusters_secret_never_registers(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    conf = cluster.settings.spark_conf_dir / SPARK_DEFAULTS_FILE
    assert conf.stat().st_mode & 0o777 == 0o600
    assert cluster.settings.spark_conf_dir.stat().st_mode & 0o777 == 0o700
    secret = _secret(conf)
    assert len(secret) == 64, "32 random bytes, hex"
    # On no command line: /proc/<pid>/cmdline is readable by every local user, a 0600 file is not.
    daemons = [cluster.master, *cluster.workers]
    for daemon in daemons:
        pid = daemon.pid()
        assert pid is not None, f"{daemon.name} runs"
        assert secret.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes(), daemon.name

    # Another local user's application: Spark's own defaults (an empty SPARK_CONF_DIR), the master's URL.
    script = tmp_path / "outsider.py"
    script.write_text(OUTSIDER_APP)
    empty_conf = tmp_path / "conf"
    empty_conf.mkdir()
    env = {**spark_submit_env(), "SPARK_CONF_DIR": str(empty_conf)}
    log = tmp_path / "outsider.log"
    spark_submit = Path(sys.executable).parent / "spark-submit"
    with log.open("w") as out:
        outsider = subprocess.Popen(
            [str(spark_submit), "--master", cluster.settings.spark_master_url, str(script)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + WAIT_S
        while REFUSED not in log.read_text() and outsider.poll() is None and time.monotonic() < deadline:
            time.sleep(1.0)
        text = log.read_text()
        assert REFUSED in text, f"the outsider was not refused within {WAIT_S:.0f} s:\n{text[-3000:]}"
        assert "OUTSIDER RAN" not in text
        status = cluster.master_status() or {}
        names = [app.get("name") for key in ("activeapps", "completedapps") for app in status.get(key, [])]
        assert "outsider" not in names, names
    finally:
        if outsider.poll() is None:
            os.killpg(outsider.pid, signal.SIGKILL)
        outsider.wait(timeout=30)
