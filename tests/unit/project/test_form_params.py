"""Every DAG's trigger form as users see it (each field's default, description and JSON schema),
held against a snapshot: moving a form to a request model, or any refactoring, must not change a form
by accident. A change that is meant is made by regenerating the snapshot and reviewing its diff:
`UPDATE_FORM_SNAPSHOT=1 make test-fast PYTEST_ARGS='-k form_params'`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

SNAPSHOT = Path(__file__).parent / "snapshots" / "dag_forms.json"


def rendered_forms() -> dict[str, dict[str, Any]]:
    from airflow.dag_processing.dagbag import DagBag

    from revenue_platform.paths import DAGS_DIR

    bag = DagBag(dag_folder=str(DAGS_DIR))
    assert not bag.import_errors, bag.import_errors
    return {
        dag_id: {
            name: {
                "default": dag.params.get_param(name).value,
                "description": dag.params.get_param(name).description,
                "schema": dag.params.get_param(name).schema,
            }
            for name in sorted(dag.params.keys())
        }
        for dag_id, dag in sorted(bag.dags.items())
    }


def test_every_dag_form_is_as_the_snapshot_says() -> None:
    forms = json.loads(json.dumps(rendered_forms(), sort_keys=True, default=str))
    if os.environ.get("UPDATE_FORM_SNAPSHOT"):
        SNAPSHOT.write_text(json.dumps(forms, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    snapshot = json.loads(SNAPSHOT.read_text())
    assert set(forms) == set(snapshot), "a DAG came or went: regenerate the snapshot (module docstring)"
    for dag_id, form in forms.items():
        assert form == snapshot[dag_id], f"{dag_id}'s form changed: regenerate the snapshot if meant"


def test_no_dag_writes_a_form_field_by_hand() -> None:
    # Every form is a request model's (`airflow.params.params_from_model`): a field's default, description and
    # bounds are stated once, in the model that also validates the run's request.
    import ast

    from revenue_platform.paths import DAGS_DIR

    for dag_file in sorted(DAGS_DIR.glob("*.py")):
        tree = ast.parse(dag_file.read_text())
        called = {
            node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
        }
        assert "Param" not in called, f"{dag_file.name} writes a Param by hand"
        assert "params_from_model" in called or "params=" not in dag_file.read_text(), dag_file.name
