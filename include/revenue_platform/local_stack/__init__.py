"""The embedded local stack: a KRaft Kafka broker and Airflow standalone on one machine.

Everything here starts real processes from artifacts the project installs itself
(Maven Central jars, PyPI packages); `python -m revenue_platform.local_stack --help`
is the command-line entry point the Makefile uses.
"""
