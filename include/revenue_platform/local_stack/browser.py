"""Debian's Chromium for the browser tests: installed by the project itself, only when missing.

The e2e browser test drives the Airflow UI with Playwright against the system Chromium
(`executable_path=CHROMIUM`), never a browser build Playwright downloads: a fresh machine
reaches Debian's package mirror, not Playwright's CDN. `make test` runs `ensure_chromium`
first; on a machine that has Chromium it does nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from revenue_platform.errors import PrerequisiteError

CHROMIUM = Path(os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"))
"""The browser the tests launch; env CHROMIUM_PATH points them at another build."""


def _apt_command(*arguments: str) -> list[str]:
    command = ["apt-get", *arguments]
    if os.geteuid() == 0:
        return command
    if shutil.which("sudo") is None:
        raise PrerequisiteError(
            f"{CHROMIUM} is missing and installing it needs root: run `sudo apt-get install -y chromium`, "
            "or set CHROMIUM_PATH to an installed Chromium."
        )
    return ["sudo", "-n", *command]


def ensure_chromium(progress: Callable[[str], None] = print) -> Path:
    """Return the Chromium executable; install Debian's `chromium` with apt-get if it is missing."""
    if CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    if shutil.which("apt-get") is None:
        raise PrerequisiteError(
            f"{CHROMIUM} is missing and this machine has no apt-get to install Debian's `chromium` with. "
            "Install Chromium with your package manager and set CHROMIUM_PATH to its executable."
        )
    progress(f"[browser] {CHROMIUM} is missing: installing Debian's chromium with apt-get ...")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for arguments in (("update", "-q"), ("install", "-y", "-q", "--no-install-recommends", "chromium")):
        completed = subprocess.run(
            _apt_command(*arguments), env=env, capture_output=True, text=True, check=False
        )
        if completed.returncode != 0:
            raise PrerequisiteError(
                f"`apt-get {' '.join(arguments)}` failed (exit {completed.returncode}); install Chromium by "
                f"hand (`apt-get install chromium`) or set CHROMIUM_PATH. Output:\n"
                f"{(completed.stdout + completed.stderr)[-2000:]}"
            )
    if not CHROMIUM.is_file():
        raise PrerequisiteError(
            f"apt-get installed chromium, but {CHROMIUM} is still missing; set CHROMIUM_PATH."
        )
    progress(f"[browser] installed {CHROMIUM}")
    return CHROMIUM
