"""The HTTP APIs (push, REST admin, REST records, SQS) on one shared 3-broker cluster."""
