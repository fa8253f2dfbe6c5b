"""apt-get for the test tools the project installs from Debian itself (Chromium, promtool).

Runs apt-get as root, or through `sudo -n` for a user who may; anyone else gets a `PrerequisiteError`
that says how to install the tool by hand (`manual`), as does a failing apt-get (with its output).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from revenue_platform.errors import PrerequisiteError


def require_apt_get(missing: str, manual: str) -> None:
    """Raise unless this machine has apt-get; `missing` says what is missing, `manual` what to do."""
    if shutil.which("apt-get") is None:
        raise PrerequisiteError(f"{missing} and this machine has no apt-get to install it with. {manual}")


def as_root(*arguments: str, manual: str) -> list[str]:
    """`apt-get ARGUMENTS`, through `sudo -n` unless this process is root."""
    command = ["apt-get", *arguments]
    if os.geteuid() == 0:
        return command
    if shutil.which("sudo") is None:
        raise PrerequisiteError(f"`apt-get {' '.join(arguments)}` needs root: {manual}")
    return ["sudo", "-n", *command]


def run_apt(command: list[str], manual: str, cwd: Path | None = None) -> None:
    """Run an apt-get command line non-interactively; a failure is a PrerequisiteError with its output."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    completed = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise PrerequisiteError(
            f"`{' '.join(command)}` failed (exit {completed.returncode}); {manual} Output:\n"
            f"{(completed.stdout + completed.stderr)[-2000:]}"
        )
