"""`make browser`: an installed Chromium is used as is; a missing one without apt-get is a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from revenue_platform.errors import PrerequisiteError
from revenue_platform.local_stack import browser


def test_an_installed_chromium_is_returned_without_running_apt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chromium = tmp_path / "chromium"
    chromium.write_text("#!/bin/sh\n")
    chromium.chmod(0o755)
    monkeypatch.setattr(browser, "CHROMIUM", chromium)
    # No apt-get on PATH: reaching the installer would raise.
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))

    assert browser.ensure_chromium(progress=pytest.fail) == chromium


def test_a_missing_chromium_without_apt_names_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(browser, "CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))

    with pytest.raises(PrerequisiteError, match=r"no apt-get.*CHROMIUM_PATH"):
        browser.ensure_chromium(progress=lambda _: None)
