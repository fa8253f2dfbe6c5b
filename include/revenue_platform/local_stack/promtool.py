"""Prometheus' `promtool` for the alert rule tests, from Debian's `prometheus` package, only when missing.

`make test` runs `ensure_promtool` first (like `ensure_chromium`). A promtool on PATH, or at
PROMTOOL_PATH, is used as it is. Otherwise the package is fetched with `apt-get download` (no root
needed, nothing installed system-wide, no Prometheus server or service) and only its `usr/bin/promtool`
is unpacked into the git-ignored `.tools/`. When the package lists do not know the package yet,
`apt-get update` runs first, as root or through `sudo -n`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from revenue_platform.errors import PrerequisiteError
from revenue_platform.local_stack.debian_packages import as_root, require_apt_get, run_apt
from revenue_platform.paths import REPO_ROOT

PROMTOOL = Path(os.environ.get("PROMTOOL_PATH", REPO_ROOT / ".tools" / "promtool"))
"""Where the project keeps its promtool; env PROMTOOL_PATH points the tests at another one."""
DEBIAN_PACKAGE = "prometheus"
MANUAL = (
    "Install promtool by hand (`apt-get install prometheus`, or Prometheus' release tarball) and put it "
    "on PATH or set PROMTOOL_PATH to it."
)


def find_promtool() -> Path | None:
    """The project's promtool (PROMTOOL_PATH or .tools/promtool), else one on PATH, else None."""
    if PROMTOOL.is_file() and os.access(PROMTOOL, os.X_OK):
        return PROMTOOL
    on_path = shutil.which("promtool")
    return Path(on_path) if on_path else None


def _download(folder: Path) -> Path:
    """Debian's prometheus .deb in `folder`; updates the package lists once if apt does not know it."""
    try:
        run_apt(["apt-get", "download", "-q", DEBIAN_PACKAGE], MANUAL, cwd=folder)
    except PrerequisiteError:
        run_apt(as_root("update", "-q", manual=MANUAL), MANUAL)
        run_apt(["apt-get", "download", "-q", DEBIAN_PACKAGE], MANUAL, cwd=folder)
    packages = sorted(folder.glob(f"{DEBIAN_PACKAGE}_*.deb"))
    if not packages:
        raise PrerequisiteError(f"`apt-get download {DEBIAN_PACKAGE}` left no .deb in {folder}. {MANUAL}")
    return packages[0]


def ensure_promtool(progress: Callable[[str], None] = print) -> Path:
    """Return a working promtool; unpack Debian's into `PROMTOOL` if none is there."""
    found = find_promtool()
    if found is not None:
        return found
    require_apt_get("promtool is missing", MANUAL)
    if shutil.which("dpkg-deb") is None:
        raise PrerequisiteError(f"promtool is missing and there is no dpkg-deb to unpack it with. {MANUAL}")
    progress(f"[promtool] missing: unpacking it from Debian's {DEBIAN_PACKAGE} package into {PROMTOOL} ...")
    with tempfile.TemporaryDirectory(prefix="promtool-") as scratch:
        package = _download(Path(scratch))
        unpacked = Path(scratch) / "root"
        subprocess.run(["dpkg-deb", "-x", str(package), str(unpacked)], check=True, capture_output=True)
        PROMTOOL.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(unpacked / "usr" / "bin" / "promtool", PROMTOOL)
    PROMTOOL.chmod(0o755)
    version = subprocess.run([str(PROMTOOL), "--version"], capture_output=True, text=True, check=False)
    if version.returncode != 0:
        raise PrerequisiteError(f"{PROMTOOL} does not run: {version.stderr.strip()[-500:]}. {MANUAL}")
    progress(f"[promtool] {version.stdout.splitlines()[0] if version.stdout else PROMTOOL}")
    return PROMTOOL
