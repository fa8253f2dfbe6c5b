"""A real S3-compatible object store on loopback: S3Proxy serving a folder under the state dir.

S3Proxy is a Java S3 server (Maven Central, fetched by `make object-store-jars`); its `filesystem-nio2`
backend keeps each bucket as a folder and each object as a file below `blobs/`, so what the lake holds
can be inspected on disk. It honours S3's conditional writes (`If-None-Match`, `If-Match`), which
delta-rs's commits rely on (`spark_apps.contract.object_store`). The bucket is that folder, created
before the first start; the credentials are generated at the first start into a 0600 secrets file,
and S3Proxy reads them from its properties file (0600 too), never from its command line. Start
waits until the server answers HTTP; start and stop are idempotent.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable

from revenue_platform import processes
from revenue_platform.errors import PrerequisiteError
from revenue_platform.local_object_store import ObjectStoreSettings, local_credentials
from revenue_platform.local_stack.prerequisites import require_free_disk, require_free_port, require_java
from revenue_platform.local_stack.service_jit import service_jit_options

S3PROXY_MAIN = "org.gaul.s3proxy.Main"


def s3proxy_properties(settings: ObjectStoreSettings, credentials: dict[str, str]) -> str:
    """S3Proxy's configuration: loopback only, AWS signatures required, buckets as folders."""
    lines = {
        "s3proxy.endpoint": settings.endpoint_url,
        "s3proxy.authorization": "aws-v2-or-v4",
        "s3proxy.identity": credentials["access_key_id"],
        "s3proxy.credential": credentials["secret_access_key"],
        "jclouds.provider": "filesystem-nio2",
        "jclouds.filesystem.basedir": str(settings.blobs_dir),
    }
    return "\n".join(f"{key}={value}" for key, value in lines.items()) + "\n"


class LocalObjectStore:
    """Start, stop and probe the local S3 server described by `settings`."""

    def __init__(self, settings: ObjectStoreSettings) -> None:
        self.settings = settings
        self.config_path = settings.data_dir / "s3proxy.properties"
        self.pid_path = settings.data_dir / "s3proxy.pid"
        self.log_path = settings.data_dir / "s3proxy.log"

    def pid(self) -> int | None:
        """PID of our running server, or None (a stale pid file is ignored)."""
        return processes.read_live_pid(self.pid_path, expected_cmdline_fragment=str(self.config_path))

    def answers_http(self, timeout_s: float = 2.0) -> bool:
        """True when the server answers an HTTP request (anonymous: an S3 error response counts)."""
        try:
            with urllib.request.urlopen(f"{self.settings.endpoint_url}/", timeout=timeout_s):
                return True
        except urllib.error.HTTPError:
            return True
        except OSError:
            return False

    def require_jars(self) -> None:
        """PrerequisiteError naming `make object-store-jars` when S3Proxy's jars were never fetched."""
        if not any(self.settings.jars_dir.glob("s3proxy-*.jar")):
            raise PrerequisiteError(
                f"No S3Proxy jars in {self.settings.jars_dir}. Fetch them with `make object-store-jars`."
            )

    def _command(self) -> list[str]:
        self.require_jars()
        return [
            "java",
            *service_jit_options(),
            f"-Xmx{self.settings.heap}",
            "-Djava.awt.headless=true",
            "-cp",
            str(self.settings.jars_dir / "*"),
            S3PROXY_MAIN,
            "--properties",
            str(self.config_path),
        ]

    def _prepare_files(self) -> None:
        self.settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        require_free_disk(self.settings.data_dir)
        bucket = self.settings.blobs_dir / self.settings.bucket
        bucket.mkdir(parents=True, exist_ok=True)
        # The filesystem backend serves a folder that others may read as a public-read bucket:
        # anonymous requests could list and read the lake. 0700 keeps every bucket private.
        for folder in (self.settings.blobs_dir, *self.settings.blobs_dir.iterdir()):
            folder.chmod(0o700)
        credentials = local_credentials(self.settings)
        self.config_path.touch(mode=0o600)
        self.config_path.chmod(0o600)
        self.config_path.write_text(s3proxy_properties(self.settings, credentials))

    def start(self, timeout_s: float = 60.0, progress: Callable[[str], None] = print) -> None:
        """Start the server unless it already runs, and wait until it answers HTTP."""
        if self.pid() is not None and self.answers_http():
            progress(f"[object-store] already running on {self.settings.endpoint_url} (pid {self.pid()})")
            return
        spawned: int | None = None
        if self.pid() is None:
            command = self._command()
            require_java()
            require_free_port(self.settings.port, "the object store", "OBJECT_STORE_PORT")
            self._prepare_files()
            spawned = processes.spawn_detached(command, self.pid_path, self.log_path)
            progress(f"[object-store] starting on {self.settings.endpoint_url}, log: {self.log_path}")
        with processes.stopped_if_never_ready(spawned, self.pid_path):
            self._wait_until_ready(timeout_s, progress, spawned)

    def _wait_until_ready(
        self, timeout_s: float, progress: Callable[[str], None], spawned: int | None
    ) -> None:
        service = processes.StartingService(
            "object-store", "the object store", self.log_path, spawned, self.pid
        )
        waited = processes.wait_until_answering(service, self.answers_http, timeout_s, progress, poll_s=0.3)
        if waited is not None:
            progress(
                f"[object-store] ready on {self.settings.endpoint_url} after {waited:.0f}s: bucket "
                f"{self.settings.bucket!r} in {self.settings.blobs_dir}, credentials in "
                f"{self.settings.secrets_path} (0600)"
            )
            return
        raise PrerequisiteError(
            f"The object store on {self.settings.endpoint_url} did not answer within {timeout_s:.0f}s. "
            f"See {self.log_path}."
        )

    def stop(self, grace_s: float = 15.0, progress: Callable[[str], None] = print) -> None:
        """Stop the server (SIGTERM, SIGKILL after `grace_s`); the buckets stay on disk."""
        processes.stop_recorded("object-store", self.pid(), self.pid_path, grace_s, progress)
