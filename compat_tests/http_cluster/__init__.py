"""The HTTP APIs and views (group views and exporter metrics, push, REST admin, REST
records, SQS) on one 3-broker cluster that the package's modules share (conftest.py)."""
