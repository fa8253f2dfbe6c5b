"""The local stack's object store as its clients see it: where it listens, its bucket, its credentials.

`make objectstore-up` (local_stack.object_store) runs the server; this module is what the rest of
the platform may know of it (`lake_storage` falls back to it when no Airflow connection names a
store): its settings from the environment and the access key pair generated at its first start
into a 0600 file beside its data.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from pydantic import SecretStr

from revenue_platform.errors import ConfigError
from revenue_platform.paths import OBJECT_STORE_JARS_DIR, running_cluster_marker, state_dir
from revenue_platform.private_files import private_json
from spark_apps.contract.object_store import LakeObjectStore

DEFAULT_PORT = 9400
DEFAULT_BUCKET = "lake"


@dataclass(frozen=True)
class ObjectStoreSettings:
    """Where and how the local object store runs."""

    port: int = DEFAULT_PORT
    """HTTP port on 127.0.0.1; env OBJECT_STORE_PORT."""
    data_dir: Path = Path(".local/object-store")
    """Buckets (`blobs/`), secrets, properties, pid file and log; env OBJECT_STORE_DATA_DIR."""
    bucket: str = DEFAULT_BUCKET
    """The bucket created at the first start; env OBJECT_STORE_BUCKET."""
    heap: str = "256m"
    jars_dir: Path = OBJECT_STORE_JARS_DIR

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> ObjectStoreSettings:
        """Read overrides from the environment, failing on a malformed value with its variable name."""
        env = dict(os.environ if environ is None else environ)
        raw_port = env.get("OBJECT_STORE_PORT", str(DEFAULT_PORT))
        if not raw_port.isdigit() or not 0 < int(raw_port) < 65536:
            raise ConfigError(f"OBJECT_STORE_PORT={raw_port!r} is not a TCP port (1-65535).")
        bucket = env.get("OBJECT_STORE_BUCKET", DEFAULT_BUCKET)
        if not bucket.replace("-", "").isalnum() or not 3 <= len(bucket) <= 63 or bucket != bucket.lower():
            raise ConfigError(f"OBJECT_STORE_BUCKET={bucket!r} is not an S3 bucket name (3-63 of a-z 0-9 -).")
        return cls(
            port=int(raw_port),
            data_dir=Path(env.get("OBJECT_STORE_DATA_DIR", state_dir() / "object-store")),
            bucket=bucket,
        )

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def blobs_dir(self) -> Path:
        """S3Proxy's base folder: one folder per bucket, one file per object."""
        return self.data_dir / "blobs"

    @property
    def secrets_path(self) -> Path:
        return self.data_dir / "credentials.json"

    @property
    def lake_root(self) -> str:
        """The lake root a user points PLATFORM_LAKE_ROOT at to keep the lake in this store."""
        return f"s3a://{self.bucket}/lake"


# Variables that name the local store explicitly; any of them set wins over the running cluster's store.
STORE_ENV_VARIABLES = ("OBJECT_STORE_PORT", "OBJECT_STORE_DATA_DIR", "OBJECT_STORE_BUCKET")


def stack_object_store_settings(environ: dict[str, str] | None = None) -> ObjectStoreSettings:
    """The local store the platform's lake is on: the one the running cluster started for its lake
    (`make cluster-up` records it in its marker unless CLUSTER_LAKE=local), else `make
    objectstore-up`'s (`ObjectStoreSettings.from_env`). OBJECT_STORE_* variables in the environment win."""
    env = dict(os.environ if environ is None else environ)
    marker = running_cluster_marker()
    recorded = marker.get("object_store") if marker is not None else None
    if any(name in env for name in STORE_ENV_VARIABLES) or not isinstance(recorded, dict):
        return ObjectStoreSettings.from_env(env)
    return ObjectStoreSettings.from_env(
        {
            "OBJECT_STORE_PORT": str(recorded.get("port", DEFAULT_PORT)),
            "OBJECT_STORE_DATA_DIR": str(recorded.get("data_dir", state_dir() / "object-store")),
            "OBJECT_STORE_BUCKET": str(recorded.get("bucket", DEFAULT_BUCKET)),
        }
    )


def store_environment(settings: ObjectStoreSettings) -> dict[str, str]:
    """The OBJECT_STORE_* variables naming `settings` (no secret: the credentials stay in their file)."""
    return {
        "OBJECT_STORE_PORT": str(settings.port),
        "OBJECT_STORE_DATA_DIR": str(settings.data_dir),
        "OBJECT_STORE_BUCKET": settings.bucket,
    }


def local_credentials(settings: ObjectStoreSettings) -> dict[str, str]:
    """The store's access key pair, generated on first use into a 0600 file."""
    return private_json(
        settings.secrets_path,
        lambda: {"access_key_id": secrets.token_hex(10), "secret_access_key": secrets.token_urlsafe(30)},
    )


def local_store_connection_json(settings: ObjectStoreSettings) -> str:
    """The Airflow connection `lake_object_store` for the local store, as JSON for its
    `AIRFLOW_CONN_LAKE_OBJECT_STORE` variable (holds the secret: set it only in a process's
    environment, never log it)."""
    import json

    credentials = local_credentials(settings)
    return json.dumps(
        {
            "conn_type": "aws",
            "login": credentials["access_key_id"],
            "password": credentials["secret_access_key"],
            "extra": {"endpoint_url": settings.endpoint_url, "region_name": "us-east-1"},
        }
    )


def local_lake_object_store(settings: ObjectStoreSettings) -> LakeObjectStore:
    """How the platform reaches this store (endpoint and the generated login)."""
    credentials = local_credentials(settings)
    return LakeObjectStore(
        endpoint_url=settings.endpoint_url,
        access_key_id=SecretStr(credentials["access_key_id"]),
        secret_access_key=SecretStr(credentials["secret_access_key"]),
    )
