"""How the stack's own JVMs compile their hot code: `STACK_SERVICES_JIT`.

The stack's service JVMs (the Kafka brokers and the Kafka tools' one-shot runs, the object store, the
cluster's Spark master and workers and the executors they start) run on the JDK's tiered JIT by
default: C1 first, then C2 for the hot loops of a service that runs for days. A test session's
services live for minutes and serve a few thousand records, and on 2 cores C2's compiler threads take
CPU from the tests. `STACK_SERVICES_JIT=c1` keeps them on the first tier (`-XX:TieredStopAtLevel=1`):
over a whole CI run the brokers used a third less CPU and the cluster's executors 42 % less; a store
under half an hour of traffic did not gain (docs/testing.md, "The stack's services on the JIT's first
tier"). The drivers have their own setting (`SPARK_DRIVER_JIT`, spark_apps.engine.session).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from revenue_platform.errors import ConfigError

SERVICES_JIT_ENV = "STACK_SERVICES_JIT"
_SERVICES_JIT_OPTIONS: Mapping[str, tuple[str, ...]] = {
    "tiered": (),
    "c1": ("-XX:TieredStopAtLevel=1",),
}


def service_jit_options(environ: Mapping[str, str] | None = None) -> list[str]:
    """JVM options for `STACK_SERVICES_JIT` (unset or `tiered`: none); another value is refused, named,
    before any service starts."""
    env = os.environ if environ is None else environ
    value = env.get(SERVICES_JIT_ENV, "").strip() or "tiered"
    if value not in _SERVICES_JIT_OPTIONS:
        expected = sorted(_SERVICES_JIT_OPTIONS)
        raise ConfigError(f"{SERVICES_JIT_ENV}={value!r}: expected one of {expected} (unset means tiered)")
    return list(_SERVICES_JIT_OPTIONS[value])


def with_service_jit(existing_options: str | None) -> str:
    """A JVM-options variable's value (`SPARK_DAEMON_JAVA_OPTS`, `JAVA_TOOL_OPTIONS`) with the services'
    JIT options added after the user's own."""
    return " ".join(filter(None, [existing_options or "", *service_jit_options()]))
