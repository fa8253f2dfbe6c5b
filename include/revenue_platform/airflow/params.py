"""The DAGs' trigger forms as Airflow sees them: `Params` built from a request model, and every DAG's
first step (`run_request`).

The request models and the field rules they share are the library's (`revenue_platform.forms` and
each feature's `request` module); this is where they meet Airflow. Each field's default,
description and bounds are stated once, in the model (tests/unit/project/test_form_params.py holds
the rendered forms against a snapshot).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

from revenue_platform.airflow.trigger_conf import refuse_unknown_conf

Request = TypeVar("Request")


def params_from_model(model: type[BaseModel]) -> dict[str, Any]:
    """The DAG `Params` of a form whose request model is `model`: one per field of its JSON schema
    (a field marked `SkipJsonSchema` is not on the form), with the field's default, description,
    type, pattern, enum and bounds; a bounded number states its bounds in its description."""
    from airflow.sdk import Param

    params = {}
    for name, schema in model.model_json_schema()["properties"].items():
        field = model.model_fields[name]
        schema = _nullable(schema)
        # Only a title the model sets (the form labels a field with its name otherwise, as the docs do).
        schema.pop("title", None)
        schema.pop("default", None)
        if schema.get("additionalProperties") is True:
            del schema["additionalProperties"]  # JSON schema's default for an object
        if field.title:
            schema["title"] = field.title
        # One line, however the model's docstring wraps it.
        description = " ".join(schema.pop("description", "").split())
        if "minimum" in schema and "maximum" in schema:
            description += f" {_readable(schema['minimum'])}..{_readable(schema['maximum'])}."
        default = to_jsonable_python(field.get_default(call_default_factory=True))
        params[name] = Param(default, description=description, **schema)
    return params


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """`X | None` as Airflow's form reads it: pydantic's `anyOf: [X, null]` as `type: ["null", X's type]`."""
    variants = schema.get("anyOf", [])
    if len(variants) != 2 or {"type": "null"} not in variants:
        return dict(schema)
    [other] = [variant for variant in variants if variant != {"type": "null"}]
    merged = {key: value for key, value in schema.items() if key != "anyOf"}
    return {**merged, **other, "type": ["null", other["type"]]}


def _readable(number: float) -> str:
    return f"{int(number):,}" if float(number).is_integer() else f"{number:g}"


def run_request(parse: Callable[[Mapping[str, Any]], Request], context: Mapping[str, Any]) -> Request:
    """A DAG's first step, the same in every DAG: refuse the run's conf keys the DAG does not declare
    (`trigger_conf.refuse_unknown_conf`), then read its params with the request model's parser
    (`SomeRequest.from_params`). Either refusal is a ConfigError naming the key or the field, before
    anything is registered, launched or written."""
    refuse_unknown_conf(context)
    return parse(context["params"])
