"""The shipped alert rules (include/monitoring/alert_rules.yml): promtool runs their tests on recorded
series, every rule has a case where it fires, a broken rule fails its test, and every metric a rule reads
is one the collector serves. promtool comes from `make promtool` (a dependency of `make test`)."""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from revenue_platform.local_stack.promtool import find_promtool
from revenue_platform.serving.metrics import maintenance_families, metric_families, source_family

MONITORING = Path(__file__).resolve().parents[3] / "include" / "monitoring"
RULES = MONITORING / "alert_rules.yml"
RULE_TESTS = MONITORING / "alert_rules_test.yml"
PROMETHEUS_CONFIG = MONITORING / "prometheus.yml"
OPERATIONS_DOC = MONITORING.parents[1] / "docs" / "operations.md"


@pytest.fixture(scope="module")
def promtool() -> Path:
    found = find_promtool()
    if found is None:
        pytest.fail("promtool is missing: run `make promtool` (make test does), or set PROMTOOL_PATH")
    return found


def _run(promtool: Path, *arguments: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool), *map(str, arguments)], capture_output=True, text=True, check=False, timeout=120
    )


def _rules() -> list[dict[str, str]]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def test_the_rules_are_valid_and_pass_their_tests(promtool: Path) -> None:
    checked = _run(promtool, "check", "rules", RULES)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = _run(promtool, "test", "rules", RULE_TESTS)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_the_example_prometheus_config_is_valid_and_loads_the_rules(promtool: Path) -> None:
    checked = _run(promtool, "check", "config", PROMETHEUS_CONFIG)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "alert_rules.yml" in checked.stdout + checked.stderr


def test_every_rule_has_a_case_where_it_fires() -> None:
    cases = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    firing = {
        check["alertname"] for case in cases for check in case["alert_rule_test"] if check.get("exp_alerts")
    }
    assert {rule["alert"] for rule in _rules()} == firing


def test_a_broken_rule_fails_its_test(promtool: Path, tmp_path: Path) -> None:
    # The heartbeat threshold ten times as lax: the stale driver in the recorded series no longer fires.
    rules = RULES.read_text()
    assert "revenue_stream_heartbeat_age_seconds < 60" in rules
    (tmp_path / RULES.name).write_text(
        rules.replace("heartbeat_age_seconds < 60", "heartbeat_age_seconds < 600")
    )
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)

    tested = _run(promtool, "test", "rules", tmp_path / RULE_TESTS.name)
    assert tested.returncode != 0
    assert "RevenueStreamDown" in tested.stdout + tested.stderr


def _served() -> set[str]:
    """Every series name the collector serves (a counter's samples carry `_total`, which
    prometheus_client strips from the family name)."""
    families = [source_family({}), *metric_families([], {}, datetime.now(UTC)), *maintenance_families(None)]
    return {family.name + ("_total" if family.type == "counter" else "") for family in families}


def test_every_metric_a_rule_reads_is_served() -> None:
    served = _served()
    read = {name for rule in _rules() for name in re.findall(r"\brevenue_[a-z_]+\b", rule["expr"])}
    assert read
    assert read <= served, sorted(read - served)


def test_every_served_metric_and_every_rule_is_documented() -> None:
    section = OPERATIONS_DOC.read_text().split("## Metrics and alerts", 1)[1]
    documented = set(re.findall(r"^\| `(revenue_[a-z_]+)`", section, re.M))
    assert documented == _served()
    assert {rule["alert"] for rule in _rules()} <= set(re.findall(r"^\| `(Revenue[A-Za-z]+)`", section, re.M))
