"""`airflow standalone` whose scheduler and triggerer run without their log servers.

Airflow 3.3's scheduler and triggerer each start a log server ("serve-logs", ports 8793/8794) that
binds every interface: its host is hard-coded, with no setting. Both commands accept
`--skip-serve-logs`, but `airflow standalone` starts them with fixed command lines. On one machine
the log servers serve nothing the API server cannot read itself: task and trigger logs are files in
the shared local log folder, which the API server reads directly. So the local stack runs
standalone through this module, which adds `--skip-serve-logs` to those two components and changes
nothing else. `python -m revenue_platform.airflow.standalone` is what `LocalAirflow`
starts; its command line still contains "standalone", which is how the stack finds its process.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import cast

# The components of `airflow standalone` that would start a log server, and the flag that stops them.
COMPONENTS_WITH_LOG_SERVER = frozenset({"scheduler", "triggerer"})
SKIP_SERVE_LOGS = "--skip-serve-logs"


def component_command(name: str, command: list[str]) -> list[str]:
    """The `airflow` arguments standalone runs for component `name`, without a log server."""
    if name in COMPONENTS_WITH_LOG_SERVER and SKIP_SERVE_LOGS not in command:
        return [*command, SKIP_SERVE_LOGS]
    return list(command)


def main() -> None:
    from airflow.cli.commands import standalone_command

    airflow_sub_command = standalone_command.SubCommand

    class SubCommandWithoutLogServer(airflow_sub_command):  # type: ignore[misc, valid-type]
        def __init__(self, parent: object, name: str, command: list[str], env: dict[str, str]) -> None:
            super().__init__(parent, name, component_command(name, command), env)

    # StandaloneCommand.run() builds its components from this module-level name.
    standalone_command.SubCommand = SubCommandWithoutLogServer  # type: ignore[misc]
    from airflow.__main__ import main as airflow_main

    sys.argv = ["airflow", "standalone"]
    # Airflow's CLI entry point has no annotations; it reads sys.argv and returns nothing.
    cast("Callable[[], None]", airflow_main)()


if __name__ == "__main__":
    main()
