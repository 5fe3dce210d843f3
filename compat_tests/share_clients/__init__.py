"""Stock share-group (KIP-932) consumers driven from a script, recording what they saw.

Each client has a driver process: `python_consumer.py` (confluent-kafka's ShareConsumer),
`compat_tests/java/share-consumer` (kafka-clients' KafkaShareConsumer) and
`compat_tests/go/share-consumer` (franz-go's share consumer). All three read the same
JSON spec on stdin (`driver_spec.DriverSpec`) and print the same JSON-lines events on
stdout; `scenarios.py` runs them against any bootstrap and reduces what they printed to a
comparable outcome. See README.md for what Kafka 4.4 did.
"""
