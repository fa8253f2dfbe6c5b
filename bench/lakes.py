"""The same phases with the lake on local disk and on an object store, side by side (`--lake both`).

Each lake gets a whole run of its own (its broker, its Spark drivers, one after the other, never at
the same time); this compares what the two runs measured: replay records/s, live latency per rate,
the whole stack's peak memory, and whether gold counted every order, with the ratio store / local
(below 1 for records/s means slower on the store; above 1 for seconds and MiB means more).
"""

from __future__ import annotations

from typing import Any

from bench.report import live_phases
from bench.stats import ratio


def _figures(results: dict[str, Any]) -> dict[str, float | None]:
    phases = results.get("phases") or {}
    replay = phases.get("replay") or {}
    figures: dict[str, float | None] = {
        "replay records/s (excl. start)": replay.get("records_per_s_excl_start"),
        "replay records/s (incl. start)": replay.get("records_per_s_incl_start"),
    }
    for rate, phase in live_phases(results).items():
        latency = phase.get("latency") or {}
        figures[f"live {rate:,}/s p50 (s)"] = latency.get("p50_s")
        figures[f"live {rate:,}/s p99 (s)"] = latency.get("p99_s")
    peaks = results.get("memory_peaks_mib") or {}
    figures["whole-stack peak (MiB)"] = max((p.get("total", 0.0) for p in peaks.values()), default=None)
    return figures


def _gold_counted_every_order(results: dict[str, Any]) -> bool | None:
    replay = (results.get("phases") or {}).get("replay") or {}
    gold = replay.get("gold") or {}
    if "orders_counted" not in gold:
        return None
    return bool(gold["orders_counted"] == replay.get("expected_orders_counted"))


def compare_lakes(local: dict[str, Any], store: dict[str, Any]) -> dict[str, Any]:
    """Each figure of both runs and its ratio store / local; the two runs' stamps and gold checks."""
    on_disk, on_store = _figures(local), _figures(store)
    rows = [
        {
            "figure": name,
            "local": on_disk.get(name),
            "object_store": on_store.get(name),
            "ratio": ratio(on_store.get(name), on_disk.get(name)),
        }
        for name in dict.fromkeys([*on_disk, *on_store])
    ]
    return {
        "runs": {"local": local.get("stamp"), "object_store": store.get("stamp")},
        "gold_counted_every_order": {
            "local": _gold_counted_every_order(local),
            "object_store": _gold_counted_every_order(store),
        },
        "figures": rows,
    }


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"
    return str(value)


def lakes_markdown(comparison: dict[str, Any]) -> str:
    runs, gold = comparison["runs"], comparison["gold_counted_every_order"]
    lines = [
        "# The lake on local disk and on the object store",
        "",
        f"Runs: local `{runs['local']}`, object store `{runs['object_store']}` (each its own .json/.md).",
        f"Gold counted every replayed order: local {_cell(gold['local'])}, "
        f"object store {_cell(gold['object_store'])}.",
        "",
        "| figure | local disk | object store | ratio store / local |",
        "| --- | ---: | ---: | ---: |",
    ]
    for row in comparison["figures"]:
        lines.append(
            f"| {row['figure']} | {_cell(row['local'])} | {_cell(row['object_store'])} | "
            f"{'—' if row['ratio'] is None else format(row['ratio'], '.2f')} |"
        )
    return "\n".join(lines) + "\n"
