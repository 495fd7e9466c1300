"""kclient topics in Spark: a PySpark Python Data Source named `kclient`.

```python
from pyspark.sql import SparkSession
import kclient.spark

spark = SparkSession.builder.master("local[2]").getOrCreate()
kclient.spark.register(spark)
df = (spark.read.format("kclient")
      .option("kafka.bootstrap.servers", "127.0.0.1:9092")
      .option("subscribe", "flights")
      .load())
```

The options, the schema and their meanings are those of Spark's Kafka
source and sink ("Structured Streaming + Kafka Integration Guide"), so a job
written for `format("kafka")` runs with `format("kclient")`; the Spark page
of the docs lists every option and the differences.

Needs `pip install kclient[spark]` (PySpark 4.2+ and PyArrow) and Java 17+.
Spark's Python workers must import kclient, so this module points
`PYSPARK_PYTHON` (and `PYSPARK_DRIVER_PYTHON`) at the running interpreter
when they are unset; import it before the SparkSession is created, or use
`session()`. Nothing else in kclient imports pyspark.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

__all__ = ["FORMAT", "register", "session"]

#: The format name to pass to `spark.read.format` and friends.
FORMAT = "kclient"


def register(spark: SparkSession) -> None:
    """Register the `kclient` data source with a SparkSession.

    Args:
        spark: the session.

    Raises:
        ImportError: PySpark or PyArrow is not installed (install
            `kclient[spark]`).
    """
    try:
        from kclient.spark.source import KClientDataSource
    except ImportError as exc:
        raise ImportError(f"kclient.spark needs PySpark 4.2+ and PyArrow (pip install 'kclient[spark]'): {exc}") from exc

    spark.dataSource.register(KClientDataSource)


def session(
    app_name: str = "kclient",
    master: str = "local[2]",
    conf: Mapping[str, object] | None = None,
    jars: Iterable[str] = (),
) -> SparkSession:
    """A SparkSession with the `kclient` source registered, whose Python
    workers run this interpreter.

    Args:
        app_name: the Spark application name.
        master: the Spark master URL (`local[2]`: two worker threads here).
        conf: more Spark settings (`{"spark.sql.shuffle.partitions": 4}`).
        jars: local jar paths for the driver's and executors' class path
            (`spark.jars`), for example Spark's own Kafka connector
            (`kclient.testing.maven.jars("spark-kafka")`), so that
            `format("kafka")` runs beside `format("kclient")`. Spark reads
            them when its JVM starts: they take effect only for the first
            session of a Python process.

    Returns:
        The session (`getOrCreate`: an active session is reused).
    """
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name).master(master)
    builder = builder.config("spark.pyspark.python", sys.executable).config("spark.pyspark.driver.python", sys.executable)
    jar_list = [str(jar) for jar in jars]
    if jar_list:
        builder = builder.config("spark.jars", ",".join(jar_list))
    for key, value in (conf or {}).items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    register(spark)
    return spark
