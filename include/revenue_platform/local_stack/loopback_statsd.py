"""The StatsD client of the local stack's Airflow: its UDP socket is bound to loopback before it sends.

A plain `statsd.StatsClient` sends from an unbound socket, so the kernel gives it a port on every
interface, where anyone could send it datagrams (it never reads them, but the local stack listens on
nothing but loopback). Airflow loads this class through `[metrics] statsd_custom_client_path`
(`airflow_local.statsd_env`); it must be a `StatsClient`, and it sends to loopback only anyway.
"""

from __future__ import annotations

from statsd import StatsClient


class LoopbackStatsClient(StatsClient):  # type: ignore[misc]  # statsd ships no type hints
    """`statsd.StatsClient` whose socket is bound to 127.0.0.1 (::1 with ipv6) before its first send."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 8125,
        prefix: str | None = None,
        maxudpsize: int = 512,
        ipv6: bool = False,
    ) -> None:
        super().__init__(host, port, prefix, maxudpsize, ipv6)
        # A send to an address loopback cannot reach then fails in `_send`, which drops it as StatsD
        # drops every failed send: metrics never stop Airflow.
        self._sock.bind(("::1" if ipv6 else "127.0.0.1", 0))
