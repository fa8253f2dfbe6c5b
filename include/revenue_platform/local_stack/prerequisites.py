"""Checks that turn a broken environment into one clear message.

Each check raises PrerequisiteError saying what is wrong and how to fix it, instead of
letting a JVM stack trace or a hung connection be the only clue.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
from pathlib import Path

from revenue_platform.errors import PrerequisiteError

MIN_JAVA_MAJOR = 17
MIN_FREE_DISK_BYTES = 1 * 1024**3


def java_major_version(java: str = "java") -> int:
    """Return the major version of `java`, or raise if it is missing or unparseable."""
    if shutil.which(java) is None:
        raise PrerequisiteError(
            f"Java not found on PATH. Kafka 4 and Spark 4 need Java {MIN_JAVA_MAJOR}+: "
            "install it (Debian: `apt-get install openjdk-17-jdk-headless`) or set JAVA_HOME "
            "and put $JAVA_HOME/bin on PATH."
        )
    completed = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    banner = completed.stderr + completed.stdout
    match = re.search(r'version "(\d+)(?:\.(\d+))?', banner)
    if not match:
        raise PrerequisiteError(f"Could not read the Java version from `{java} -version`: {banner.strip()!r}")
    major = int(match.group(1))
    # Java 8 and older report "1.8.0_x".
    return int(match.group(2) or 0) if major == 1 else major


def require_java(java: str = "java") -> int:
    """Fail unless Java >= MIN_JAVA_MAJOR is available; return its major version."""
    major = java_major_version(java)
    if major < MIN_JAVA_MAJOR:
        raise PrerequisiteError(
            f"Java {major} found, but Kafka 4 and Spark 4 need Java {MIN_JAVA_MAJOR} or newer. "
            "Install OpenJDK 17 and point JAVA_HOME/PATH at it."
        )
    return major


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing accepts connections on host:port and we could bind it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.5)
        if probe.connect_ex((host, port)) == 0:
            return False
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as binder:
        binder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            binder.bind((host, port))
        except OSError:
            return False
    return True


def require_free_port(port: int, what: str, env_var: str) -> None:
    """Fail with the fix (free it or pick another port) when `port` is taken."""
    if not port_is_free(port):
        raise PrerequisiteError(
            f"Port {port} is already in use, so {what} cannot start. Stop whatever listens there "
            f"(`ss -ltnp 'sport = :{port}'` shows it) or choose another port with {env_var}=<port>."
        )


def require_free_disk(path: Path, minimum_bytes: int = MIN_FREE_DISK_BYTES) -> None:
    """Fail when the filesystem holding `path` has less than `minimum_bytes` free."""
    existing = path
    while not existing.exists():
        existing = existing.parent
    free = shutil.disk_usage(existing).free
    if free < minimum_bytes:
        raise PrerequisiteError(
            f"Only {free / 1024**2:.0f} MiB free at {existing}; the local stack needs at least "
            f"{minimum_bytes / 1024**2:.0f} MiB. Free some space or set PLATFORM_STATE_DIR to a bigger disk."
        )


def require_maven(mvn: str = "mvn") -> None:
    """Fail when Maven, which fetches the JVM artifacts, is not installed."""
    if shutil.which(mvn) is None:
        raise PrerequisiteError(
            "Maven (`mvn`) not found: it fetches the Kafka broker, the Spark Kafka connector and Delta "
            "from Maven Central. Install it (Debian: `apt-get install maven`)."
        )
