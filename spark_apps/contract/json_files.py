"""Files the driver and the control plane exchange (progress, driver status, lease checks): written
whole or not at all, so a reader polling them never parses half a document."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_json_atomically(path: Path, document: dict[str, Any]) -> None:
    """Readers never see a half-written file: write a temp file, then rename over the target."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(handle, "w") as out:
        json.dump(document, out, indent=2, default=str)
    os.replace(temporary, path)
