"""Debian's Chromium for the browser tests: installed by the project itself, only when missing.

The e2e browser test drives the Airflow UI with Playwright against the system Chromium
(`executable_path=CHROMIUM`), never a browser build Playwright downloads: a fresh machine
reaches Debian's package mirror, not Playwright's CDN. `make test` runs `ensure_chromium`
first; on a machine that has Chromium it does nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from revenue_platform.errors import PrerequisiteError
from revenue_platform.local_stack.debian_packages import as_root, require_apt_get, run_apt

CHROMIUM = Path(os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"))
"""The browser the tests launch; env CHROMIUM_PATH points them at another build."""
MANUAL = "Install Chromium by hand (`apt-get install chromium`) or set CHROMIUM_PATH to an installed one."


def ensure_chromium(progress: Callable[[str], None] = print) -> Path:
    """Return the Chromium executable; install Debian's `chromium` with apt-get if it is missing."""
    if CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    require_apt_get(f"{CHROMIUM} is missing", MANUAL)
    progress(f"[browser] {CHROMIUM} is missing: installing Debian's chromium with apt-get ...")
    for arguments in (("update", "-q"), ("install", "-y", "-q", "--no-install-recommends", "chromium")):
        run_apt(as_root(*arguments, manual=MANUAL), MANUAL)
    if not CHROMIUM.is_file():
        raise PrerequisiteError(
            f"apt-get installed chromium, but {CHROMIUM} is still missing; set CHROMIUM_PATH."
        )
    progress(f"[browser] installed {CHROMIUM}")
    return CHROMIUM
