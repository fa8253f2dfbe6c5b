"""Prerequisite checks must name the problem and the fix, not fail with a stack trace."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest

from revenue_platform.errors import PrerequisiteError
from revenue_platform.local_stack import prerequisites


def _fake_java(folder: Path, banner: str) -> str:
    """A `java` executable that prints `banner` to stderr like `java -version` does."""
    script = folder / "java"
    script.write_text(f"#!/bin/sh\necho '{banner}' >&2\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


@pytest.mark.parametrize(
    ("banner", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('openjdk version "21" 2023-09-19', 21),
        ('java version "1.8.0_392"', 8),
    ],
)
def test_java_major_version_reads_the_banner(tmp_path: Path, banner: str, major: int) -> None:
    assert prerequisites.java_major_version(_fake_java(tmp_path, banner)) == major


def test_old_java_is_refused_with_the_fix(tmp_path: Path) -> None:
    java = _fake_java(tmp_path, 'java version "1.8.0_392"')
    with pytest.raises(PrerequisiteError, match=r"Java 8 found.*Java 17 or newer"):
        prerequisites.require_java(java)


def test_missing_java_says_how_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(PrerequisiteError, match=r"Java not found on PATH.*openjdk-17"):
        prerequisites.require_java("java")


def test_taken_port_is_reported_with_the_variable_to_change() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert not prerequisites.port_is_free(port)
        with pytest.raises(PrerequisiteError, match=rf"Port {port} is already in use.*KAFKA_PORT=<port>"):
            prerequisites.require_free_port(port, "the Kafka broker", "KAFKA_PORT")
    assert prerequisites.port_is_free(port)


def test_full_disk_is_reported(tmp_path: Path) -> None:
    free = os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize
    with pytest.raises(PrerequisiteError, match=r"MiB free at .*PLATFORM_STATE_DIR"):
        prerequisites.require_free_disk(tmp_path / "not" / "yet" / "there", minimum_bytes=free * 2)


def test_missing_maven_is_reported(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(PrerequisiteError, match=r"Maven .* not found"):
        prerequisites.require_maven()
