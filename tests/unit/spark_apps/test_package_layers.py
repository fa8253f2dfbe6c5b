"""spark_apps' own floors, as its package docstring draws them: each sub-package imports only the ones
below it, so the pyspark-free contract never reaches for Spark code, and the pure transformations
never for reads and writes. Every import counts, also the lazy ones inside functions."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SPARK_APPS = Path(__file__).resolve().parents[3] / "spark_apps"
# Bottom to top; the entry points (spark_apps/*.py) stand on all of them.
LAYERS = ("contract", "validation", "revenue", "storage", "engine")


def spark_apps_imports(path: Path) -> set[str]:
    """The spark_apps sub-packages `path` imports (`from spark_apps.x...`, `import spark_apps.x`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = (
                [node.module] if node.module != "spark_apps" else [f"spark_apps.{a.name}" for a in node.names]
            )
        found |= {name.split(".")[1] for name in names if name.startswith("spark_apps.")}
    return found


@pytest.mark.parametrize("package", LAYERS)
def test_a_sub_package_imports_only_the_ones_below_it(package: str) -> None:
    below = set(LAYERS[: LAYERS.index(package) + 1])
    upward = {
        f"{path.relative_to(SPARK_APPS)} imports spark_apps.{target}"
        for path in sorted((SPARK_APPS / package).rglob("*.py"))
        for target in spark_apps_imports(path) - below
    }
    assert upward == set()


def test_every_sub_package_has_a_floor() -> None:
    packages = {path.parent.name for path in SPARK_APPS.glob("*/__init__.py")}
    assert packages == set(LAYERS)
