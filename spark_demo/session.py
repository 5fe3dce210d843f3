"""The SparkSession every job of the demo runs in, with Spark's Kafka connector.

The connector (`org.apache.spark:spark-sql-kafka-0-10_2.13`) is compiled against one
exact Spark release: its classes extend Spark-internal APIs (DataSource V2 readers,
the streaming offset log) that change between minor and even patch releases, so its
version must equal PySpark's. The coordinate is therefore derived from the running
PySpark, and pyproject pins PySpark to a release whose connector Maven Central serves.

Spark resolves the connector and its dependencies (kafka-clients among them) with
Ivy at session start (`spark.jars.packages`) into `spark.jars.ivy`: the first start
downloads, later starts read the Ivy cache only.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyspark
from pyspark.sql import SparkSession

SCALA_BINARY_VERSION = "2.13"
REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_IVY_DIR = REPO_ROOT / ".cache" / "ivy"
IVY_DIR_ENV = "SPARK_DEMO_IVY_DIR"


def connector_coordinate() -> str:
    """Spark's Kafka connector at exactly the running PySpark's version."""
    return f"org.apache.spark:spark-sql-kafka-0-10_{SCALA_BINARY_VERSION}:{pyspark.__version__}"


def ivy_dir() -> Path:
    """Where Ivy caches the connector's jars (SPARK_DEMO_IVY_DIR, else .cache/ivy)."""
    return Path(os.environ.get(IVY_DIR_ENV) or DEFAULT_IVY_DIR)


def build_session(
    app_name: str = "spark-demo",
    *,
    master: str = "local[2]",
    shuffle_partitions: int = 2,
    extra_config: dict[str, str] | None = None,
) -> SparkSession:
    """A local SparkSession with the Kafka connector on its classpath.

    Small on purpose: `shuffle_partitions` state-store partitions (Spark's default of
    200 makes every micro-batch of a stateful query run 200 tasks), no UI, UTC.
    """
    builder = (
        SparkSession.builder.appName(app_name)
        .master(master)
        .config("spark.jars.packages", connector_coordinate())
        .config("spark.jars.ivy", str(ivy_dir()))
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        # Loopback only: the driver never needs to be reachable from elsewhere.
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
    )
    for key, value in (extra_config or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session
