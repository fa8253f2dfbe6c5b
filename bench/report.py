"""From a results document to ratios, target verdicts and a markdown summary (pure; unit-tested)."""

from __future__ import annotations

from typing import Any

from bench.stats import highest_sustained_rate, ratio

# The targets; the benchmark reports against them, tests never assert them.
REPLAY_TARGET_RATIO = 0.5
LIVE_TARGET_RATE = 20_000
LIVE_P99_SLACK_S = 3.0
STACK_MEMORY_TARGET_MIB = 6 * 1024


def live_phases(results: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """Live phases that produced a latency summary, by target rate."""
    found = {}
    for name, phase in (results.get("phases") or {}).items():
        if name.startswith("live_") and "latency" in phase:
            found[int(phase["target_per_s"])] = phase
    return dict(sorted(found.items()))


def derive(results: dict[str, Any]) -> dict[str, Any]:
    """Ratios to the raw ceiling, the highest sustained live rate, peak stack memory, target verdicts."""
    phases = results.get("phases") or {}
    ceiling = (phases.get("raw_ceiling") or {}).get("best", {}).get("records_per_s")
    replay = phases.get("replay") or {}
    live = live_phases(results)
    sustained = highest_sustained_rate({float(rate): bool(p.get("sustained")) for rate, p in live.items()})
    peaks = results.get("memory_peaks_mib") or {}
    peak_total = max((phase.get("total", 0.0) for phase in peaks.values()), default=None)
    derived: dict[str, Any] = {
        "raw_ceiling_records_per_s": ceiling,
        "replay_ratio_excl_start": ratio(replay.get("records_per_s_excl_start"), ceiling),
        "replay_ratio_incl_start": ratio(replay.get("records_per_s_incl_start"), ceiling),
        "highest_sustained_live_rate": sustained,
        "sustained_live_ratio": ratio(sustained, ceiling),
        "peak_stack_rss_mib": peak_total,
    }
    targets = []
    replay_ratio = derived["replay_ratio_excl_start"]
    targets.append(
        _target(
            "replay ≥ 0.5 x raw ceiling (excl. start)",
            replay_ratio,
            REPLAY_TARGET_RATIO,
            higher_is_better=True,
            unit="x",
        )
    )
    at_target = live.get(LIVE_TARGET_RATE)
    p99 = (at_target or {}).get("latency", {}).get("p99_s")
    trigger = (at_target or {}).get("trigger_interval_s")
    targets.append(
        _target(
            f"live p99 ≤ trigger + {LIVE_P99_SLACK_S:.0f} s at {LIVE_TARGET_RATE:,}/s",
            p99,
            (trigger + LIVE_P99_SLACK_S) if trigger is not None else None,
            higher_is_better=False,
            unit="s",
        )
    )
    targets.append(
        _target(
            "peak memory of the whole stack ≤ 6 GiB",
            peak_total,
            STACK_MEMORY_TARGET_MIB,
            higher_is_better=False,
            unit="MiB",
        )
    )
    derived["targets"] = targets
    return derived


def _target(
    name: str, value: float | None, limit: float | None, higher_is_better: bool, unit: str
) -> dict[str, Any]:
    if value is None or limit is None:
        return {"target": name, "value": value, "limit": limit, "met": None, "by": "not measured in this run"}
    met = value >= limit if higher_is_better else value <= limit
    gap = value - limit if higher_is_better else limit - value
    word = "met with" if met else "missed by"
    digits = 3 if unit == "x" else 2
    return {
        "target": name,
        "value": value,
        "limit": limit,
        "met": met,
        "by": f"{word} {abs(gap):,.{digits}f} {unit} ({abs(gap) / limit:.0%} of the limit)",
    }


def _fmt(value: Any, digits: int = 0) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def markdown(results: dict[str, Any], derived: dict[str, Any]) -> str:
    """A human summary of one run (also the source of the tables in docs/performance.md)."""
    phases = results.get("phases") or {}
    lines = [f"# Benchmark {results.get('stamp')} ({results.get('label')})", ""]
    machine = results.get("machine") or {}
    lines += [
        f"Machine: {machine.get('cpus')} CPUs, {_fmt(machine.get('memory_gib'), 1)} GiB RAM, "
        f"{machine.get('platform')}, Python {machine.get('python')}.",
        "",
    ]
    produce = (phases.get("produce") or {}).get("produce") or {}
    ceiling = (phases.get("raw_ceiling") or {}).get("best") or {}
    replay = phases.get("replay") or {}
    lines += [
        "## Throughput",
        "",
        "| measurement | records | seconds | records/s | ratio to ceiling |",
        "| --- | ---: | ---: | ---: | ---: |",
        f"| producer (generated files → Kafka) | {_fmt(produce.get('records'))} | "
        f"{_fmt(produce.get('seconds'), 1)} | {_fmt(produce.get('records_per_s'))} | |",
        f"| raw read ceiling (plain consumer; {_fmt(ceiling.get('mb_per_s'), 1)} MB/s) | "
        f"{_fmt(ceiling.get('records'))} | {_fmt(ceiling.get('seconds'), 1)} | "
        f"{_fmt(ceiling.get('records_per_s'))} | 1.00 |",
        f"| replay, excluding JVM/app start | {_fmt(replay.get('records'))} | "
        f"{_fmt(replay.get('processing_s'), 1)} | {_fmt(replay.get('records_per_s_excl_start'))} | "
        f"{_fmt(derived.get('replay_ratio_excl_start'), 3)} |",
        f"| replay, including JVM/app start | {_fmt(replay.get('records'))} | "
        f"{_fmt(replay.get('wall_incl_start_s'), 1)} | {_fmt(replay.get('records_per_s_incl_start'))} | "
        f"{_fmt(derived.get('replay_ratio_incl_start'), 3)} |",
        f"| highest sustained live rate | | | {_fmt(derived.get('highest_sustained_live_rate'))} | "
        f"{_fmt(derived.get('sustained_live_ratio'), 3)} |",
        "",
    ]
    live = live_phases(results)
    if live:
        lines += [
            "## Live latency (append time → window row visible in gold)",
            "",
            "| target/s | achieved/s | records | p50 s | p95 s | p99 s | max s | sustained | why |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
        ]
        for rate, phase in live.items():
            latency = phase["latency"]
            lines.append(
                f"| {rate:,} | {_fmt(phase['producer']['achieved_per_s'])} | {_fmt(latency.get('count'))} | "
                f"{_fmt(latency.get('p50_s'), 2)} | {_fmt(latency.get('p95_s'), 2)} | "
                f"{_fmt(latency.get('p99_s'), 2)} | {_fmt(latency.get('max_s'), 2)} | "
                f"{'yes' if phase.get('sustained') else 'no'} | {phase.get('verdict')} |"
            )
        lines.append("")
    reprocess = phases.get("reprocess") or {}
    quality = phases.get("quality") or {}
    dag_parse = phases.get("dag_parse") or {}
    lines += [
        "## Batch, quality, DAG parsing",
        "",
        f"- Reprocessing one hour ({_fmt((reprocess.get('report') or {}).get('records_read'))} records from "
        f"Kafka): {_fmt(reprocess.get('wall_incl_start_s'), 1)} s including JVM start "
        f"(exit {reprocess.get('exit_code')}).",
        f"- Quality suite on the replay's gold (one hour): {_fmt(quality.get('run_s'), 1)} s, "
        f"success={quality.get('success')}, failed checks={quality.get('failed_checks')}.",
        "- DAG parse, each file in a DagBag of its own in a fresh interpreter "
        f"(`import airflow` first took {_fmt(dag_parse.get('airflow_import_s'), 2)} s):",
        "",
        "| DAG file | parse s | DAGs | import errors |",
        "| --- | ---: | ---: | ---: |",
    ]
    for file, parsed in (dag_parse.get("files") or {}).items():
        lines.append(f"| {file} | {parsed['parse_s']:.3f} | {parsed['dags']} | {parsed['errors']} |")
    lines += [
        "",
        "## Peak memory (PSS) per phase (MiB)",
        "",
        "| phase | broker | spark | airflow | dag parse | bench | whole stack |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for phase_name, peak in (results.get("memory_peaks_mib") or {}).items():
        lines.append(
            f"| {phase_name} | {_fmt(peak.get('broker'))} | {_fmt(peak.get('spark'))} | "
            f"{_fmt(peak.get('airflow'))} | {_fmt(peak.get('dag_parse'))} | {_fmt(peak.get('bench'))} | "
            f"{_fmt(peak.get('total'))} |"
        )
    lines += ["", "## Load average (1 min) before → after each phase", ""]
    for name, phase in phases.items():
        if "load_before" in phase:
            lines.append(
                f"- {name}: {phase['load_before'][0]:.2f} → {phase['load_after'][0]:.2f} "
                f"({phase.get('wall_s', 0):.0f} s)"
            )
    lines += ["", "## Targets", "", "| target | value | limit | met | by how much |"]
    lines += ["| --- | ---: | ---: | --- | --- |"]
    for target in derived["targets"]:
        met = {True: "yes", False: "**no**", None: "—"}[target["met"]]
        digits = 3 if target["limit"] is not None and target["limit"] < 1 else 1
        value, limit = _fmt(target["value"], digits), _fmt(target["limit"], digits)
        lines.append(f"| {target['target']} | {value} | {limit} | {met} | {target['by']} |")
    errors = {**(results.get("phase_errors") or {})}
    if results.get("error"):
        errors["run"] = results["error"]
    if errors:
        lines += ["", "## Errors", ""] + [f"- {name}: {text}" for name, text in errors.items()]
    return "\n".join(lines) + "\n"
