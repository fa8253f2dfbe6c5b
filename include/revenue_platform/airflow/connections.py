"""Airflow's connection lookup for the platform (`revenue_platform.connections.read_connection`).

Through `BaseHook.get_connection`, the machinery every provider operator uses: an
`AIRFLOW_CONN_<ID>` variable in either form, the metadata DB, a secrets backend. The face's package
installs it when it is imported, so a task (whose DAG file imports the face) reads connections as
Airflow does, and the library below stays free of Airflow.
"""

from __future__ import annotations

from revenue_platform.connections import ConnectionFields


def airflow_connection(conn_id: str) -> ConnectionFields | None:
    """Connection `conn_id` as Airflow resolves it; None when Airflow knows no such connection."""
    from airflow.sdk import BaseHook
    from airflow.sdk.exceptions import AirflowNotFoundException

    try:
        connection = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return None
    extra = connection.extra_dejson
    return ConnectionFields(
        host=connection.host,
        port=connection.port,
        login=connection.login,
        password=connection.password,
        extra=extra if isinstance(extra, dict) else {},
    )
