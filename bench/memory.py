"""Memory of the stack's process trees, sampled in the background and labelled by phase.

Memory is PSS (proportional set size): each page shared between processes is split among them.
Plain RSS summed over a tree counts shared pages once per process, which for Airflow (a
LocalExecutor forks 32 idle workers that share ~130 MiB each) overstated 1 GiB as 5.5 GiB.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


def shares_parent_memory(member: Any) -> bool:
    """Whether `member` is a JVM's child that still runs in the JVM's address space: spawned
    (posix_spawn, Java's way to start a process) and not yet exec'd. Its PSS is then the JVM's pages
    again, not a share of them. The Spark driver's JVM spawns such children for each Hadoop shell
    command on a local file system (`chmod`, `readlink`, `bash`); one caught mid-spawn doubled the
    driver's PSS in a sample. Only JVM parents: a fork()ed child (Airflow's workers) has
    its own address space, whose shared pages PSS already splits, even when its sizes match."""
    import psutil

    try:
        parent = member.parent()
        if parent is None or parent.name() != "java":
            return False
        mine, theirs = member.memory_info(), parent.memory_info()
    except psutil.Error:
        return False
    return bool(mine.rss == theirs.rss and mine.vms == theirs.vms)


def tree_rss_bytes(pid: int, recursive: bool = True) -> int:
    """PSS (RSS where PSS is unreadable) of `pid` plus (by default) its descendants; 0 when gone.
    A descendant still in its parent's address space (`shares_parent_memory`) adds nothing."""
    import psutil

    try:
        root = psutil.Process(pid)
        members = [root, *(root.children(recursive=True) if recursive else [])]
    except psutil.Error:
        return 0
    total = 0
    for member in members:
        if member is not root and shares_parent_memory(member):
            continue
        try:
            total += member.memory_full_info().pss
        except (psutil.Error, AttributeError):
            try:
                total += member.memory_info().rss
            except psutil.Error:
                continue
    return total


@dataclass
class Sample:
    at: float
    phase: str
    rss: dict[str, int]


@dataclass
class RssSampler:
    """Every `interval_s`, the RSS of each named process tree (broker, spark, airflow, bench)."""

    interval_s: float = 0.5
    roots: dict[str, tuple[int, bool]] = field(default_factory=dict)
    samples: list[Sample] = field(default_factory=list)
    phase: str = "setup"
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def watch(self, group: str, pid: int | None, recursive: bool = True) -> None:
        """Sample `pid`'s tree under `group` from now on (None stops watching the group)."""
        if pid is None:
            self.roots.pop(group, None)
        else:
            self.roots[group] = (pid, recursive)

    def start(self) -> None:
        self.watch("bench", os.getpid(), recursive=False)
        self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _loop(self) -> None:
        while not self._stop.is_set():
            rss = {
                group: tree_rss_bytes(pid, recursive) for group, (pid, recursive) in list(self.roots.items())
            }
            self.samples.append(Sample(time.time(), self.phase, rss))
            self._stop.wait(self.interval_s)


def peaks_by_phase(samples: Iterable[Sample]) -> dict[str, dict[str, float]]:
    """Per phase: peak MiB of each group and of their sum (the whole stack at one instant)."""
    peaks: dict[str, dict[str, float]] = {}
    for sample in samples:
        phase = peaks.setdefault(sample.phase, {})
        for group, rss in sample.rss.items():
            phase[group] = max(phase.get(group, 0.0), rss / 2**20)
        phase["total"] = max(phase.get("total", 0.0), sum(sample.rss.values()) / 2**20)
    return peaks


def samples_as_json(samples: Iterable[Sample]) -> list[dict[str, Any]]:
    return [
        {"at": s.at, "phase": s.phase, "rss_mib": {g: r / 2**20 for g, r in s.rss.items()}} for s in samples
    ]


def return_freed_memory() -> None:
    """Give the memory of the objects just dropped back to the OS (glibc keeps freed heap otherwise).

    A live phase's latency calculation holds a few million Python objects: what the next phase's
    samples count of the bench process should be its working memory, not their freed heap.
    """
    import contextlib
    import ctypes
    import ctypes.util
    import gc

    gc.collect()
    libc = ctypes.util.find_library("c")
    if libc is not None:
        with contextlib.suppress(AttributeError):  # not glibc
            ctypes.CDLL(libc).malloc_trim(0)
