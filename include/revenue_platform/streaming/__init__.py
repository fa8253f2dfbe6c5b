"""Control plane of long-running streaming apps: deploy, supervise and stop deployments.

`deploy`, `supervisor` and `stop` are what the DAGs call; `launcher` knows how a driver
is started, found and signalled. State lives in `revenue_platform.registry`.
"""
