"""The Spark driver's class archive: which drivers map it, when `make jvm` rewrites it, and that the
archive it wrote is one the JVM accepts for the classpath Spark's drivers really have."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from revenue_platform.local_stack.class_archive import archive_inputs, archive_is_current
from revenue_platform.spark_submit import spark_submit_command
from revenue_platform.streaming.launcher import SparkTarget, cluster_submit_command
from spark_apps.contract.config import AppConfigError
from spark_apps.engine.session import (
    DRIVER_CLASS_ARCHIVE_ENV,
    DRIVER_JIT_ENV,
    driver_class_archive,
    driver_class_archive_options,
    driver_jit_options,
    drivers_java,
)


def _driver_java_options(command: list[str]) -> str:
    return command[command.index("--driver-java-options") + 1]


@pytest.fixture
def archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "spark-driver.jsa"
    monkeypatch.setenv(DRIVER_CLASS_ARCHIVE_ENV, str(path))
    # The JIT's own option (the test session sets c1) is not what these tests look at.
    monkeypatch.delenv(DRIVER_JIT_ENV, raising=False)
    return path


def test_the_jit_setting_reaches_every_local_driver_and_no_cluster_mode_one(
    archive: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from revenue_platform.reprocessing import driver_class_archive_conf

    c1_only = "-XX:TieredStopAtLevel=1"
    for unset_or_default in ("", "tiered", " tiered "):
        monkeypatch.setenv(DRIVER_JIT_ENV, unset_or_default)
        assert driver_jit_options() == ""
        assert c1_only not in _driver_java_options(spark_submit_command("orders_streaming_app.py", []))
    monkeypatch.setenv(DRIVER_JIT_ENV, "c1")
    assert c1_only in _driver_java_options(spark_submit_command("orders_streaming_app.py", [])).split()
    assert driver_class_archive_conf() == {"spark.driver.extraJavaOptions": c1_only}
    archive.write_bytes(b"archive")
    both = driver_class_archive_conf()["spark.driver.extraJavaOptions"].split()
    assert {f"-XX:SharedArchiveFile={archive}", c1_only} <= set(both)
    on_a_worker = spark_submit_command("orders_streaming_app.py", [], class_archive=False)
    assert c1_only not in _driver_java_options(on_a_worker)


def test_an_unknown_jit_setting_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DRIVER_JIT_ENV, "c2-only")
    with pytest.raises(AppConfigError, match="SPARK_DRIVER_JIT='c2-only': expected one of"):
        spark_submit_command("orders_streaming_app.py", [])


def test_without_an_archive_a_driver_gets_no_sharing_option(archive: Path) -> None:
    # -XX:SharedArchiveFile naming a missing file would switch off the JDK's own archive as well.
    assert driver_class_archive_options() == ""
    assert "SharedArchiveFile" not in _driver_java_options(
        spark_submit_command("orders_streaming_app.py", [])
    )


def test_a_local_driver_maps_the_archive_and_a_cluster_mode_driver_does_not(archive: Path) -> None:
    archive.write_bytes(b"archive")
    local = _driver_java_options(spark_submit_command("orders_streaming_app.py", []))
    assert local.startswith("-Dlog4j2.configurationFile=file:")
    assert f"-XX:SharedArchiveFile={archive}" in local.split()
    # JVM warnings (e.g. a refused, stale archive) on stderr, never in the driver's stdout.
    assert "-Xlog:all=warning:stderr" in local.split()
    on_a_worker = cluster_submit_command(
        SparkTarget(master="spark://10.0.0.5:7077", deploy_mode="cluster"), "c.json", "t", "/lake", "a.zip"
    )
    assert "SharedArchiveFile" not in _driver_java_options(on_a_worker)


def test_the_archive_is_current_only_when_newer_than_every_input(tmp_path: Path) -> None:
    jar, archive = tmp_path / "spark-core.jar", tmp_path / "a.jsa"
    jar.write_bytes(b"jar")
    assert not archive_is_current(archive, [jar])
    archive.write_bytes(b"archive")
    os.utime(jar, (1_000, 1_000))
    assert archive_is_current(archive, [jar])
    os.utime(jar, (archive.stat().st_mtime + 10, archive.stat().st_mtime + 10))  # pyspark reinstalled
    assert not archive_is_current(archive, [jar])


def test_the_inputs_are_spark_s_jars_the_connectors_the_jdk_and_the_training_job() -> None:
    names = {path.name for path in archive_inputs()}
    assert "class_archive_training_job.py" in names
    assert any(name.startswith("spark-core_") for name in names)  # pyspark's jars
    assert any(name.startswith("delta-spark_") for name in names)  # make jvm's
    assert "java" in names


def test_the_jdk_input_is_spark_submit_s_java(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # spark-submit takes $JAVA_HOME/bin/java over the one on PATH: a JDK changed there must rewrite it.
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    assert java in archive_inputs()


def test_the_test_session_s_driver_accepts_make_jvm_s_archive(spark: SparkSession) -> None:
    """`-Xshare:on` makes the JVM fail instead of quietly starting without the archive: with the
    classpath of the running driver, the archive make jvm wrote must be accepted."""
    archive = driver_class_archive()
    if archive is None:  # `make test` under a JAVA_HOME of JDK 24+ (docs/local-stack.md)
        pytest.skip(f"drivers on {drivers_java()} get no class archive (class_archive_helps)")
    assert archive.is_file(), "make jvm writes the driver's class archive"
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert f"-XX:SharedArchiveFile={archive}" in arguments
    classpath = jvm.System.getProperty("java.class.path")
    java = drivers_java()  # the JDK the test session's driver runs on, which wrote the archive
    assert java is not None
    done = subprocess.run(
        [str(java), "-Xshare:on", f"-XX:SharedArchiveFile={archive}", "-cp", classpath, "-version"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_reprocess_job_s_driver_maps_the_archive_through_its_spark_conf(archive: Path) -> None:
    from revenue_platform.reprocessing import driver_class_archive_conf

    assert driver_class_archive_conf() == {}
    archive.write_bytes(b"archive")
    assert f"-XX:SharedArchiveFile={archive}" in driver_class_archive_conf()["spark.driver.extraJavaOptions"]


def _fake_jdk(root: Path, release: str | None) -> Path:
    java = root / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("")
    if release is not None:
        (root / "release").write_text(release)
    return root


def test_drivers_on_different_jdks_each_map_their_own_archive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A JVM maps only an archive its own build wrote: JDK 17 and JDK 21 drivers on one machine
    (JAVA_HOME chooses spark-submit's java), and two builds of JDK 17, must not share an archive, or
    find another's current by its mtime."""
    from spark_apps.engine import session

    monkeypatch.delenv(DRIVER_CLASS_ARCHIVE_ENV, raising=False)
    monkeypatch.setattr(session, "DRIVER_CLASS_ARCHIVE_DIR", tmp_path / "class-archive")
    debian17 = _fake_jdk(tmp_path / "debian17", 'IMPLEMENTOR="Debian"\nJAVA_VERSION="17.0.15"\n')
    temurin17 = _fake_jdk(tmp_path / "temurin17", 'IMPLEMENTOR="Eclipse Adoptium"\nJAVA_VERSION="17.0.15"\n')
    jdk21 = _fake_jdk(tmp_path / "jdk21", 'JAVA_VERSION="21.0.4"\nJAVA_RUNTIME_VERSION="21.0.4+7-LTS"\n')
    names = {}
    for jdk in (debian17, temurin17, jdk21):
        monkeypatch.setenv("JAVA_HOME", str(jdk))
        archive = driver_class_archive()
        assert archive is not None
        assert archive.parent == tmp_path / "class-archive"
        names[jdk.name] = archive.name
    assert names["debian17"].startswith("spark-driver-jdk17-")
    assert names["temurin17"].startswith("spark-driver-jdk17-")
    assert names["jdk21"].startswith("spark-driver-jdk21-")
    assert len(set(names.values())) == 3
    # An in-place upgrade (same path, a new JAVA_RUNTIME_VERSION) names a new archive.
    (jdk21 / "release").write_text('JAVA_VERSION="21.0.5"\nJAVA_RUNTIME_VERSION="21.0.5+11-LTS"\n')
    monkeypatch.setenv("JAVA_HOME", str(jdk21))
    archive_21 = driver_class_archive()
    assert archive_21 is not None
    assert archive_21.name != names["jdk21"]
    archive_21.parent.mkdir()
    archive_21.write_bytes(b"archive")
    assert (
        f"-XX:SharedArchiveFile={archive_21}"
        in _driver_java_options(spark_submit_command("orders_streaming_app.py", [])).split()
    )
    monkeypatch.setenv("JAVA_HOME", str(debian17))  # JDK 17's archive is not written yet: no option
    no_archive_yet = _driver_java_options(spark_submit_command("orders_streaming_app.py", []))
    assert "SharedArchiveFile" not in no_archive_yet


def test_a_checkout_elsewhere_names_its_own_archive(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The JVM refuses an archive whose classpath's jars were at other paths, while its mtime still
    says current: a moved checkout, or a `.jvm/` copied from another one, must name a new archive
    (which `make jvm` then writes) instead of keeping one no driver maps."""
    from spark_apps.engine import session

    monkeypatch.delenv(DRIVER_CLASS_ARCHIVE_ENV, raising=False)
    monkeypatch.setenv("JAVA_HOME", str(_fake_jdk(tmp_path / "jdk17", 'JAVA_VERSION="17.0.15"\n')))
    names = set()
    for checkout in ("here", "moved"):
        monkeypatch.setattr(
            session, "DRIVER_CLASS_ARCHIVE_DIR", tmp_path / checkout / ".jvm" / "class-archive"
        )
        archive = driver_class_archive()
        assert archive is not None
        names.add(archive.name)
    assert len(names) == 2
    assert all(name.startswith("spark-driver-jdk17-") for name in names)


def test_a_new_archive_replaces_the_old_ones_of_its_feature_version_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from revenue_platform.local_stack import class_archive

    folder = tmp_path / "class-archive"
    folder.mkdir()
    monkeypatch.setattr(class_archive, "DRIVER_CLASS_ARCHIVE_DIR", folder)
    files = {
        name: folder / name
        for name in (
            "spark-driver.jsa",  # the single archive of old
            "spark-driver-jdk17.jsa",  # one per feature version, before builds were told apart
            "spark-driver-jdk17-aaaaaaaaaa.jsa",  # JDK 17 before an upgrade
            "spark-driver-jdk17-bbbbbbbbbb.jsa",  # the new one
            "spark-driver-jdk21-cccccccccc.jsa",  # another JDK's: kept
        )
    }
    for path in files.values():
        path.write_bytes(b"archive")
    superseded = class_archive.superseded_archives(files["spark-driver-jdk17-bbbbbbbbbb.jsa"])
    assert sorted(path.name for path in superseded) == [
        "spark-driver-jdk17-aaaaaaaaaa.jsa",
        "spark-driver-jdk17.jsa",
        "spark-driver.jsa",
    ]
    assert class_archive.superseded_archives(tmp_path / "elsewhere" / "mine.jsa") == []


@pytest.mark.parametrize(
    ("release", "gets_one"),
    [
        ('JAVA_VERSION="17.0.15"\n', True),
        ('JAVA_VERSION="23.0.2"\n', True),
        ('JAVA_VERSION="24.0.1"\n', False),
        ('JAVA_VERSION="25.0.3"\n', False),
        (None, False),  # no release file (a JRE without one, a version manager's shim): may be 24+
    ],
)
def test_which_jdks_get_a_class_archive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, release: str | None, gets_one: bool
) -> None:
    monkeypatch.delenv(DRIVER_CLASS_ARCHIVE_ENV, raising=False)
    monkeypatch.setenv("JAVA_HOME", str(_fake_jdk(tmp_path / "jdk", release)))
    assert (driver_class_archive() is not None) is gets_one


def test_a_driver_on_jdk_25_gets_no_archive_unless_one_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """From JDK 24 on, a dynamic archive makes the JVM log errors at every start (Spark's module options
    differ from the JDK base archive's), and on JDK 25 live p99 was worse with it: none is written or
    mapped. An archive named in SPARK_DRIVER_CLASS_ARCHIVE is still mapped: the user chose it."""
    from revenue_platform.local_stack.class_archive import build_driver_class_archive
    from spark_apps.engine import session

    monkeypatch.delenv(DRIVER_CLASS_ARCHIVE_ENV, raising=False)
    monkeypatch.setattr(session, "DRIVER_CLASS_ARCHIVE_DIR", tmp_path / "class-archive")
    monkeypatch.setenv("JAVA_HOME", str(_fake_jdk(tmp_path / "jdk25", 'JAVA_VERSION="25.0.3"\n')))
    assert driver_class_archive() is None
    assert "SharedArchiveFile" not in _driver_java_options(
        spark_submit_command("orders_streaming_app.py", [])
    )
    assert build_driver_class_archive() is False  # no training run: this fake JDK could not run one
    assert "no class archive for the driver's JDK" in capsys.readouterr().out
    assert not (tmp_path / "class-archive").exists()
    named = tmp_path / "mine.jsa"
    named.write_bytes(b"archive")
    monkeypatch.setenv(DRIVER_CLASS_ARCHIVE_ENV, str(named))
    assert f"-XX:SharedArchiveFile={named}" in driver_class_archive_options().split()


def test_a_jdk_s_feature_version_comes_from_its_release_file(tmp_path: Path) -> None:
    from spark_apps.engine.session import java_feature_version

    assert java_feature_version(_fake_jdk(tmp_path / "a", 'JAVA_VERSION="21.0.4"\n') / "bin" / "java") == 21
    assert java_feature_version(_fake_jdk(tmp_path / "b", 'JAVA_VERSION="1.8.0_402"\n') / "bin" / "java") == 8
    assert java_feature_version(_fake_jdk(tmp_path / "c", None) / "bin" / "java") is None
    assert java_feature_version(_fake_jdk(tmp_path / "d", "garbage") / "bin" / "java") is None


def test_this_machine_s_jdk_tells_its_version_by_its_release_file() -> None:
    """The fakes above stand for real JDKs' `release` files: the JDK running the tests has one that
    says 17 or newer (Spark 4's minimum), through the symlinks a Debian `java` on PATH goes through."""
    from spark_apps.engine.session import drivers_java, java_feature_version

    java = drivers_java()
    assert java is not None
    version = java_feature_version(java)
    assert version is not None
    assert version >= 17
