"""FileContext's `file:` file system (`ForklessLocalFs`, spark_apps/jvm/order-validator): Hadoop's `LocalFs`
with `chmod` and `readlink` made in Java instead of a process each. Spark's checkpoints and Delta's log
rely on its answers (a rename that must not overwrite is how two writers of one Delta version are kept
apart), so every answer here is checked against Hadoop's own `LocalFs` on the same files."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from py4j.protocol import Py4JJavaError
from pyspark.sql import SparkSession

from spark_apps.engine.session import LOCAL_FILES_CONF

IMPL_KEY = "fs.AbstractFileSystem.file.impl"
FORKLESS = LOCAL_FILES_CONF[f"spark.hadoop.{IMPL_KEY}"]
HADOOP = "org.apache.hadoop.fs.local.LocalFs"


def _configuration(spark: SparkSession, impl: str) -> Any:
    """The session's Hadoop configuration with `impl` as FileContext's `file:` file system."""
    conf = spark._jvm.org.apache.hadoop.conf.Configuration(spark.sparkContext._jsc.hadoopConfiguration())
    conf.set(IMPL_KEY, impl)
    return conf


def _file_context(spark: SparkSession, impl: str) -> Any:
    jvm = spark._jvm
    conf = _configuration(spark, impl)
    context = jvm.org.apache.hadoop.fs.FileContext.getFileContext(jvm.java.net.URI("file:///"), conf)
    assert context.getDefaultFileSystem().getClass().getName() == impl
    return context


def _path(spark: SparkSession, path: Path) -> Any:
    return spark._jvm.org.apache.hadoop.fs.Path(path.as_uri())


def _java_error(call: Callable[[], Any]) -> str | None:
    """The Java exception class `call` raised, None when it returned."""
    try:
        call()
    except Py4JJavaError as error:
        return str(error.java_exception.getClass().getName())
    return None


@pytest.fixture(params=[FORKLESS, HADOOP], ids=["forkless", "hadoop"])
def impl(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_the_sessions_file_context_is_the_forkless_one(spark: SparkSession) -> None:
    assert spark.sparkContext._jsc.hadoopConfiguration().get(IMPL_KEY) == FORKLESS


def test_the_file_system_is_the_local_one_whatever_uri_it_is_made_for(spark: SparkSession, impl: str) -> None:
    jvm = spark._jvm
    conf = _configuration(spark, impl)
    for uri in ("file:///", "file://another-host/", "file:///tmp/some/folder"):
        made = jvm.org.apache.hadoop.fs.AbstractFileSystem.createFileSystem(jvm.java.net.URI(uri), conf)
        assert made.getClass().getName() == impl
        assert made.getUri().toString() == "file:///", uri


def _create(spark: SparkSession, context: Any, path: Path, text: bytes, mode: int) -> None:
    jvm = spark._jvm
    flags = jvm.java.util.EnumSet.of(jvm.org.apache.hadoop.fs.CreateFlag.CREATE)
    create_options = spark.sparkContext._gateway.new_array(jvm.org.apache.hadoop.fs.Options.CreateOpts, 1)
    create_options[0] = jvm.org.apache.hadoop.fs.Options.CreateOpts.perms(
        jvm.org.apache.hadoop.fs.permission.FsPermission(mode)
    )
    out = context.create(_path(spark, path), flags, create_options)
    out.write(bytearray(text))
    out.close()


def _rename(spark: SparkSession, context: Any, source: Path, target: Path, overwrite: bool) -> None:
    jvm = spark._jvm
    rename_options = spark.sparkContext._gateway.new_array(jvm.org.apache.hadoop.fs.Options.Rename, 1)
    rename_options[0] = getattr(jvm.org.apache.hadoop.fs.Options.Rename, "OVERWRITE" if overwrite else "NONE")
    context.rename(_path(spark, source), _path(spark, target), rename_options)


def test_create_sets_the_asked_mode_and_a_checksum_file(
    spark: SparkSession, tmp_path: Path, impl: str
) -> None:
    context = _file_context(spark, impl)
    _create(spark, context, tmp_path / "offsets", b"v1\n{}", 0o640)
    assert (tmp_path / "offsets").read_bytes() == b"v1\n{}"
    assert stat.S_IMODE(os.stat(tmp_path / "offsets").st_mode) == 0o640
    assert (tmp_path / ".offsets.crc").exists()  # checksummed, as Hadoop's LocalFs


def test_a_rename_that_must_not_overwrite_refuses_an_existing_target(
    spark: SparkSession, tmp_path: Path, impl: str
) -> None:
    context = _file_context(spark, impl)
    _create(spark, context, tmp_path / "00001.json.tmp", b"mine", 0o644)
    _create(spark, context, tmp_path / "00001.json", b"theirs", 0o644)
    refused = _java_error(
        lambda: _rename(spark, context, tmp_path / "00001.json.tmp", tmp_path / "00001.json", False)
    )
    assert refused == "org.apache.hadoop.fs.FileAlreadyExistsException"
    assert (tmp_path / "00001.json").read_bytes() == b"theirs"
    _rename(spark, context, tmp_path / "00001.json.tmp", tmp_path / "00001.json", True)
    assert (tmp_path / "00001.json").read_bytes() == b"mine"
    assert not (tmp_path / "00001.json.tmp").exists()
    # A new name: the rename without overwrite goes through.
    _create(spark, context, tmp_path / "00002.json.tmp", b"next", 0o644)
    _rename(spark, context, tmp_path / "00002.json.tmp", tmp_path / "00002.json", False)
    assert (tmp_path / "00002.json").read_bytes() == b"next"


def _link_status(spark: SparkSession, impl: str, path: Path) -> tuple[Any, ...] | str:
    context = _file_context(spark, impl)
    try:
        found = context.getFileLinkStatus(_path(spark, path))
    except Py4JJavaError as error:
        return str(error.java_exception.getClass().getName())
    link = str(found.getSymlink()) if found.isSymlink() else None
    return (found.isFile(), found.isDirectory(), found.getLen(), link, str(found.getPath()))


def test_link_status_answers_as_hadoops_own(spark: SparkSession, tmp_path: Path) -> None:
    # With `file:` paths (Spark's and Delta's) Hadoop's `readlink` of the path's text never finds a link,
    # so for a link both answer from its target: this compares the answers, it cannot tell whether the
    # forkless branch for real links was taken.
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "1.changelog").write_bytes(b"12345")
    os.symlink(tmp_path / "state" / "1.changelog", tmp_path / "link")
    os.symlink(tmp_path / "gone", tmp_path / "dangling")
    for path in ("state/1.changelog", "state", "link", "dangling", "missing"):
        forkless = _link_status(spark, FORKLESS, tmp_path / path)
        assert forkless == _link_status(spark, HADOOP, tmp_path / path), path
    assert _link_status(spark, FORKLESS, tmp_path / "missing") == "java.io.FileNotFoundException"
    assert _link_status(spark, FORKLESS, tmp_path / "state" / "1.changelog")[:3] == (True, False, 5)


@pytest.mark.parametrize("mode", [0o600, 0o644, 0o755, 0o000, 0o1777])
def test_set_permission_sets_what_hadoops_chmod_sets(spark: SparkSession, tmp_path: Path, mode: int) -> None:
    modes = {}
    for impl in (FORKLESS, HADOOP):
        folder = tmp_path / impl
        folder.mkdir()
        context = _file_context(spark, impl)
        context.setPermission(
            _path(spark, folder), spark._jvm.org.apache.hadoop.fs.permission.FsPermission(mode)
        )
        modes[impl] = stat.S_IMODE(os.stat(folder).st_mode)
        folder.chmod(0o755)  # so that tmp_path can be removed
    assert modes[FORKLESS] == modes[HADOOP] == mode
    missing = tmp_path / "missing"
    refused = _java_error(
        lambda: _file_context(spark, FORKLESS).setPermission(
            _path(spark, missing), spark._jvm.org.apache.hadoop.fs.permission.FsPermission(0o644)
        )
    )
    assert refused is not None
