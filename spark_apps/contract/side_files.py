"""The small JSON side files the driver and the control plane exchange, wherever the lake is.

The driver publishes its heartbeat (`DeploymentNames.driver_status_file`) and each query's progress
(`DeploymentNames.progress_file`) under `DeploymentNames.progress_dir`, in the lake: on a local disk
for a local lake, on the object store for an `s3a://` lake, so a driver on another host reports to a
supervisor that shares no disk with it. Every writer and reader goes through here: `write_json`,
`read_json` and `list_json` take a location as `DeploymentNames` names it and the store's delta-rs
`storage_options` (the same options, hence the same credentials, as the lake's Delta readers; empty for
a local location). A write is atomic for readers either way: a local file is written beside the target
and renamed over it, an object is one PUT, which the store makes visible whole. The S3 client is
pyarrow's, made once per store and kept for the process: the heartbeat writes every 5 s and the
progress listener once per batch.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from spark_apps.contract.json_files import write_json_atomically
from spark_apps.contract.naming import local_path
from spark_apps.contract.object_store import is_object_store_root

if TYPE_CHECKING:
    from pyarrow.fs import S3FileSystem


def object_key(location: str) -> str:
    """An object-store location (`s3a://bucket/key`, `s3://bucket/key`) as pyarrow names it:
    `bucket/key`."""
    return location.split("://", 1)[1].strip("/")


def s3_client_settings(storage_options: Mapping[str, str]) -> dict[str, Any]:
    """pyarrow `S3FileSystem` arguments for the store delta-rs `storage_options` describe (secrets in
    clear: never log them); ValueError naming what is missing, never a value."""
    missing = [
        name
        for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
        if not storage_options.get(name)
    ]
    if missing:
        raise ValueError(f"the object store's options lack {', '.join(missing)}: side files cannot reach it")
    scheme, _, endpoint = storage_options["AWS_ENDPOINT_URL"].rstrip("/").partition("://")
    return {
        "endpoint_override": endpoint,
        "scheme": scheme,
        "region": storage_options.get("AWS_REGION", "us-east-1"),
        "access_key": storage_options["AWS_ACCESS_KEY_ID"],
        "secret_key": storage_options["AWS_SECRET_ACCESS_KEY"],
        "force_virtual_addressing": storage_options.get("AWS_VIRTUAL_HOSTED_STYLE_REQUEST") == "true",
        # Side files are a few KB: a write is done when it returns (no upload still running at exit).
        "background_writes": False,
    }


@lru_cache(maxsize=8)
def _s3_client(settings: tuple[tuple[str, Any], ...]) -> S3FileSystem:
    from pyarrow.fs import S3FileSystem

    return S3FileSystem(**dict(settings))


def object_store_filesystem(storage_options: Mapping[str, str] | None) -> S3FileSystem:
    """pyarrow's client of the store `storage_options` (delta-rs's) describe, made once per store."""
    return _s3_client(tuple(sorted(s3_client_settings(storage_options or {}).items())))


def write_json(
    location: str, document: dict[str, Any], storage_options: Mapping[str, str] | None = None
) -> None:
    """Replace the side file at `location` with `document`, whole (readers never see half of it)."""
    if not is_object_store_root(location):
        write_json_atomically(local_path(location), document)
        return
    payload = json.dumps(document, indent=2, default=str).encode("utf-8")
    with object_store_filesystem(storage_options).open_output_stream(object_key(location)) as out:
        out.write(payload)


def read_json(location: str, storage_options: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The JSON object in the side file at `location`; None when there is none yet, it cannot be read
    or it holds no JSON object."""
    store = object_store_filesystem(storage_options) if is_object_store_root(location) else None
    try:
        if store is not None:
            with store.open_input_stream(object_key(location)) as source:
                text = source.read().decode("utf-8")
        else:
            text = local_path(location).read_text(encoding="utf-8")
        document = json.loads(text)
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None


def list_json(folder: str, storage_options: Mapping[str, str] | None = None) -> list[str]:
    """Locations of the `*.json` side files directly in `folder`, sorted by name (none if no folder)."""
    if not is_object_store_root(folder):
        local = local_path(folder)
        names = sorted(path.name for path in local.glob("*.json")) if local.is_dir() else []
    else:
        from pyarrow.fs import FileSelector, FileType

        store = object_store_filesystem(storage_options)
        try:
            found = store.get_file_info(FileSelector(object_key(folder), allow_not_found=True))
        except OSError:
            return []
        names = sorted(info.base_name for info in found if info.type == FileType.File)
    return [f"{folder.rstrip('/')}/{name}" for name in names if name.endswith(".json")]
