"""SparkSession construction shared by the streaming app, the batch job and tests (`build_spark_session`).

One place decides the settings every session of the platform needs: UTC session
time zone (the transformations assume it), few shuffle partitions (the local stack
has 2 cores), no UI, and — only when the Delta jar is on the given jar list — the
Delta SQL extension and catalog. Connector jars (Kafka, Delta) come from a local
folder filled by ``make jvm``, never from Maven at session start, so sessions start
offline and reproducibly; a lake on an object store adds Hadoop's S3A jars from the folder
``make object-store-jars`` fills (``object_store_jar_paths``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from pyspark.sql import SparkSession

REPO_ROOT = Path(__file__).resolve().parents[2]  # spark_apps/engine/session.py
SPARK_JARS_DIR_ENV = "SPARK_JARS_DIR"
DEFAULT_SPARK_JARS_DIR = REPO_ROOT / ".jvm" / "spark-jars"
SPARK_S3_JARS_DIR_ENV = "SPARK_S3_JARS_DIR"
DEFAULT_SPARK_S3_JARS_DIR = REPO_ROOT / ".jvm" / "spark-s3"
DRIVER_CLASS_ARCHIVE_ENV = "SPARK_DRIVER_CLASS_ARCHIVE"
DRIVER_CLASS_ARCHIVE_DIR = REPO_ROOT / ".jvm" / "class-archive"

IDLE_POLL_MS = 100

DEFAULT_CONF: Mapping[str, str] = {
    "spark.sql.shuffle.partitions": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # The dedupe state (spark_apps.revenue.dedupe) lives in RocksDB, which transformWithState requires: it
    # keeps state on local disk with a bounded cache rather than on the JVM heap, and with changelog
    # checkpointing a batch uploads only the keys it changed.
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
    # Keeping the state's row count (a progress's `numRowsTotal`, which nothing here reads) makes RocksDB
    # read every key before it writes it: a second read per order id in the dedupe state, 15-30 % of a
    # dedupe batch's executor CPU (bench/results/history.md, "the dedupe state's second read per order").
    "spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows": "false",
    # A batch runs when records arrive, never for the watermark alone: the engine's batch commits
    # bronze and gold, and the dedupe state's timers can wait for the next records.
    "spark.sql.streaming.noDataMicroBatches.enabled": "false",
    # With `trigger.interval: 0 seconds` (batches back to back), an idle app asks Kafka for new offsets
    # this often instead of Spark's 10 ms: 10 requests a second, and at most this much added to the
    # first record after a pause.
    "spark.sql.streaming.pollingDelay": f"{IDLE_POLL_MS}ms",
}
LOOPBACK = "127.0.0.1"


def loopback_driver_conf(master: str) -> dict[str, str]:
    """For a `local[...]` master, or a standalone master on this machine's loopback (`make
    cluster-up`): the driver's ports listen on loopback only (Spark's default is every interface).
    Other masters get nothing: executors on other machines must reach the driver."""
    on_this_machine = master.startswith("local") or master.startswith(
        (f"spark://{LOOPBACK}:", "spark://localhost:")
    )
    if not on_this_machine:
        return {}
    return {"spark.driver.bindAddress": LOOPBACK, "spark.driver.host": LOOPBACK}


# The streaming app caches each micro-batch once and reads it whole for bronze and the Kafka side outputs.
# Spark's default cache stores columns: it builds them from the rows and rows from them on every read (and
# compressed them, at ~2.5 s per 500,000 records: bench/results/history.md, "the rest of the ingest batch").
# The batch is cached as Spark's row bytes instead, uncompressed, for a batch that lives a few seconds
# (spark_apps/jvm/order-validator, `UnsafeRowBatches`: a copy in, a pointer per row out;
# bench/results/history.md, "the batch cache as Spark's row bytes"). A static setting: it must be set before
# the session starts.
# (`bench.dedupe_operator` and the tests' session cache the same way.)
ROW_CACHE_SERIALIZER = "io.github.revenueplatform.cache.UnsafeRowBatches"
BATCH_CACHE_CONF: Mapping[str, str] = {"spark.sql.cache.serializer": ROW_CACHE_SERIALIZER}

# FileContext's `file:` file system: Hadoop's, without a `chmod` and `readlink` process per checkpoint
# and Delta log file (spark_apps/jvm/order-validator, `ForklessLocalFs`). Needs that jar on the session's
# classpath, as the batch cache does.
LOCAL_FILES_CONF: Mapping[str, str] = {
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "io.github.revenueplatform.fs.ForklessLocalFs"
}


DELTA_CONF: Mapping[str, str] = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # Delta rebuilds a table's snapshot after every commit with this many tasks (default 50). Our
    # tables' logs are small and a micro-batch commits several times: on a few cores, 50 tiny tasks
    # per rebuild were ~half of each batch (bench/results/history.md, "snapshotPartitions").
    "spark.databricks.delta.snapshotPartitions": "2",
    # Spark derives each commit's checksum from the one before, and lake maintenance writes the checksum
    # of its own commits on bronze (`revenue_platform.lake_checksums`), so the app's next append does not
    # rebuild bronze's state. Those leave out the file list Spark keeps in a small table's checksum; with
    # this on, Spark would rebuild that list at its next commit on a small table, as bronze is right after
    # the day's compaction (docs/performance.md, "Day 30 against day 1"). Off, no checksum holds the list;
    # a reader lists a small table's files from its log instead.
    "spark.databricks.delta.allFilesInCrc.enabled": "false",
}


class SparkJarsMissingError(FileNotFoundError):
    """The local connector-jar folder is missing or holds no jars."""


def default_jar_dir() -> Path:
    """``$SPARK_JARS_DIR`` if set, else ``<repo>/.jvm/spark-jars``."""
    from_env = os.environ.get(SPARK_JARS_DIR_ENV)
    return Path(from_env) if from_env else DEFAULT_SPARK_JARS_DIR


def local_jar_paths(jar_dir: Path | None = None) -> list[str]:
    """Absolute paths of the ``*.jar`` files in ``jar_dir`` (sorted, for stable classpaths)."""
    folder = jar_dir if jar_dir is not None else default_jar_dir()
    jars = sorted(str(p.resolve()) for p in folder.glob("*.jar")) if folder.is_dir() else []
    if not jars:
        raise SparkJarsMissingError(
            f"No Spark connector jars in {folder}: run `make jvm` to fetch the Kafka and Delta jars "
            f"(or point {SPARK_JARS_DIR_ENV} at a folder that has them)."
        )
    return jars


def object_store_jar_paths(jar_dir: Path | None = None) -> list[str]:
    """Absolute paths of S3A's jars (hadoop-aws and the AWS SDK parts it uses), for a lake on s3a://."""
    folder = jar_dir or Path(os.environ.get(SPARK_S3_JARS_DIR_ENV) or DEFAULT_SPARK_S3_JARS_DIR)
    jars = sorted(str(p.resolve()) for p in folder.glob("*.jar")) if folder.is_dir() else []
    if not any(Path(jar).name.startswith("hadoop-aws-") for jar in jars):
        raise SparkJarsMissingError(
            f"No hadoop-aws jar in {folder}: the lake is on an object store (s3a://), which Spark reaches "
            f"through S3A; fetch its jars with `make object-store-jars` (or point {SPARK_S3_JARS_DIR_ENV} "
            "at a folder that has them)."
        )
    return jars


def drivers_java() -> Path | None:
    """The `java` a Spark driver starts with: spark-submit's choice (and pyspark's, for a session this
    process starts), $JAVA_HOME/bin/java when JAVA_HOME is set, else the one on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        return Path(java_home) / "bin" / "java"
    found = shutil.which("java")
    return Path(found) if found else None


def jdk_release(java: Path) -> dict[str, str]:
    """The `release` file next to the JDK's `bin/` (JAVA_VERSION, JAVA_RUNTIME_VERSION, IMPLEMENTOR...),
    read without starting a JVM; empty when there is none (a JRE without one, a version manager's shim)."""
    release = java.resolve().parent.parent / "release"
    try:
        text = release.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    return dict(re.findall(r'^([A-Z_]+)="([^"]*)"', text, flags=re.MULTILINE))


def _feature_version(release: Mapping[str, str]) -> int | None:
    match = re.match(r"(?:1\.)?(\d+)", release.get("JAVA_VERSION", ""))
    return int(match.group(1)) if match else None


def java_feature_version(java: Path) -> int | None:
    """The JDK's feature version (17, 21, 25) from its `release` file; None when unknown."""
    return _feature_version(jdk_release(java))


# The class archive is for JDK 17-23. From JDK 24 on, a driver given a dynamic archive logs "[error][cds]"
# lines at every start (Spark's launcher passes module options, --add-modules and
# --enable-native-access, that the JDK's own base archive was dumped without), and on JDK 25 it did
# not help where it counts: live 20,000/s p99 21.4-37.6 s with it (median of four 29.0 s) against
# 25.3 and 25.8 s without it in the same 20 minutes, although it started ~5 s sooner
# (bench/results/history.md, "both engines on JDK 17 and on JDK 25").
LAST_JDK_WITH_CLASS_ARCHIVE = 23


def class_archive_helps(java: Path | None) -> bool:
    """Whether drivers on `java` get a class archive: a JDK whose `release` file says 17 up to
    LAST_JDK_WITH_CLASS_ARCHIVE. One whose version is unknown gets none: it may be 24 or newer."""
    return _archive_helps(_feature_version(jdk_release(java)) if java is not None else None)


def _archive_helps(version: int | None) -> bool:
    return version is not None and version <= LAST_JDK_WITH_CLASS_ARCHIVE


def _pyspark_dir() -> Path | None:
    """Where pyspark (and so Spark's jars) is installed, without importing more of it."""
    spec = importlib.util.find_spec("pyspark")
    return Path(spec.origin).resolve().parent if spec is not None and spec.origin else None


def driver_class_archive() -> Path | None:
    """``$SPARK_DRIVER_CLASS_ARCHIVE`` if set, else the archive `make jvm` writes for the driver's JDK
    (revenue_platform.local_stack.class_archive), ``<repo>/.jvm/class-archive/spark-driver-jdk<N>-
    <build>.jsa``; None for a JDK it does not help (`class_archive_helps`).

    A JVM maps only an archive its own build wrote, so the name carries the JDK's build: drivers on
    JDK 17 and JDK 21 on one machine (JAVA_HOME chooses; docs/local-stack.md) each keep theirs, and a
    JDK upgraded in place (a new JAVA_RUNTIME_VERSION) gets a new one rather than one its mtime
    wrongly calls current. It also carries where the classpath's jars are (the archive's folder, in
    the checkout beside `.jvm/spark-jars`, and pyspark's): the JVM refuses an archive made with jars
    at other paths, so a moved checkout, or a `.jvm/` copied from another one, names a new archive
    for `make jvm` to write instead of keeping one no driver can map."""
    from_env = os.environ.get(DRIVER_CLASS_ARCHIVE_ENV)
    if from_env:
        return Path(from_env)
    java = drivers_java()
    if java is None:
        return None
    release = jdk_release(java)  # read once: the version decides, the build names
    version = _feature_version(release)
    if not _archive_helps(version):
        return None
    build = "|".join(
        [
            release.get("IMPLEMENTOR", ""),
            release.get("JAVA_RUNTIME_VERSION", ""),
            str(java.resolve()),
            str(DRIVER_CLASS_ARCHIVE_DIR.resolve()),
            str(_pyspark_dir()),
        ]
    )
    tag = hashlib.sha256(build.encode()).hexdigest()[:10]
    return DRIVER_CLASS_ARCHIVE_DIR / f"spark-driver-jdk{version}-{tag}.jsa"


def driver_class_archive_options(archive: Path | None = None) -> str:
    """JVM options for a driver started on this machine: map the class archive, when there is one
    and the driver's JDK is one it helps (`class_archive_helps`).

    A driver then maps ~16,000 classes of Spark, Delta and the Kafka connector from the archive instead of
    loading and verifying them from the jars: a trivial Spark + Delta driver starts in ~18 s instead of ~28
    s on 2 cores (bench/results/history.md, "the driver's class archive"). A stale archive (another pyspark
    or JDK) is refused by the JVM, which then starts as without it and says so; JVM warnings go to stderr,
    as Spark's own logs do. No archive, no options: a missing file would switch off the JDK's own
    archive too.
    """
    path = archive if archive is not None else driver_class_archive()
    if path is None or not path.is_file():
        return ""
    return f"-XX:SharedArchiveFile={path} -Xlog:disable -Xlog:all=warning:stderr"


DRIVER_JIT_ENV = "SPARK_DRIVER_JIT"
"""How a driver started on this machine compiles its hot code: `tiered` (the default, the JDK's own:
C1 first, then C2) or `c1` (-XX:TieredStopAtLevel=1, the first tier only). With `c1` a short job's
driver ends ~20 % sooner on 2 cores, where C2's compiler threads compete with the job for both
cores (the class archive's training job: 41 s against 53 s, docs/testing.md); a long-running
driver's hot loops run slower without C2, so the apps keep `tiered`. The test suite's drivers,
each alive for a minute or two, use `c1` (tests/conftest.py)."""

_DRIVER_JIT_OPTIONS = {"tiered": "", "c1": "-XX:TieredStopAtLevel=1"}


def driver_jit_options() -> str:
    """JVM options for `SPARK_DRIVER_JIT` (see DRIVER_JIT_ENV); an unknown value is refused, named."""
    value = os.environ.get(DRIVER_JIT_ENV, "").strip() or "tiered"
    if value not in _DRIVER_JIT_OPTIONS:
        from spark_apps.contract.config import AppConfigError

        raise AppConfigError(
            f"{DRIVER_JIT_ENV}={value!r}: expected one of {sorted(_DRIVER_JIT_OPTIONS)} (unset means tiered)"
        )
    return _DRIVER_JIT_OPTIONS[value]


def local_driver_java_options() -> str:
    """JVM options for a driver started on this machine: the class archive's (when there is one,
    `driver_class_archive_options`) and the JIT's (`driver_jit_options`)."""
    return " ".join(option for option in (driver_class_archive_options(), driver_jit_options()) if option)


def _has_delta(jars: Sequence[str]) -> bool:
    return any(Path(j).name.startswith("delta-spark") for j in jars)


def spark_conf(
    extra_conf: Mapping[str, str] | None = None, jars: Sequence[str] | None = None
) -> dict[str, str]:
    """The full configuration ``build_spark_session`` applies (``extra_conf`` wins)."""
    conf = {**DEFAULT_CONF, **required_spark_conf()}
    if jars:
        conf["spark.jars"] = ",".join(jars)
        if _has_delta(jars):
            conf.update(DELTA_CONF)
    conf.update(extra_conf or {})
    return conf


def build_spark_session(
    app_name: str,
    master: str | None = None,
    extra_conf: Mapping[str, str] | None = None,
    jars: list[str] | None = None,
) -> SparkSession:
    """Create (or reuse) the session with the platform's settings (the apps' and the tests').

    `master` None: the one spark-submit passed (the apps); tests name theirs. A local master's
    driver listens on loopback only (`loopback_driver_conf`).
    Note: ``spark.jars`` only takes effect when this call starts the JVM; a session
    that already exists in the process keeps its classpath.
    """
    from pyspark import SparkConf, SparkContext

    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
        # This call may start the driver's JVM (tests, tools): with the class archive, as spark-submit's.
        # (and the JIT setting, DRIVER_JIT_ENV).
        driver_options = local_driver_java_options()
        if driver_options and "spark.driver.extraJavaOptions" not in (extra_conf or {}):
            builder = builder.config("spark.driver.extraJavaOptions", driver_options)
    else:
        # Under spark-submit the master is a JVM system property: a SparkConf made before the gateway
        # is up reads nothing ("" - and the driver would listen on every interface). Connecting to the
        # gateway first (what getOrCreate does anyway) makes it read spark-submit's settings.
        SparkContext._ensure_initialized()
    running_on = master if master is not None else SparkConf().get("spark.master", "") or ""
    for key, value in spark_conf({**loopback_driver_conf(running_on), **(extra_conf or {})}, jars).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def required_spark_conf() -> dict[str, str]:
    """Spark settings the transformations rely on (set on every session): timestamps rendered as
    text (JSON values, revenue keys) use the session time zone."""
    return {"spark.sql.session.timeZone": "UTC"}
