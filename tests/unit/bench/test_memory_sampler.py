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

    def memory_info(self) -> Any:
        return SimpleNamespace(rss=self.rss, vms=self.vms)

    def memory_full_info(self) -> Any:
        return SimpleNamespace(pss=self.pss)


def tree(*kids: FakeProcess) -> FakeProcess:
    root = FakeProcess(pss=2000, rss=2100, vms=9000)
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
