"""PNG plots of one run: throughput against the ceiling, live latency percentiles, RSS over time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.report import LIVE_P99_TARGET_S, REPLAY_TARGET_RECORDS_PER_S, live_phases


def write_plots(results: dict[str, Any], derived: dict[str, Any], out_dir: Path, stamp: str) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    written: list[Path] = []
    phases = results.get("phases") or {}

    bars = {
        "raw read\nceiling": derived.get("raw_ceiling_records_per_s"),
        "work-equivalent\nceiling": derived.get("work_ceiling_records_per_s"),
        "replay\n(excl. start)": (phases.get("replay") or {}).get("records_per_s_excl_start"),
        "replay\n(incl. start)": (phases.get("replay") or {}).get("records_per_s_incl_start"),
        "sustained\nlive": derived.get("highest_sustained_live_rate"),
    }
    colors = dict(zip(bars, ["#555", "#999", "#2a7", "#7c9", "#27a"], strict=True))
    figure, axes = plt.subplots(figsize=(8, 4))
    shown = {label: float(value) for label, value in bars.items() if value}
    axes.bar(list(shown), list(shown.values()), color=[colors[label] for label in shown])
    axes.axhline(REPLAY_TARGET_RECORDS_PER_S, color="#c33", linestyle=":", linewidth=1)
    # The ceilings are two to three orders of magnitude above the replay: only a log axis shows both.
    axes.set_yscale("log")
    axes.set_ylabel("records / s (log)")
    axes.set_title(f"Throughput vs the ceilings (dotted: replay target {REPLAY_TARGET_RECORDS_PER_S:,}/s)")
    written.append(_save(figure, out_dir / f"{stamp}-throughput.png"))

    live = live_phases(results)
    if live:
        figure, axes = plt.subplots(figsize=(7, 4))
        rates = list(live)
        width = 0.25
        for offset, key in enumerate(("p50_s", "p95_s", "p99_s")):
            positions = [index + (offset - 1) * width for index in range(len(rates))]
            values = [live[rate]["latency"].get(key, 0) for rate in rates]
            axes.bar(positions, values, width, label=key.removesuffix("_s"))
        trigger = next(iter(live.values()))["trigger_interval_s"]
        axes.axhline(LIVE_P99_TARGET_S, color="#c33", linestyle=":", label="p99 target")
        axes.set_xticks(range(len(rates)), [f"{rate:,}/s" for rate in rates])
        axes.set_ylabel("seconds, append → visible in gold")
        axes.set_title(f"Live latency per producer rate (trigger {trigger} s)")
        axes.legend()
        written.append(_save(figure, out_dir / f"{stamp}-latency.png"))

    samples = results.get("memory_samples") or []
    if samples:
        figure, axes = plt.subplots(figsize=(9, 4))
        began = samples[0]["at"]
        groups = sorted({group for sample in samples for group in sample["rss_mib"]})
        times = [(sample["at"] - began) / 60 for sample in samples]
        for group in groups:
            axes.plot(times, [s["rss_mib"].get(group, 0) for s in samples], label=group, linewidth=1)
        axes.plot(times, [sum(s["rss_mib"].values()) for s in samples], label="total", color="black")
        previous = None
        for time_min, sample in zip(times, samples, strict=True):
            if sample["phase"] != previous and sample["phase"] not in ("between", "teardown"):
                axes.axvline(time_min, color="#bbb", linewidth=0.5)
                axes.text(time_min, axes.get_ylim()[1] * 0.02, sample["phase"], rotation=90, fontsize=7)
            previous = sample["phase"]
        axes.set_xlabel("minutes since start")
        axes.set_ylabel("MiB")
        axes.set_title("Memory per process tree")
        axes.legend(loc="upper left", fontsize=8)
        written.append(_save(figure, out_dir / f"{stamp}-memory.png"))
    return written


def _save(figure: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    import matplotlib.pyplot as plt

    plt.close(figure)
    return path
