"""`make bench`: throughput, latency and memory of the platform on this machine (see docs/performance.md)."""
