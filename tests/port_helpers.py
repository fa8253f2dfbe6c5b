"""Free loopback ports for tests that start something on a port of their own."""

from __future__ import annotations

import socket


def free_loopback_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the kernel's pick; free until someone
    binds it)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
