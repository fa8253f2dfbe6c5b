"""Fetch the JVM artifacts (Kafka broker, Spark's Kafka connector, Delta) with Maven, and build ours.

Only Maven Central is used, through the poms in include/jvm/. Jars that pyspark
already ships (Scala, Jackson, Hadoop, Parquet, logging) are pruned from the Spark
folder: left in, they would shadow or clash with Spark's own versions. The project's own
JVM code (the order validator's fast path, spark_apps/jvm/order-validator) is compiled with
`javac` against the jars pyspark ships — no Maven, no network — into a jar in the same folder.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from revenue_platform.errors import PrerequisiteError
from revenue_platform.local_stack.prerequisites import require_maven
from revenue_platform.paths import (
    JVM_POMS_DIR,
    KAFKA_BROKER_JARS_DIR,
    KAFKA_TOOLS_JARS_DIR,
    OBJECT_STORE_JARS_DIR,
    ORDER_VALIDATOR_JAR,
    ORDER_VALIDATOR_SOURCE_DIR,
    SPARK_JARS_DIR,
    SPARK_S3_JARS_DIR,
    pyspark_jars_dir,
)

_JAR_NAME = re.compile(r"^(?P<artifact>.+?)-(?P<version>\d+(?:\.\d+)+[^/]*)\.jar$")
# Logging bindings come from pyspark; a second SLF4J binding only produces warnings.
_ALWAYS_PRUNED_PREFIXES = ("log4j-", "slf4j-")


def artifact_name(jar_file_name: str) -> str:
    """`jackson-core-2.13.5.jar` -> `jackson-core`; names without a version are returned whole."""
    match = _JAR_NAME.match(jar_file_name)
    return match.group("artifact") if match else jar_file_name.removesuffix(".jar")


def _copy_dependencies(pom_dir: Path, output_dir: Path) -> None:
    output_dir.mkdir(parents=True, exist_ok=True)
    command = [
        "mvn",
        "-B",
        "-q",
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={output_dir}",
    ]
    print(f"[jvm] fetching {pom_dir.name} from Maven Central into {output_dir} ...", flush=True)
    completed = subprocess.run(command, cwd=pom_dir, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        tail = "\n".join((completed.stdout + completed.stderr).strip().splitlines()[-15:])
        raise PrerequisiteError(
            f"Maven could not fetch {pom_dir.name} (exit {completed.returncode}). Check that Maven Central "
            f"is reachable (proxy settings in ~/.m2/settings.xml) and retry `make jvm`.\n{tail}"
        )


def prune_jars_shipped_by_pyspark(spark_jars_dir: Path, shipped_dir: Path) -> list[str]:
    """Delete jars from `spark_jars_dir` whose artifact pyspark already ships; return their names."""
    shipped = {artifact_name(jar.name) for jar in shipped_dir.glob("*.jar")}
    removed = []
    for jar in sorted(spark_jars_dir.glob("*.jar")):
        name = artifact_name(jar.name)
        if name in shipped or name.startswith(_ALWAYS_PRUNED_PREFIXES):
            jar.unlink()
            removed.append(jar.name)
    return removed


def jvm_artifacts_present() -> bool:
    """True when every jar folder has been fetched (broker, Kafka's CLI tools, Spark connectors)."""
    return (
        any(KAFKA_BROKER_JARS_DIR.glob("kafka_2.13-*.jar"))
        and any(KAFKA_TOOLS_JARS_DIR.glob("kafka-tools-[0-9]*.jar"))
        and any(SPARK_JARS_DIR.glob("spark-sql-kafka-0-10_*.jar"))
    )


def fetch_jvm_artifacts(force: bool = False) -> None:
    """Fetch both jar folders unless already present (or `force`)."""
    if jvm_artifacts_present() and not force:
        print(f"[jvm] artifacts already in {KAFKA_BROKER_JARS_DIR.parent}", flush=True)
        return
    require_maven()
    for stale in (KAFKA_BROKER_JARS_DIR, KAFKA_TOOLS_JARS_DIR, SPARK_JARS_DIR):
        for jar in stale.glob("*.jar"):
            jar.unlink()
    _copy_dependencies(JVM_POMS_DIR / "kafka-broker", KAFKA_BROKER_JARS_DIR)
    _copy_dependencies(JVM_POMS_DIR / "kafka-tools", KAFKA_TOOLS_JARS_DIR)
    _copy_dependencies(JVM_POMS_DIR / "spark-connectors", SPARK_JARS_DIR)
    removed = prune_jars_shipped_by_pyspark(SPARK_JARS_DIR, pyspark_jars_dir())
    kept = sorted(jar.name for jar in SPARK_JARS_DIR.glob("*.jar"))
    print(f"[jvm] spark jars kept: {', '.join(kept)}", flush=True)
    print(f"[jvm] pruned {len(removed)} jars that pyspark already ships", flush=True)


def object_store_artifacts_present() -> bool:
    """True when the local S3 server and Spark's S3A jars have been fetched."""
    return any(OBJECT_STORE_JARS_DIR.glob("s3proxy-*.jar")) and any(
        SPARK_S3_JARS_DIR.glob("hadoop-aws-*.jar")
    )


def fetch_object_store_artifacts(force: bool = False) -> None:
    """What `make object-store-jars` does: fetch S3Proxy and hadoop-aws (with the AWS SDK parts it
    uses) unless present. Not part of `make jvm`: only a lake on an object store needs them."""
    if object_store_artifacts_present() and not force:
        print(f"[jvm] object store jars already in {OBJECT_STORE_JARS_DIR.parent}", flush=True)
        return
    require_maven()
    for stale in (OBJECT_STORE_JARS_DIR, SPARK_S3_JARS_DIR):
        for jar in stale.glob("*.jar"):
            jar.unlink()
    _copy_dependencies(JVM_POMS_DIR / "object-store", OBJECT_STORE_JARS_DIR)
    _copy_dependencies(JVM_POMS_DIR / "spark-s3", SPARK_S3_JARS_DIR)
    # Pruned against pyspark's jars and the connectors' (both are on the same classpath).
    removed = prune_jars_shipped_by_pyspark(SPARK_S3_JARS_DIR, pyspark_jars_dir())
    removed += prune_jars_shipped_by_pyspark(SPARK_S3_JARS_DIR, SPARK_JARS_DIR)
    kept = sorted(jar.name for jar in SPARK_S3_JARS_DIR.glob("*.jar"))
    print(f"[jvm] spark S3A jars kept: {', '.join(kept)}", flush=True)
    print(f"[jvm] pruned {len(removed)} S3A dependency jars that Spark already has", flush=True)


# The Java release the project's JVM code targets (Spark 4 and Kafka 4 need Java 17).
JAVA_RELEASE = "17"


def build_order_validator(
    source_dir: Path = ORDER_VALIDATOR_SOURCE_DIR,
    jar: Path = ORDER_VALIDATOR_JAR,
    classpath_dir: Path | None = None,
    force: bool = False,
) -> bool:
    """Compile the order validator's Java sources into `jar` unless it is newer than all of them.

    Compiled with `javac --release 17` against the jars in `classpath_dir` (default: pyspark's,
    which is all the code needs: Spark's UDF and Row API and Jackson core); warnings fail the build.
    The jar is replaced atomically. Returns True when it was (re)built.
    """
    sources = sorted(source_dir.rglob("*.java"))
    if not sources:
        raise PrerequisiteError(f"No Java sources under {source_dir}: the checkout is incomplete.")
    newest_source = max(source.stat().st_mtime for source in sources)
    if not force and jar.is_file() and jar.stat().st_mtime >= newest_source:
        print(f"[jvm] {jar.name} is up to date", flush=True)
        return False
    javac = shutil.which("javac")
    if javac is None:
        raise PrerequisiteError(
            "javac not found on PATH: `make jvm` compiles the order validator's fast path and needs a "
            "JDK 17 (Debian: `apt-get install openjdk-17-jdk-headless`), not only a JRE."
        )
    classpath = f"{classpath_dir if classpath_dir is not None else pyspark_jars_dir()}/*"
    jar.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="order-validator-") as work:
        classes = Path(work) / "classes"
        command = [javac, "--release", JAVA_RELEASE, "-encoding", "UTF-8", "-Xlint:all,-path", "-Werror"]
        command += ["-cp", classpath, "-d", str(classes), *map(str, sources)]
        print(f"[jvm] compiling {len(sources)} Java source(s) into {jar} ...", flush=True)
        completed = subprocess.run(command, capture_output=True, text=True, check=False)
        if completed.returncode != 0:
            raise PrerequisiteError(
                f"javac could not compile {source_dir} (exit {completed.returncode}):\n"
                f"{(completed.stdout + completed.stderr).strip()}"
            )
        staged = Path(work) / jar.name
        with zipfile.ZipFile(staged, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: make jvm\n\n")
            for class_file in sorted(classes.rglob("*.class")):
                archive.write(class_file, class_file.relative_to(classes).as_posix())
        shutil.move(staged, jar.with_suffix(".jar.tmp"))
        os.replace(jar.with_suffix(".jar.tmp"), jar)
    return True


def install_jvm_artifacts(force: bool = False) -> None:
    """What `make jvm` does: fetch the Maven artifacts (unless present), build the project's jar, then
    the Spark driver's class archive from them (`class_archive`)."""
    from revenue_platform.local_stack.class_archive import build_driver_class_archive

    fetch_jvm_artifacts(force=force)
    build_order_validator(force=force)
    build_driver_class_archive(force=force)


if __name__ == "__main__":
    install_jvm_artifacts(force="--force" in sys.argv)
