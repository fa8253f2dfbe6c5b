"""The bench's memory sampler: PSS of process trees, without counting a spawned child twice."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import psutil
import pytest

from bench import memory


@dataclass
class FakeProcess:
    pss: int
    rss: int
    vms: int
    process_name: str = "python"
    parent_process: FakeProcess | None = None
    kids: list[FakeProcess] = field(default_factory=list)

    def children(self, recursive: bool = False) -> list[FakeProcess]:
        found = []
        for kid in self.kids:
            found.append(kid)
            if recursive:
                found += kid.children(recursive=True)
        return found

    def parent(self) -> FakeProcess | None:
        return self.parent_process

    def name(self) -> str:
        return self.process_name

    def memory_info(self) -> Any:
        return SimpleNamespace(rss=self.rss, vms=self.vms)

    def memory_full_info(self) -> Any:
        return SimpleNamespace(pss=self.pss)


def tree(*kids: FakeProcess, root_name: str = "java") -> FakeProcess:
    root = FakeProcess(pss=2000, rss=2100, vms=9000, process_name=root_name)
    for kid in kids:
        kid.parent_process = root
        root.kids.append(kid)
    return root


def test_a_child_spawned_into_its_parents_address_space_is_not_counted_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Mid-spawn (vfork/posix_spawn before exec) the child reports the parent's whole memory.
    spawning = FakeProcess(pss=2000, rss=2100, vms=9000)
    python_driver = FakeProcess(pss=300, rss=350, vms=1200)
    root = tree(spawning, python_driver)
    monkeypatch.setattr(psutil, "Process", lambda pid: root)

    assert memory.tree_rss_bytes(1) == 2000 + 300


def test_children_with_their_own_memory_are_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    # A fork that has diverged from its parent (its shared pages are already split by PSS).
    worker = FakeProcess(pss=120, rss=2000, vms=9000)
    root = tree(worker, FakeProcess(pss=300, rss=350, vms=1200))
    monkeypatch.setattr(psutil, "Process", lambda pid: root)

    assert memory.tree_rss_bytes(1) == 2000 + 120 + 300
    assert memory.tree_rss_bytes(1, recursive=False) == 2000


def test_a_forked_child_of_a_non_jvm_parent_is_counted_even_when_its_sizes_match(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # fork() gives the child its own address space: PSS already splits the pages it shares.
    fresh_fork = FakeProcess(pss=1000, rss=2100, vms=9000)
    root = tree(fresh_fork, root_name="airflow")
    monkeypatch.setattr(psutil, "Process", lambda pid: root)

    assert memory.tree_rss_bytes(1) == 2000 + 1000
