"""The statsd_exporter mapping (include/monitoring/statsd_mapping.yml) against the installed Airflow's
own metric registry: every metric whose StatsD name carries DAG or task ids becomes one labelled
Prometheus metric, its unlabelled twin is dropped, and no rule names a metric Airflow does not send.

statsd_exporter itself is not installed here (no Debian package), so its glob rules are applied the
way it documents them: `*` is one dot-free name segment, the first matching rule in file order wins,
`$n` in a label is the n-th `*`.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

MAPPING_FILE = Path(__file__).resolve().parents[3] / "include" / "monitoring" / "statsd_mapping.yml"
PREFIX = "airflow"
# Name segments that are ids of a DAG or task: what the mapping must turn into labels.
ID_VARIABLES = {"dag_id", "task_id"}
# Left out of the labels on purpose (a new value per job: unbounded series).
UNLABELLED_VARIABLES = {"job_id"}
PROMETHEUS_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
UNIT_SUFFIX = {"counter": "_total", "timer": "_seconds"}

Rule = dict[str, Any]


def _airflow_registry() -> list[dict[str, Any]]:
    """Airflow's metric registry (the source of its documented metric tables), read without importing it."""
    spec = importlib.util.find_spec("airflow")
    assert spec is not None, "Airflow is not installed"
    assert spec.submodule_search_locations, "airflow is not a package"
    registry = Path(spec.submodule_search_locations[0], "_shared/observability/metrics/metrics_template.yaml")
    metrics: list[dict[str, Any]] = yaml.safe_load(registry.read_text(encoding="utf-8"))["metrics"]
    return metrics


def _rules() -> list[Rule]:
    rules: list[Rule] = yaml.safe_load(MAPPING_FILE.read_text(encoding="utf-8"))["mappings"]
    return rules


def _glob(pattern: str) -> re.Pattern[str]:
    return re.compile("^" + r"([^.]+)".join(re.escape(part) for part in pattern.split("*")) + "$")


def _labels(rule: Rule, segments: tuple[str, ...]) -> dict[str, str]:
    """The rule's labels with `$n` / `${n}` replaced by the n-th segment its `*`s matched."""
    return {
        label: re.sub(r"\$\{?(\d+)\}?", lambda ref: segments[int(ref.group(1)) - 1], str(value))
        for label, value in (rule.get("labels") or {}).items()
    }


def _map(name: str, rules: list[Rule]) -> tuple[Rule, dict[str, str]] | None:
    """The rule statsd_exporter applies to the StatsD name `name`, with the labels it sets."""
    for rule in rules:
        if match := _glob(rule["match"]).match(name):
            return rule, _labels(rule, match.groups())
    return None


def _legacy(metric: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """The legacy StatsD name Airflow sends for `metric`, with a distinct sample value per variable."""
    values = {variable: f"x_{variable}" for variable in metric["name_variables"]}
    return f"{PREFIX}.{metric['legacy_name'].format(**values)}", values


def _metrics_with_ids() -> list[dict[str, Any]]:
    with_ids = [m for m in _airflow_registry() if ID_VARIABLES & set(m.get("name_variables") or [])]
    assert len(with_ids) >= 15, "Airflow's registry lost its per-DAG metrics: is this the right file?"
    return with_ids


@pytest.mark.parametrize("metric", _metrics_with_ids(), ids=lambda m: m["name"])
def test_a_metric_named_with_dag_or_task_ids_becomes_one_labelled_metric(metric: dict[str, Any]) -> None:
    legacy_name, values = _legacy(metric)
    mapped = _map(legacy_name, _rules())
    assert mapped is not None, f"no rule maps {legacy_name}"
    rule, labels = mapped
    assert rule.get("action") != "drop", f"{legacy_name} is dropped"
    expected = {variable: value for variable, value in values.items() if variable not in UNLABELLED_VARIABLES}
    # Every id is a label; a rule may add one from a fixed segment (dagrun.duration.<state>.<dag_id>).
    assert expected.items() <= labels.items(), labels
    assert rule["name"].endswith(UNIT_SUFFIX.get(metric["type"], "")), rule["name"]


@pytest.mark.parametrize("metric", _metrics_with_ids(), ids=lambda m: m["name"])
def test_the_unlabelled_twin_of_a_labelled_metric_is_dropped(metric: dict[str, Any]) -> None:
    mapped = _map(f"{PREFIX}.{metric['name']}", _rules())
    assert mapped is not None, f"{PREFIX}.{metric['name']} is kept without labels beside its labelled twin"
    assert mapped[0].get("action") == "drop"


def test_every_rule_matches_a_name_airflow_sends() -> None:
    registry = [m for m in _airflow_registry() if m.get("legacy_name", "-") != "-"]
    sent = [_legacy(m)[0] for m in registry] + [f"{PREFIX}.{m['name']}" for m in registry]
    rules = _rules()
    used = {id(mapped[0]) for name in sent if (mapped := _map(name, rules)) is not None}
    unused = [rule["match"] for rule in rules if id(rule) not in used]
    assert unused == [], f"rules for names Airflow does not send (renamed in an upgrade?): {unused}"


def test_each_metric_name_is_valid_and_has_one_label_set() -> None:
    label_sets: dict[str, set[str]] = {}
    for rule in _rules():
        if rule.get("action") == "drop":
            continue
        assert PROMETHEUS_NAME.match(rule["name"]), rule["name"]
        assert rule["name"].startswith(f"{PREFIX}_"), rule["name"]
        labels = set(rule.get("labels") or {})
        assert all(LABEL_NAME.match(label) for label in labels), labels
        # statsd_exporter refuses a name it already serves with other label names.
        assert label_sets.setdefault(rule["name"], labels) == labels, rule["name"]
