"""Helpers for tests of the lake on the object store: where an object lives in the store's folder, and
what of a lake leaked onto a local disk."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlparse

from revenue_platform.local_object_store import ObjectStoreSettings


def in_the_bucket(object_store: ObjectStoreSettings, location: str) -> Path:
    """The folder or file S3Proxy keeps the object(s) at `location` (`s3a://bucket/key`) in."""
    url = urlparse(location)
    return object_store.blobs_dir / url.netloc / url.path.lstrip("/")


def local_paths_naming(marker: str, roots: list[Path], store_data: Path) -> list[Path]:
    """Files and folders whose path contains `marker`, under `roots`, outside the store's own folder."""
    found = []
    for root in roots:
        for folder, subfolders, files in os.walk(root):
            subfolders[:] = [name for name in subfolders if name not in {".venv", ".jvm", ".git", ".tools"}]
            for name in [*subfolders, *files]:
                path = Path(folder) / name
                if marker in str(path) and not path.is_relative_to(store_data):
                    found.append(path)
    return found
