"""Refuse a DAG run whose conf carries a key the DAG does not declare, before anything runs.

Airflow validates the declared params of a triggered run but silently keeps (and ignores)
any other key of its conf, so `{"deploymnet_id": "green"}` used to deploy the default
`blue`: a real second app. Every platform DAG calls `refuse_unknown_conf` first, in its
first (or validate) task (through `params.run_request`, or `replay_tasks` for the replay), so a
typo fails the run naming the key and the closest declared one, and nothing is registered,
launched or written.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from revenue_platform.errors import ConfigError


def unknown_conf_keys(conf: Mapping[str, Any] | None, declared: Iterable[str]) -> list[str]:
    """Keys of `conf` that are not declared params, sorted."""
    return sorted(set(conf or {}) - set(declared))


def check_conf_keys(conf: Mapping[str, Any] | None, declared: Iterable[str], dag_id: str) -> None:
    """ConfigError naming each unknown key (and the declared key it most resembles)."""
    names = sorted(declared)
    unknown = unknown_conf_keys(conf, names)
    if not unknown:
        return
    described = []
    for key in unknown:
        close = difflib.get_close_matches(str(key), names, n=1)
        described.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    raise ConfigError(
        f"{dag_id}: unknown conf key(s) {', '.join(described)}; nothing was done. This DAG accepts "
        f"{', '.join(names) or 'no keys'}: fix the key and trigger it again."
    )


def refuse_unknown_conf(context: Mapping[str, Any]) -> None:
    """Call first in a DAG's first task: fail on conf keys that are not the DAG's params.

    Reads the run's own conf (not `context["params"]`, which always holds every declared param
    and, under `dag.test()`, keys left over from earlier runs).
    """
    dag = context["dag"]
    conf = getattr(context.get("dag_run"), "conf", None)
    check_conf_keys(conf, dag.params.keys(), dag.dag_id)
