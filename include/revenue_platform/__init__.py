"""Control-plane library of the orders revenue platform.

DAGs in dags/ stay thin and call into this package: the local stack (Kafka, Airflow),
topic provisioning, the deployment registry, naming and data-quality checks live here.
"""
