"""Whether the lake is on an object store, and what each engine needs to reach it: the one place to ask.

A lake root of `s3a://bucket/...` (PLATFORM_LAKE_ROOT) puts Delta tables on an S3-compatible store;
any other root is a local path and every function here then returns nothing to add, so callers need
no branch of their own. The store's endpoint and login come from the Airflow connection
`lake_object_store` (extra: `endpoint_url`, `region_name`, `path_style`; login and password: the
access key pair) when it is defined, else from the local stack's object store (the running cluster's
when `make cluster-up` started one for its lake, else `make objectstore-up`'s; its generated 0600
credentials file). Spark gets S3A's jars and settings plus the credentials as
environment variables (`SparkObjectStoreAccess`); delta-rs gets `storage_options`, and the control
plane's readers open lake tables with them through `open_lake_table` and read the driver's side files
(heartbeat, progress) with them through `read_side_file`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from revenue_platform.connections import LAKE_OBJECT_STORE_CONN_ID, read_connection
from revenue_platform.errors import ConfigError
from revenue_platform.local_object_store import local_lake_object_store, stack_object_store_settings
from revenue_platform.paths import SPARK_S3_JARS_DIR, lake_root
from spark_apps.contract import side_files
from spark_apps.contract.config_rules import validation_problems
from spark_apps.contract.delta_reads import open_delta
from spark_apps.contract.naming import local_path
from spark_apps.contract.object_store import LakeObjectStore, is_object_store_root

if TYPE_CHECKING:
    from deltalake import DeltaTable


def object_store_from_connection_fields(
    login: str | None, password: str | None, extra: dict[str, Any], conn_id: str = LAKE_OBJECT_STORE_CONN_ID
) -> LakeObjectStore:
    """The store an Airflow connection describes; ConfigError naming the connection when incomplete."""
    fields = {
        "endpoint_url": extra.get("endpoint_url"),
        "region": extra.get("region_name", "us-east-1"),
        "path_style": extra.get("path_style", True),
        "access_key_id": login,
        "secret_access_key": password,
    }
    try:
        return LakeObjectStore.model_validate(fields)
    except ValidationError as error:
        problems = validation_problems(error)
        raise ConfigError(
            f"Airflow connection {conn_id!r} does not describe an object store ({problems}). It needs the "
            "access key id as login, the secret as password and an extra like "
            '{"endpoint_url": "https://s3.eu-west-1.amazonaws.com", "region_name": "eu-west-1"}.'
        ) from None


def _object_store_from_connection(conn_id: str) -> LakeObjectStore | None:
    """The connection's store, or None when no such connection is defined."""
    connection = read_connection(conn_id)
    if connection is None:
        return None
    return object_store_from_connection_fields(
        connection.login, connection.password, dict(connection.extra), conn_id
    )


def _object_store_of_local_stack() -> LakeObjectStore | None:
    settings = stack_object_store_settings()
    return local_lake_object_store(settings) if settings.secrets_path.is_file() else None


def lake_object_store(root: str | None = None) -> LakeObjectStore | None:
    """The object store `root` (default: the platform's lake root) is on, or None for a local root."""
    root = lake_root() if root is None else root
    if not is_object_store_root(root):
        return None
    store = _object_store_from_connection(LAKE_OBJECT_STORE_CONN_ID) or _object_store_of_local_stack()
    if store is None:
        raise ConfigError(
            f"The lake root {root!r} is on an object store, but no Airflow connection "
            f"{LAKE_OBJECT_STORE_CONN_ID!r} describes it and the local object store has never been started "
            "(`make objectstore-up`). Define the connection or start the local store."
        )
    return store


def delta_storage_options(root: str | None = None) -> dict[str, str]:
    """delta-rs `storage_options` for tables under `root`: empty for a local root (secrets in clear:
    never log them)."""
    store = lake_object_store(root)
    return store.delta_rs_storage_options() if store is not None else {}


def open_lake_table(path: str, storage_options: Mapping[str, str] | None = None) -> DeltaTable | None:
    """The Delta table at `path` in the lake, local or on the object store (its `storage_options`
    from `delta_storage_options` unless given); None if nothing was written there yet. Read its rows
    with `spark_apps.contract.delta_reads.read_delta`."""
    return open_delta(path, delta_storage_options(path) if storage_options is None else storage_options)


def snapshot_file_sizes(table: DeltaTable) -> list[int]:
    """The size of each file the table's loaded snapshot references."""
    import pyarrow as pa

    return [
        int(size) for size in pa.table(table.get_add_actions(flatten=True)).column("size_bytes").to_pylist()
    ]


def snapshot_size(table: DeltaTable) -> tuple[int, int]:
    """Files and bytes the table's current snapshot references."""
    sizes = snapshot_file_sizes(table)
    return len(sizes), sum(sizes)


@dataclass(frozen=True)
class SparkObjectStoreAccess:
    """What a Spark job adds to reach the lake's object store: jars, settings (both loggable) and the
    credentials for its process environment (never for a command line)."""

    jars: tuple[str, ...] = ()
    conf: dict[str, str] = field(default_factory=dict)
    environment: dict[str, str] = field(default_factory=dict, repr=False)


def spark_object_store_access(root: str | None = None) -> SparkObjectStoreAccess:
    """S3A's jars, settings and credentials environment when `root` is on an object store; else nothing."""
    store = lake_object_store(root)
    if store is None:
        return SparkObjectStoreAccess()
    from spark_apps.engine.session import object_store_jar_paths

    return SparkObjectStoreAccess(
        jars=tuple(object_store_jar_paths(SPARK_S3_JARS_DIR)),
        conf=store.spark_hadoop_conf(),
        environment=store.credentials_environment(),
    )


def read_side_file(location: str) -> dict[str, Any] | None:
    """A JSON side file the driver publishes in the lake (its heartbeat, a query's progress), on a local
    disk or on the object store (`spark_apps.contract.side_files`); None when there is none yet."""
    options = delta_storage_options(location)
    return side_files.read_json(location, options)


def list_side_files(folder: str) -> list[str]:
    """Locations of the JSON side files in a lake folder (`DeploymentNames.progress_dir`), by name."""
    return side_files.list_json(folder, delta_storage_options(folder))


def read_lake_file(location: str) -> bytes | None:
    """The bytes of one file of the lake, a local file or an object on the store; None when absent."""
    if not is_object_store_root(location):
        try:
            return local_path(location).read_bytes()
        except OSError:
            return None
    store = side_files.object_store_filesystem(delta_storage_options(location))
    try:
        with store.open_input_stream(side_files.object_key(location)) as source:
            return bytes(source.read())
    except OSError:  # pyarrow's "not found" is a FileNotFoundError
        return None


def upload_to_store(local_folder: Path, files: Iterable[Path], location: str) -> int:
    """Copy `files` (each under `local_folder`) to the same relative paths under `location`, a folder
    on the lake's object store; returns how many. Each object is one PUT of the whole file."""
    store = side_files.object_store_filesystem(delta_storage_options(location))
    prefix = side_files.object_key(location)
    copied = 0
    for path in files:
        relative = path.relative_to(local_folder).as_posix()
        with store.open_output_stream(f"{prefix}/{relative}") as out:
            out.write(path.read_bytes())
        copied += 1
    return copied


def download_missing_from_store(location: str, local_folder: Path) -> int:
    """Copy every object under `location` (a folder on the lake's object store) that `local_folder`
    lacks, to the same relative path; returns how many. Keys that would leave the folder (`..`) are
    skipped: a key is a name anyone with write access chose."""
    from pyarrow.fs import FileSelector, FileType

    store = side_files.object_store_filesystem(delta_storage_options(location))
    prefix = side_files.object_key(location)
    found = store.get_file_info(FileSelector(prefix, recursive=True, allow_not_found=True))
    copied = 0
    for info in found:
        relative = PurePosixPath(info.path[len(prefix) :].lstrip("/"))
        if info.type != FileType.File or ".." in relative.parts or not relative.parts:
            continue
        target = local_folder.joinpath(*relative.parts)
        if target.exists():
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        with store.open_input_stream(info.path) as source:
            target.write_bytes(source.read())
        copied += 1
    return copied
