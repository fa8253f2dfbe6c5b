"""The Spark driver's class archive (JDK class data sharing), written by `make jvm`.

A Spark driver on 2 cores spends ~10 of its ~28 s of start (a trivial Spark + Delta job) loading and
verifying the classes of Spark SQL, Delta and the Kafka connector. The JDK can dump the classes a run
loaded into an archive (`-XX:ArchiveClassesAtExit`) that later JVMs with the same classpath map
instead (`-XX:SharedArchiveFile`, which `spark_apps.engine.session.driver_class_archive_options`
adds to every driver started on this machine). The archive is written once, by a training run of
`spark_apps/class_archive_training_job.py`, and again whenever a jar it was made from or the JDK is
newer than it. There is one archive per JDK build (`driver_class_archive`): run `make jvm` with the
JAVA_HOME the drivers use. JDK 24 and newer get none (`class_archive_helps`). It is an optimisation
only: a driver without it, or with a stale one, starts as before (the JVM checks the classpath and
says when it refuses the archive).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from revenue_platform.errors import PrerequisiteError
from revenue_platform.paths import SPARK_APPS_DIR, SPARK_JARS_DIR, pyspark_jars_dir
from revenue_platform.spark_submit import spark_submit_command, spark_submit_env
from spark_apps.engine.session import (
    DRIVER_CLASS_ARCHIVE_DIR,
    LAST_JDK_WITH_CLASS_ARCHIVE,
    driver_class_archive,
    drivers_java,
)

TRAINING_JOB = "class_archive_training_job.py"
# The training run is a few seconds of Spark work after a cold start; far more means something hangs.
TRAINING_TIMEOUT_S = 600


def _newest_mtime(paths: Iterable[Path]) -> float:
    return max((path.stat().st_mtime for path in paths if path.exists()), default=0.0)


def superseded_archives(target: Path) -> list[Path]:
    """Archives `target` replaces (~200 MB each, nothing maps them any more): the one archive `make jvm`
    wrote before archives were kept per JDK, and other builds of the same JDK feature version (the
    JDK upgraded in place, or another vendor's). One archive per feature version stays on disk."""
    if target.parent != DRIVER_CLASS_ARCHIVE_DIR:
        return []
    feature = target.name.split("-")[2]  # spark-driver-jdk<N>-<build>.jsa
    candidates = [
        DRIVER_CLASS_ARCHIVE_DIR / "spark-driver.jsa",
        DRIVER_CLASS_ARCHIVE_DIR / f"spark-driver-{feature}.jsa",
        *DRIVER_CLASS_ARCHIVE_DIR.glob(f"spark-driver-{feature}-*.jsa"),
    ]
    return [path for path in candidates if path != target and path.is_file()]


def archive_inputs() -> list[Path]:
    """What the archive is made from: Spark's jars, the connector jars, the JDK, the training job."""
    java = drivers_java()
    jdk = [java.resolve()] if java else []
    return [
        *pyspark_jars_dir().glob("*.jar"),
        *SPARK_JARS_DIR.glob("*.jar"),
        *jdk,
        SPARK_APPS_DIR / TRAINING_JOB,
    ]


def archive_is_current(archive: Path, inputs: Iterable[Path]) -> bool:
    """True when `archive` exists and is newer than each of `inputs`."""
    return archive.is_file() and archive.stat().st_mtime >= _newest_mtime(inputs)


def build_driver_class_archive(force: bool = False, archive: Path | None = None) -> bool:
    """Write the driver's class archive by a training run unless it is current; True when written.

    The archive is written next to its final path and renamed into place, so a driver starting
    meanwhile maps the old one or none, never half of one.
    """
    target = archive if archive is not None else driver_class_archive()
    if target is None:
        print(
            f"[jvm] no class archive for the driver's JDK ({drivers_java()}): one helps drivers on JDK 17-"
            f"{LAST_JDK_WITH_CLASS_ARCHIVE} only, told by the JDK's `release` file "
            "(spark_apps.engine.session.class_archive_helps)",
            flush=True,
        )
        return False
    if not force and archive_is_current(target, archive_inputs()):
        print(f"[jvm] {target.name} is up to date", flush=True)
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    staged = target.with_suffix(".jsa.tmp")
    staged.unlink(missing_ok=True)
    command = spark_submit_command(
        TRAINING_JOB,
        [],
        class_archive=False,
        extra_java_options=f"-XX:ArchiveClassesAtExit={staged} -Xlog:disable -Xlog:all=error:stderr",
    )
    print(
        f"[jvm] writing the Spark driver's class archive {target} (a ~1 minute training run) ...", flush=True
    )
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="class-archive-training-") as scratch:
        command.append(scratch)
        try:
            done = subprocess.run(
                command,
                env=spark_submit_env(),
                capture_output=True,
                text=True,
                timeout=TRAINING_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired as timeout:
            raise PrerequisiteError(
                f"The class archive's training run did not end within {TRAINING_TIMEOUT_S} s; "
                f"`{' '.join(command[:3])} ...` hangs. Its output:\n{timeout.stderr!s:.4000}"
            ) from timeout
    if done.returncode != 0 or not staged.is_file():
        raise PrerequisiteError(
            f"The class archive's training run failed (exit {done.returncode}); Spark drivers still work "
            f"without it, only slower to start. Its output:\n{(done.stdout + done.stderr)[-4000:]}"
        )
    os.replace(staged, target)
    for superseded in superseded_archives(target):
        superseded.unlink(missing_ok=True)
    size_mib = target.stat().st_size / 2**20
    print(f"[jvm] {target.name}: {size_mib:.0f} MiB in {time.monotonic() - started:.0f} s", flush=True)
    return True
