"""How `make test` hands the suite's modules to its pytest-xdist workers: the longest first.

xdist's `--dist loadfile` sends each worker a whole module at a time, in the order its modules were
collected after sorting them by their number of tests (largest first). On this suite that order is
the wrong way round: the modules that take minutes (a real `make up` and demo, a cluster, drivers
killed and restarted) have a handful of tests each, so they were handed out last, and the run ended
with one worker still on the e2e module while the others idled (CI log, 2026-12-03: the e2e module
started at 79 % of the tests and took 14 minutes).

`LongestFirstScheduling` keeps loadfile's unit of work (one module on one worker, so its module
fixtures are built once) and changes two things:
- **the order**: the modules named in `LONGEST_MODULES` first, in that order (their times from CI's
  slowest-tests lists; the cluster suite last of them), then the other integration modules, then the
  rest, largest first as before; the short unit modules fill the gaps at the end;
- **the cluster suite is one unit**: every module under `tests/cluster/` goes to the same worker,
  because they share one cluster (fixed ports, `tests/cluster/conftest.py`), which two workers
  could not both start.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from xdist.scheduler.loadscope import LoadScopeScheduling

CLUSTER_SUITE = "tests/cluster"

LONGEST_MODULES = (
    # `make up`, the demo, a browser, a replay, `down`, the move to the cluster (~13-15 min).
    "tests/e2e/test_demo.py",
    # Several green deployments each (~4-9 min).
    "tests/integration/test_blue_green_replay.py",
    "tests/integration/test_one_query_engine_crashes.py",
    "tests/integration/test_deploy_supervise_stop.py",
    "tests/integration/test_blue_green_triggers.py",
    "tests/integration/test_reprocess_revenue.py",
    "tests/integration/test_stalled_driver_fencing.py",
    "tests/integration/test_one_dedupe_rule.py",
    # A cluster of 3 brokers and 2 Spark workers, four faults in one deployment (~6-7 min alone). Last of
    # these: beside the e2e module and a blue-green module at once (3 workers), it ran past the 15-minute
    # limit per test; after them it meets one module of the other worker, as every module does.
    CLUSTER_SUITE,
)


def scope_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its module, or the whole cluster suite."""
    module = nodeid.split("::", 1)[0]
    return CLUSTER_SUITE if module.startswith(CLUSTER_SUITE + "/") else module


def scope_rank(scope: str) -> tuple[int, int]:
    """Sort key: the longest modules by their place in LONGEST_MODULES, then integration, then the rest."""
    if scope in LONGEST_MODULES:
        return (0, LONGEST_MODULES.index(scope))
    if scope.startswith("tests/integration/"):
        return (1, 0)
    return (2, 0)


class LongestFirstQueue(OrderedDict[str, dict[str, bool]]):
    """xdist's queue of work units (scope -> its test ids), handing out the best-ranked unit first:
    by `scope_rank`, ties by number of tests (largest first, xdist's own order), then as queued.
    xdist takes the next unit with `popitem(last=False)`."""

    def popitem(self, last: bool = True) -> tuple[str, dict[str, bool]]:
        if last:
            return super().popitem(last=True)
        scope = min(self, key=lambda queued: (scope_rank(queued), -len(self[queued])))
        return scope, self.pop(scope)


class LongestFirstScheduling(LoadScopeScheduling):  # type: ignore[misc]  # xdist ships no types
    """loadfile, with the cluster suite as one unit and the longest units handed out first."""

    def __init__(self, config: Any, log: Any = None) -> None:
        super().__init__(config, log)
        if log is not None:
            self.log = log.loadfilesched
        self.workqueue = LongestFirstQueue()

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid)
