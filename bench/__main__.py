"""`python -m bench [--quick]`: run the benchmark, write bench/results/<stamp>.{json,md} and PNG plots.

`make bench` runs the full variant (2,000,000 orders; live 5k/20k/50k orders/s for 60 s each),
`make bench-quick` a small one that finishes in a few minutes. Both start their own broker on
ports 23092/23093 with state in .local/bench and stop it at the end, even on failure.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.lakes import compare_lakes, lakes_markdown
from bench.memory import peaks_by_phase, samples_as_json
from bench.outputs import machine, write_documents
from bench.plots import write_plots
from bench.report import derive, markdown
from bench.run import LAKES, OPTIONAL_PHASES, BenchSettings
from bench.runner import execute

QUICK = BenchSettings(
    orders=100_000,
    chunk_orders=25_000,
    live_rates=(1_000, 5_000),
    live_seconds=20.0,
    live_warmup_seconds=10.0,
    window_heavy_orders=50_000,
    label="quick",
    with_airflow=False,
)


def argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="the small variant (a few minutes)")
    parser.add_argument("--orders", type=int, help="orders in the replay topic")
    parser.add_argument(
        "--rates", help="comma-separated live rates, e.g. 5000,20000,50000 ('' = no live phases)"
    )
    parser.add_argument("--live-seconds", type=float, help="seconds per live rate")
    parser.add_argument("--seed", type=int)
    parser.add_argument(
        "--airflow",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="run Airflow standalone during the bench (default: on for the full run, off for --quick)",
    )
    parser.add_argument(
        "--warmup-seconds",
        type=float,
        help="seconds each live phase produces before its measured window (default 30; quick 10)",
    )
    parser.add_argument(
        "--phases",
        help=f"comma-separated phases to run, of {', '.join(OPTIONAL_PHASES)} (default: all but "
        "month_two; the broker, production and the raw read always run; history needs replay)",
    )
    parser.add_argument("--window-heavy-orders", type=int, help="orders of the window-heavy replay")
    parser.add_argument(
        "--dedupe-horizon",
        help="the apps' dedupe.horizon, e.g. '2 seconds' (default: the shipped config's); see BenchSettings",
    )
    parser.add_argument(
        "--kafka-time",
        choices=("append", "event"),
        help="the replay topic's Kafka timestamps: the broker's append time (default) or each order's "
        "place on the event-time line (history spread over the hour); see BenchSettings",
    )
    parser.add_argument(
        "--lake",
        choices=(*LAKES, "both"),
        default="local",
        help="where the apps' lake is: local disk (default), an S3 server the run starts (object-store), "
        "or both, one whole run each, then a comparison with ratios (<stamp>-lakes.{json,md})",
    )
    parser.add_argument(
        "--app-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an app config override for every app the bench starts (repeatable), e.g. "
        "kafka.max_offsets_per_trigger=100000",
    )
    parser.add_argument(
        "--month-two-days",
        help="comma-separated days of history the month_two phase seeds, one deployment each (default 1,30)",
    )
    parser.add_argument(
        "--month-two-rate", type=int, help="orders/s of the month_two live runs (default 5000)"
    )
    parser.add_argument(
        "--soak-minutes", type=float, help="minutes the soak_live phase produces (default 120)"
    )
    parser.add_argument("--soak-rate", type=int, help="orders/s of the soak_live phase (default 2000)")
    parser.add_argument(
        "--soak-slice-minutes", type=float, help="the soak_live phase reports per slice of this (default 10)"
    )
    parser.add_argument(
        "--soak-maintain-minutes",
        type=float,
        help="minutes between the soak_live phase's lake maintenance runs (default 20)",
    )
    parser.add_argument(
        "--soak-gold-retention-hours",
        type=float,
        help="gold's retention of superseded files in the soak's maintenance (default: the shipped 24)",
    )
    parser.add_argument("--render", type=Path, help="only re-render the .md and PNGs of a results JSON")
    return parser


def with_environment(settings: BenchSettings) -> BenchSettings:
    """`settings` with the broker's ports and the state folder from BENCH_* variables, when set."""
    return replace(
        settings,
        kafka_port=int(os.environ.get("BENCH_KAFKA_PORT", settings.kafka_port)),
        controller_port=int(os.environ.get("BENCH_KAFKA_CONTROLLER_PORT", settings.controller_port)),
        state_dir=Path(os.environ.get("BENCH_STATE_DIR", settings.state_dir)),
    )


def with_arguments(settings: BenchSettings, args: argparse.Namespace) -> BenchSettings:
    """`settings` with every option given on the command line (`--phases` is checked by the caller)."""
    if args.orders:
        settings = replace(settings, orders=args.orders)
    if args.rates is not None:  # "" skips the live phases
        settings = replace(settings, live_rates=tuple(int(r) for r in args.rates.split(",") if r.strip()))
    if args.live_seconds:
        settings = replace(settings, live_seconds=args.live_seconds)
    if args.warmup_seconds is not None:
        settings = replace(settings, live_warmup_seconds=args.warmup_seconds)
    if args.airflow is not None:
        settings = replace(settings, with_airflow=args.airflow)
    if args.seed is not None:
        settings = replace(settings, seed=args.seed)
    if args.window_heavy_orders:
        settings = replace(settings, window_heavy_orders=args.window_heavy_orders)
    if args.dedupe_horizon:
        settings = replace(settings, dedupe_horizon=args.dedupe_horizon)
    if args.kafka_time:
        settings = replace(settings, kafka_time=args.kafka_time)
    settings = _with_soak(_with_month_two(settings, args), args)
    if args.app_set:
        from spark_apps.contract.config import AppConfigError, parse_override

        try:  # the app's own rule for `--set`, checked before anything starts
            keys = [parse_override(item)[0] for item in args.app_set]
        except AppConfigError as error:
            raise SystemExit(f"--app-set takes KEY=VALUE: {error}") from None
        # The value as given: the app reads it as YAML itself.
        values = [item.partition("=")[2] for item in args.app_set]
        settings = replace(settings, app_settings=tuple(zip(keys, values, strict=True)))
    return settings


def _with_month_two(settings: BenchSettings, args: argparse.Namespace) -> BenchSettings:
    if args.month_two_days:
        settings = replace(settings, month_two_days=tuple(int(d) for d in args.month_two_days.split(",")))
    if args.month_two_rate:
        settings = replace(settings, month_two_rate=args.month_two_rate)
    return settings


def _with_soak(settings: BenchSettings, args: argparse.Namespace) -> BenchSettings:
    for option, field, scale in (
        ("soak_minutes", "soak_seconds", 60),
        ("soak_slice_minutes", "soak_slice_seconds", 60),
        ("soak_maintain_minutes", "soak_maintain_every_s", 60),
        ("soak_rate", "soak_rate", 1),
        ("soak_gold_retention_hours", "soak_gold_retention_hours", 1),
    ):
        value = getattr(args, option)
        if value is not None:
            if value <= 0:
                raise SystemExit(f"--{option.replace('_', '-')} must be positive, not {value}")
            settings = replace(settings, **{field: value * scale})
    return settings


def selected_phases(text: str) -> tuple[str, ...]:
    """The phases named in `--phases`; ValueError naming those that are not OPTIONAL_PHASES."""
    phases = tuple(p.strip() for p in text.split(",") if p.strip())
    unknown = sorted(set(phases) - set(OPTIONAL_PHASES))
    if unknown:
        raise ValueError(f"unknown phases {unknown}; choose from {', '.join(OPTIONAL_PHASES)}")
    return phases


def render(path: Path) -> int:
    """Re-derive a results JSON's figures and rewrite its .md and PNGs (no benchmark runs)."""
    results = json.loads(path.read_text())
    derived = derive(results)
    results["derived"] = derived
    path.write_text(json.dumps(results, indent=2, default=str))
    path.with_suffix(".md").write_text(markdown(results, derived))
    write_plots(results, derived, path.parent, results["stamp"])
    print(path.with_suffix(".md").read_text())
    return 0


def write_results(results: dict[str, Any], out: Path) -> None:
    """The run's JSON (with the machine, memory peaks and derived figures), its .md summary and plots."""
    results["machine"] = machine()
    samples = results.pop("memory_samples")
    results["memory_peaks_mib"] = peaks_by_phase(samples)
    results["memory_samples"] = samples_as_json(samples)
    derived = derive(results)
    results["derived"] = derived
    stamp = results["stamp"]
    summary = markdown(results, derived)
    path = write_documents(results, summary, out, stamp)
    plots = write_plots(results, derived, out, stamp)
    print(summary)
    print(f"[bench] wrote {path}, {path.with_suffix('.md')} and {len(plots)} plots")


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser()
    args = parser.parse_args(argv)
    if args.render:
        return render(args.render)
    settings = with_arguments(with_environment(QUICK if args.quick else BenchSettings()), args)
    if args.phases:
        try:
            settings = replace(settings, phases=selected_phases(args.phases))
        except ValueError as error:
            parser.error(str(error))
    # SIGTERM (e.g. a CI timeout) unwinds like Ctrl-C, so the broker, Airflow and Spark get stopped.
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(143))
    lakes = LAKES if args.lake == "both" else (args.lake,)
    runs = {}
    for lake in lakes:
        results = execute(replace(settings, lake=lake))
        write_results(results, settings.results_dir)
        runs[lake] = results
    if len(runs) == 2:
        comparison = compare_lakes(runs["local"], runs["object-store"])
        path = write_documents(
            comparison, lakes_markdown(comparison), settings.results_dir, f"{runs['local']['stamp']}-lakes"
        )
        print(lakes_markdown(comparison))
        print(f"[bench] wrote {path} and {path.with_suffix('.md')}")
    failed = any(results.get("error") or results.get("phase_errors") for results in runs.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
