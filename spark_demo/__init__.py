"""A PySpark pipeline over a Kafka-protocol broker (Weir, or Apache Kafka for comparison).

Written only against public Spark APIs and Spark's own Kafka connector
(`format("kafka")`); it never imports Weir. `python -m spark_demo --help` lists the
commands; docs/spark.md explains them.

- `session`: the SparkSession with the connector that matches PySpark's version;
- `events`: page-view events and the producer that writes them to a topic;
- `streaming`: the Structured Streaming job (event-time windows with a watermark,
  Kafka in, Kafka out, checkpointed);
- `batch`: the batch report over an offset or timestamp range of a topic;
- `pipeline`: the end-to-end run and its records/s figures.
"""
