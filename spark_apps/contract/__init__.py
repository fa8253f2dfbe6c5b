"""What the control plane and the data plane agree on, importable without pyspark: deployment names
(`naming`), the app's typed config (`config`, `kafka_config`, `config_rules`), the gold and order
contract (`records`), Kafka security, topic ownership, the lease (`fencing`), fault points and the
atomically written JSON files the control plane reads.
"""
