"""Serving the live deployment's gold output to users: the revenue query API and its auth.

Everything here is read-only and Spark-free: gold is read with `deltalake` + `pyarrow`, the live
deployment is resolved through `revenue_platform.registry`, and the FastAPI apps are mounted on
the Airflow API server by thin plugins in `plugins/`. Heavy libraries are imported inside
functions so that Airflow can import the plugins cheaply in every process.
"""
