"""The import map of docs/architecture.md, enforced: imports only run down the layers.

    dags/, plugins/  ->  revenue_platform (include/)  ->  spark_apps

Every import counts, also the ones inside functions (the code base imports heavy modules lazily,
and a lazy import up the layers is still a dependency). `make lint` runs this file.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[3]
# Where each first-party top-level package lives, and the layer it belongs to.
SOURCES: dict[str, Path] = {
    "dags": REPO_ROOT / "dags",
    "plugins": REPO_ROOT / "plugins",
    "revenue_platform": REPO_ROOT / "include" / "revenue_platform",
    "spark_apps": REPO_ROOT / "spark_apps",
    "bench": REPO_ROOT / "bench",
}
FIRST_PARTY = (*SOURCES, "tests")
# What each package may import from the project (itself always). Anything else first-party is refused.
ALLOWED: dict[str, frozenset[str]] = {
    # DAG files and plugins are entry points Airflow loads; nothing imports them.
    "dags": frozenset({"revenue_platform", "spark_apps"}),
    "plugins": frozenset({"revenue_platform", "spark_apps"}),
    # The control plane: Airflow tasks, serving, the local stack. Runs Spark only through spark-submit.
    "revenue_platform": frozenset({"spark_apps"}),
    # The data plane: runs inside spark-submit, where only spark_apps is shipped (--py-files).
    "spark_apps": frozenset(),
    # The benchmark drives the platform like a user: everything but the DAG files and the tests.
    "bench": frozenset({"revenue_platform", "spark_apps"}),
}
# The local stack's CLI package starts and stops processes on a developer machine; only itself, the
# commands that drive the local stack (make demo, make release) and the benchmark may depend on it.
LOCAL_STACK = "revenue_platform.local_stack"
LOCAL_STACK_USERS = (LOCAL_STACK, "revenue_platform.demo", "revenue_platform.bluegreen.release", "bench")


@dataclass(frozen=True)
class Import:
    module: str
    """The importing module, e.g. revenue_platform.streaming.deploy."""
    target: str
    """What is imported, absolute: a module, or `module.name` for `from module import name`."""
    line: int


def module_name(package: str, root: Path, path: Path) -> str:
    parts = [package, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(module: str, source: str, is_package: bool = False) -> list[Import]:
    """Every import in `source` (top level or not), relative ones made absolute."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [Import(module, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
                origin = ".".join([*base, node.module] if node.module else base)
            else:
                origin = node.module or ""
            found += [Import(module, f"{origin}.{alias.name}", node.lineno) for alias in node.names]
    return found


def _is_under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def violation(found: Import) -> str | None:
    """Why `found` breaks the import map, or None if it is allowed."""
    source, target = found.module.split(".")[0], found.target.split(".")[0]
    if target in FIRST_PARTY and target != source and target not in ALLOWED[source]:
        return f"{found.module} imports {found.target}: {source} must not depend on {target}"
    local_stack_user = any(_is_under(found.module, user) for user in LOCAL_STACK_USERS)
    if _is_under(found.target, LOCAL_STACK) and not local_stack_user:
        return f"{found.module} imports {found.target}: only the local stack's commands may import it"
    return None


def project_imports() -> list[Import]:
    found = []
    for package, root in SOURCES.items():
        for path in sorted(root.rglob("*.py")):
            module = module_name(package, root, path)
            found += imports_of(module, path.read_text(), is_package=path.name == "__init__.py")
    return found


def test_every_import_runs_down_the_layers() -> None:
    found = project_imports()
    assert len({i.module for i in found}) > 50, "the walk missed the project's modules"
    problems = [f"{problem} (line {i.line})" for i in found if (problem := violation(i))]
    assert problems == []


@pytest.mark.parametrize(
    ("module", "source", "complaint"),
    [
        (
            "spark_apps.storage.gold",
            "from revenue_platform.paths import lake_root",
            "spark_apps must not depend on",
        ),
        (
            "spark_apps.storage.gold",
            "def f():\n    import dags.deploy_streaming_app",
            "spark_apps must not depend on",
        ),
        ("revenue_platform.serving.api", "from dags import x", "revenue_platform must not depend on dags"),
        ("revenue_platform.streaming.deploy", "from revenue_platform.local_stack import jvm", "local stack"),
        ("revenue_platform.streaming.deploy", "from ..local_stack import jvm", "local stack"),
        ("revenue_platform.serving.api", "from revenue_platform import local_stack", "local stack"),
        ("dags.deploy_streaming_app", "import revenue_platform.local_stack.jvm", "local stack"),
        ("revenue_platform.gold_table", "from tests.quality_helpers import x", "must not depend on tests"),
    ],
)
def test_imports_up_the_layers_are_reported(module: str, source: str, complaint: str) -> None:
    problems = [problem for i in imports_of(module, source) if (problem := violation(i))]
    assert len(problems) == 1
    assert complaint in problems[0]


@pytest.mark.parametrize(
    ("module", "source"),
    [
        ("dags.reprocess_revenue", "from spark_apps.contract.naming import DEPLOYMENT_ID_PATTERN"),
        ("revenue_platform.streaming.deploy", "from revenue_platform import processes"),
        ("revenue_platform.demo", "from revenue_platform.local_stack.airflow_local import x"),
        ("revenue_platform.local_stack.jvm", "from . import prerequisites"),
        ("bench.runner", "from revenue_platform.local_stack.kafka_broker import LocalKafkaBroker"),
        (
            "spark_apps.storage.gold",
            "from pyspark.sql import DataFrame\nfrom spark_apps.contract.records import GOLD_COLUMNS",
        ),
    ],
)
def test_imports_down_the_layers_are_allowed(module: str, source: str) -> None:
    found = imports_of(module, source)
    assert found
    assert [violation(i) for i in found] == [None] * len(found)
