"""Where a bench entry's results land: the machine it measured, and its JSON document (every number)
with the markdown summary beside it, in bench/results/ (git-ignored except `.gitkeep`)."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any


def machine() -> dict[str, object]:
    """CPUs, memory, platform and Python of this machine: what every results document names."""
    import psutil

    return {
        "cpus": os.cpu_count(),
        "memory_gib": psutil.virtual_memory().total / 2**30,
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def write_documents(document: dict[str, Any], summary: str, out: Path, name: str) -> Path:
    """`<out>/<name>.json` (the document) and `<out>/<name>.md` (its summary); returns the JSON's path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.json"
    path.write_text(json.dumps(document, indent=2, default=str))
    path.with_suffix(".md").write_text(summary)
    return path
