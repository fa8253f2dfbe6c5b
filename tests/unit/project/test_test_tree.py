"""The unit tests mirror the package tree: a test of `revenue_platform.streaming.finality` lives in
tests/unit/revenue_platform/streaming/, of `spark_apps.engine.*` in tests/unit/spark_apps/engine/. Only
tests/unit/project/ holds tests of the repository as a whole (the import map, docker-compose, every
input surface at once)."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
UNIT = REPO_ROOT / "tests" / "unit"
PACKAGES = {
    "revenue_platform": REPO_ROOT / "include" / "revenue_platform",
    "spark_apps": REPO_ROOT / "spark_apps",
    "bench": REPO_ROOT / "bench",
}
WHOLE_REPOSITORY = "project"


def test_every_unit_test_folder_is_a_package_folder() -> None:
    misplaced = []
    for test_file in sorted(UNIT.rglob("test_*.py")):
        package, *folders = test_file.parent.relative_to(UNIT).parts or ("",)
        if package == WHOLE_REPOSITORY and not folders:
            continue
        if package not in PACKAGES or not PACKAGES[package].joinpath(*folders).is_dir():
            misplaced.append(str(test_file.relative_to(REPO_ROOT)))
    assert misplaced == [], f"unit tests outside the package tree's mirror: {misplaced}"


def test_no_two_test_modules_share_a_file_name() -> None:
    """The test folders are not packages, so pytest imports each module under its bare file name, and a
    worker that meets a second module of that name fails it with "import file mismatch" (a CI run did,
    once a second `test_package_layers.py` came in)."""
    places: dict[str, list[str]] = {}
    for test_file in sorted((REPO_ROOT / "tests").rglob("test_*.py")):
        places.setdefault(test_file.name, []).append(str(test_file.relative_to(REPO_ROOT)))
    assert {name: paths for name, paths in places.items() if len(paths) > 1} == {}


def test_the_check_sees_the_tests() -> None:
    # A rename of tests/unit or of the packages must not turn the check above into a no-op.
    assert len(list(UNIT.rglob("test_*.py"))) > 50
    assert all(folder.is_dir() for folder in PACKAGES.values())
