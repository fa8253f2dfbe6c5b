"""Files only their owner may read: generated secrets (passwords, keys) kept beside the state they guard.

Created 0600 with O_EXCL, so two processes starting at once never overwrite each other's freshly
generated value, and a file an older version wrote with wider permissions is tightened on read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path


def private_text(path: Path, generate: Callable[[], str]) -> str:
    """The text of `path`, created 0600 (never readable by others) with `generate()` if missing."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        # O_EXCL: two processes starting at once never overwrite each other's freshly generated value.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        os.chmod(path, 0o600)  # tighten a file an older version wrote 0644
        return path.read_text()
    text = generate()
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    return text


def private_json(path: Path, generate: Callable[[], dict[str, str]]) -> dict[str, str]:
    """The JSON object in `path`, created 0600 (never readable by others) with `generate()` if missing."""
    loaded: dict[str, str] = json.loads(private_text(path, lambda: json.dumps(generate())))
    return loaded


def replace_private_json(path: Path, values: dict[str, str]) -> None:
    """Replace the JSON object in `path` atomically, 0600: written to a 0600 file beside it, then
    renamed over it (a reader sees the old object or the new, never half of one)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(values, handle)
    os.replace(partial, path)
