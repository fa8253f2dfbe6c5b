"""`airflow standalone` whose scheduler and triggerer run without their log servers.

Airflow 3.3's scheduler and triggerer each start a log server ("serve-logs", ports 8793/8794) that
binds every interface: its host is hard-coded, with no setting. Both commands accept
`--skip-serve-logs`, but `airflow standalone` starts them with fixed command lines. On one machine
the log servers serve nothing the API server cannot read itself: task and trigger logs are files in
the shared local log folder, which the API server reads directly. So the local stack runs
standalone through this module, which adds `--skip-serve-logs` to those two components and changes
nothing else. `python -m revenue_platform.airflow.standalone` is what `LocalAirflow`
starts; its command line still contains "standalone", which is how the stack finds its process.

It also starts the scheduler and the triggerer only once the API server answers. Standalone starts
all four at once, and a task the scheduler hands to its executor before the API server listens fails
at once, retries included ("Connection refused" to the Execution API, no line in the task's log): on a
busy machine the stack's first scheduled runs of `supervise_streaming_apps` failed so, 35 s into its
start.

And it stops on SIGINT, however it was started. `make down` stops standalone with SIGINT, which
standalone takes as Ctrl-C: it stops each component and waits for it. A process started from a
script in the background (`make up &`, nohup, many CI runners) inherits SIGINT ignored, and Python
then never raises KeyboardInterrupt: standalone ignored the signal, and `make down` waited out its
30-s grace before it SIGKILLed every component, the scheduler mid-loop included.
"""

from __future__ import annotations

import signal
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import cast

# The components of `airflow standalone` that would start a log server, and the flag that stops them.
COMPONENTS_WITH_LOG_SERVER = frozenset({"scheduler", "triggerer"})
SKIP_SERVE_LOGS = "--skip-serve-logs"
# The components that run tasks or triggers, which talk to the API server's Execution API.
COMPONENTS_AFTER_API_SERVER = frozenset({"scheduler", "triggerer"})
# How long they wait for it before starting anyway (the stack's own start gives up after 240 s and
# shows the log, which then says why the API server did not come up).
API_SERVER_WAIT_S = 240.0


def component_command(name: str, command: list[str]) -> list[str]:
    """The `airflow` arguments standalone runs for component `name`, without a log server."""
    if name in COMPONENTS_WITH_LOG_SERVER and SKIP_SERVE_LOGS not in command:
        return [*command, SKIP_SERVE_LOGS]
    return list(command)


def api_server_answers(base_url: str, timeout_s: float = 2.0) -> bool:
    """True when the API server at `base_url` answers HTTP at all (an error status counts: it serves)."""
    try:
        with urllib.request.urlopen(f"{base_url.rstrip('/')}/api/v2/monitor/health", timeout=timeout_s):
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False


def wait_for_api_server(
    base_url: str | None,
    timeout_s: float = API_SERVER_WAIT_S,
    poll_s: float = 0.5,
) -> bool:
    """Wait until the API server at `base_url` answers; False when it has not within `timeout_s` (or
    no URL is set: nothing to wait for)."""
    if not base_url:
        return False
    deadline = time.monotonic() + timeout_s
    while not api_server_answers(base_url):
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
    return True


def take_interrupts() -> None:
    """Raise KeyboardInterrupt on SIGINT, also when this process inherited the signal ignored."""
    signal.signal(signal.SIGINT, signal.default_int_handler)


def main() -> None:
    take_interrupts()
    from airflow.cli.commands import standalone_command

    airflow_sub_command = standalone_command.SubCommand

    class SubCommandWithoutLogServer(airflow_sub_command):  # type: ignore[misc, valid-type]
        def __init__(self, parent: object, name: str, command: list[str], env: dict[str, str]) -> None:
            super().__init__(parent, name, component_command(name, command), env)

        def run(self) -> None:
            if self.name in COMPONENTS_AFTER_API_SERVER:
                wait_for_api_server(self.env.get("AIRFLOW__API__BASE_URL"))
            super().run()

    # StandaloneCommand.run() builds its components from this module-level name.
    standalone_command.SubCommand = SubCommandWithoutLogServer  # type: ignore[misc]
    from airflow.__main__ import main as airflow_main

    sys.argv = ["airflow", "standalone"]
    # Airflow's CLI entry point has no annotations; it reads sys.argv and returns nothing.
    cast("Callable[[], None]", airflow_main)()


if __name__ == "__main__":
    main()
