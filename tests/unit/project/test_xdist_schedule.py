"""`make test`'s order of work: the longest modules first, the cluster suite as one unit."""

from __future__ import annotations

from revenue_platform.paths import REPO_ROOT
from tests.xdist_schedule import CLUSTER_SUITE, LONGEST_MODULES, LongestFirstQueue, scope_of


def test_a_test_belongs_to_its_module_and_every_cluster_test_to_the_cluster_suite() -> None:
    assert scope_of("tests/unit/x/test_a.py::test_one[p-1]") == "tests/unit/x/test_a.py"
    assert scope_of("tests/integration/test_b.py::TestC::test_d") == "tests/integration/test_b.py"
    assert scope_of("tests/cluster/test_cluster_faults.py::test_kill") == CLUSTER_SUITE
    assert scope_of("tests/cluster/test_cluster_access.py::test_secret") == CLUSTER_SUITE
    assert scope_of("tests/clusterish/test_x.py::t") == "tests/clusterish/test_x.py"


def test_the_queue_hands_out_the_longest_modules_then_integration_then_the_largest_rest() -> None:
    queue = LongestFirstQueue()
    queued = {
        "tests/unit/test_many.py": 40,
        "tests/unit/test_few.py": 2,
        "tests/integration/test_plain.py": 1,
        "tests/e2e/test_demo.py": 8,
        "tests/dags/test_dag_integrity.py": 90,
        CLUSTER_SUITE: 2,
        "tests/integration/test_one_query_engine_crashes.py": 2,
    }
    for scope, count in queued.items():
        queue[scope] = {f"{scope}::t{i}": False for i in range(count)}

    handed_out = [queue.popitem(last=False)[0] for _ in range(len(queued))]

    assert handed_out == [
        "tests/e2e/test_demo.py",
        "tests/integration/test_one_query_engine_crashes.py",
        CLUSTER_SUITE,
        "tests/integration/test_plain.py",
        "tests/dags/test_dag_integrity.py",
        "tests/unit/test_many.py",
        "tests/unit/test_few.py",
    ]
    assert not queue


def test_every_module_named_longest_exists() -> None:
    # A renamed or merged module would silently lose its place at the front of the run.
    for scope in LONGEST_MODULES:
        assert (REPO_ROOT / scope).exists(), scope
