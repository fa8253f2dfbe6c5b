"""Every Airflow setting the platform passes as `AIRFLOW__SECTION__KEY` is one this Airflow reads.

Airflow ignores an environment variable that names no option, silently: the local stack once set
`AIRFLOW__SCHEDULER__MIN_FILE_PROCESS_INTERVAL`, which Airflow 3 moved to `[dag_processor]` without
keeping the old name, so its DAG processor went on parsing every unchanged DAG file every 30 s
(~15 % of a core on an idle stack). The options are read from Airflow's own configuration
description; the platform's own section (`[revenue_platform]`, read by its code) is the exception.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from revenue_platform.local_stack.airflow_local import (
    DAG_REPARSE_INTERVAL_S,
    AirflowLocalSettings,
    airflow_environment,
)
from tests.unit.project.test_docker_compose import environment, load_compose

PLATFORM_SECTION = "revenue_platform"


def _unknown_options(names: list[str]) -> list[str]:
    from airflow.configuration import conf

    known = {
        (section, option)
        for section, described in conf.configuration_description.items()
        for option in described.get("options", {})
    }
    unknown = []
    for name in names:
        section, _, option = name.removeprefix("AIRFLOW__").lower().partition("__")
        if section != PLATFORM_SECTION and (section, option) not in known:
            unknown.append(name)
    return unknown


def _settings(env: dict[str, str]) -> list[str]:
    # `AIRFLOW__SECTION__KEY`; AIRFLOW_HOME, AIRFLOW_CONN_* and AIRFLOW_VAR_* are not options.
    return sorted(name for name in env if name.startswith("AIRFLOW__") and name.count("__") >= 2)


def test_the_local_stack_sets_only_options_airflow_reads(tmp_path: Path) -> None:
    names = _settings(airflow_environment(AirflowLocalSettings(home=tmp_path, port=18123)))
    assert "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL" in names
    assert _unknown_options(names) == []


def test_the_compose_stack_sets_only_options_airflow_reads() -> None:
    services = load_compose()["services"]
    names = sorted({name for service in services.values() for name in _settings(environment(service))})
    assert "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL" in names
    assert _unknown_options(names) == []


@pytest.mark.parametrize(
    "name", ["AIRFLOW__SCHEDULER__MIN_FILE_PROCESS_INTERVAL", "AIRFLOW__CORE__NO_SUCH_OPTION"]
)
def test_a_setting_airflow_would_ignore_is_named(name: str) -> None:
    assert _unknown_options([name]) == [name]


def test_an_unchanged_dag_file_is_parsed_again_every_five_minutes(tmp_path: Path) -> None:
    env = airflow_environment(AirflowLocalSettings(home=tmp_path, port=18123))
    assert env["AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL"] == str(DAG_REPARSE_INTERVAL_S) == "300"
