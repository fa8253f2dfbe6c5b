"""The control plane's own floors (docs/architecture.md, "The control plane's floors"): each room of
`revenue_platform` (a sub-package or a top-level module) imports only rooms on lower floors, so no
two rooms import each other, however far round, and the features never reach up into the faces that
use them. Only the top one, `revenue_platform.airflow`, speaks Airflow. Every import that runs
counts, also the lazy ones inside functions; an import under
`if TYPE_CHECKING:` never runs and is left out."""

from __future__ import annotations

import ast
from pathlib import Path

REVENUE_PLATFORM = Path(__file__).resolve().parents[3] / "include" / "revenue_platform"

# Bottom to top. A room may import any room of a lower floor, none of its own or a higher one.
FLOORS: tuple[frozenset[str], ...] = (
    # What everything stands on: errors, paths, processes, how a connection is read.
    frozenset({"errors"}),
    frozenset({"paths", "times", "private_files", "connections", "orders_generator"}),
    frozenset({"processes", "kafka_connection", "child_env"}),
    frozenset({"local_object_store", "forms"}),
    # The platform's stores: topics, the lake, the registry, gold, how a Spark job is submitted.
    frozenset({"topics", "lake_storage"}),
    frozenset({"registry", "gold_table", "spark_submit", "lake_checksums"}),
    # Features, each on what it needs.
    frozenset({"streaming"}),
    frozenset({"local_stack", "quality", "reprocessing"}),
    frozenset({"bluegreen", "lake_maintenance"}),
    # Faces: the revenue API and the operations view; the demo; Airflow (task bodies, forms' Params,
    # operators, notifiers, approval, catch-up, the DAGs' defaults and assets, the plugin apps' auth).
    frozenset({"serving"}),
    frozenset({"demo", "airflow"}),
)
AIRFLOW_FACE = "airflow"


def room_of(path: Path) -> str:
    relative = path.relative_to(REVENUE_PLATFORM)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def _type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", "")) == (
        "TYPE_CHECKING"
    )


def modules_imported(path: Path) -> set[str]:
    """Every module `path` imports at run time (absolute names; the platform uses no relative imports)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if _type_checking_only(node):
            return
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            names = [f"{base}.{alias.name}" for alias in node.names] if base == "revenue_platform" else [base]
        found.update(names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return found


def rooms_imported(path: Path) -> set[str]:
    """The rooms of revenue_platform that `path` imports at run time."""
    return {name.split(".")[1] for name in modules_imported(path) if name.startswith("revenue_platform.")}


def imports_airflow(path: Path) -> bool:
    return any(name == "airflow" or name.startswith("airflow.") for name in modules_imported(path))


def floor_of(room: str) -> int:
    for floor, rooms in enumerate(FLOORS):
        if room in rooms:
            return floor
    raise AssertionError(f"revenue_platform room {room!r} has no floor in FLOORS: give it one")


def test_every_room_imports_only_rooms_on_lower_floors() -> None:
    upward = sorted(
        f"{path.relative_to(REVENUE_PLATFORM)} (floor {floor_of(room_of(path))}) imports "
        f"revenue_platform.{target} (floor {floor_of(target)})"
        for path in REVENUE_PLATFORM.rglob("*.py")
        if path.name != "__init__.py" or path.parent != REVENUE_PLATFORM
        for target in rooms_imported(path) - {room_of(path)}
        if floor_of(target) >= floor_of(room_of(path))
    )
    assert upward == []


def test_every_room_has_one_floor() -> None:
    rooms = {room_of(path) for path in REVENUE_PLATFORM.glob("*.py") if path.name != "__init__.py"}
    rooms |= {path.parent.name for path in REVENUE_PLATFORM.glob("*/__init__.py")}
    placed = [room for floor in FLOORS for room in floor]
    assert sorted(placed) == sorted(set(placed)), "a room on two floors"
    assert set(placed) == rooms


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The rule is not vacuous: a lazy import of a higher room and a TYPE_CHECKING one are told apart."""
    module = tmp_path / "probe.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from revenue_platform.serving.api import app\n"
        "def f():\n"
        "    from revenue_platform.bluegreen import replay\n"
        "    import revenue_platform.demo\n"
    )
    assert rooms_imported(module) == {"bluegreen", "demo"}


def test_only_the_airflow_face_imports_airflow() -> None:
    """Airflow is a face, not a floor: the library takes typed requests and imports no Airflow, also not
    lazily inside a function (an import under TYPE_CHECKING, for a type, never runs and may stay)."""
    speaking_airflow = sorted(
        str(path.relative_to(REVENUE_PLATFORM))
        for path in REVENUE_PLATFORM.rglob("*.py")
        if room_of(path) != AIRFLOW_FACE and imports_airflow(path)
    )
    assert speaking_airflow == []
    assert imports_airflow(REVENUE_PLATFORM / AIRFLOW_FACE / "connections.py")


def test_the_airflow_check_sees_a_lazy_import(tmp_path: Path) -> None:
    module = tmp_path / "probe.py"
    module.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from airflow.sdk import Context\n"
    )
    assert not imports_airflow(module)
    module.write_text(module.read_text() + "def f():\n    from airflow.sdk import BaseHook\n")
    assert imports_airflow(module)
