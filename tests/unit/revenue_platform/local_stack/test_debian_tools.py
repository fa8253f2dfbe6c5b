"""`make browser` and `make promtool`: a tool that is there is used as is; a missing one without apt-get
is a clear error that names the fix."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest

from revenue_platform.errors import PrerequisiteError
from revenue_platform.local_stack import browser, promtool


@dataclass(frozen=True)
class Tool:
    module: ModuleType
    constant: str
    """The module's constant with the tool's path."""
    ensure: Callable[..., Path]
    variable: str
    """The environment variable the error must name."""


@pytest.fixture(
    params=[
        Tool(browser, "CHROMIUM", browser.ensure_chromium, "CHROMIUM_PATH"),
        Tool(promtool, "PROMTOOL", promtool.ensure_promtool, "PROMTOOL_PATH"),
    ],
    ids=["chromium", "promtool"],
)
def tool(request: pytest.FixtureRequest) -> Tool:
    chosen: Tool = request.param
    return chosen


def test_an_installed_tool_is_returned_without_running_apt(
    tool: Tool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    executable = tmp_path / "tool"
    executable.write_text("#!/bin/sh\n")
    executable.chmod(0o755)
    monkeypatch.setattr(tool.module, tool.constant, executable)
    # No apt-get on PATH: reaching the installer would raise.
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))

    assert tool.ensure(progress=pytest.fail) == executable


def test_a_missing_tool_without_apt_names_the_fix(
    tool: Tool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tool.module, tool.constant, tmp_path / "missing")
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))

    with pytest.raises(PrerequisiteError, match=rf"no apt-get.*{tool.variable}"):
        tool.ensure(progress=lambda _: None)


def test_a_promtool_on_path_is_used_when_the_project_has_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    on_path = tmp_path / "bin" / "promtool"
    on_path.parent.mkdir()
    on_path.write_text("#!/bin/sh\n")
    on_path.chmod(0o755)
    monkeypatch.setattr(promtool, "PROMTOOL", tmp_path / "missing")
    monkeypatch.setenv("PATH", str(on_path.parent))

    assert promtool.ensure_promtool(progress=pytest.fail) == on_path
