"""Helpers for tests (yours and kclient's): run the bundled broker on a free
loopback port with a temporary log directory, and a real ZooKeeper server
(`ZooKeeperProcess`) for the ZooKeeper-based consumer.

Blocking, in a subprocess (works from any test framework):

```python
from kclient.testing import BrokerProcess

with BrokerProcess() as broker:
    producer = Producer({"metadata.broker.list": broker.bootstrap})
    ...
```

In-process, for trio code:

```python
async with run_broker() as broker:   # a started kclient.broker.Broker
    ... broker.port ...
```

Secured brokers (TLS from ``trustme`` certificates made at run time, SASL
PLAIN / SCRAM users): `kclient.testing.security`::

    certs = TestCertificates(tmp_path)
    with BrokerProcess(properties=security_properties(certs)) as broker:
        conf = client_properties("SSL", certs) | {"bootstrap.servers": broker.bootstrap_for("SSL")}

A real multi-broker cluster (ZooKeeper plus N brokers, SIGKILL and
restart on the same port, leaders and ISRs read from ZooKeeper):
`kclient.testing.Cluster`::

    with Cluster(brokers=3) as cluster:
        cluster.create_topic("events", partitions=3, replication_factor=3)
        cluster.kill(cluster.leader("events", 0))

Apache Kafka itself (4.x in KRaft mode, 3.9 in ZooKeeper mode), its
tools and Java clients, from Maven Central jars fetched on first use
(`kclient.testing.maven`): `kclient.testing.KafkaProcess`,
`kclient.testing.KafkaCluster`, `kclient.testing.kafka_tool`::

    with KafkaProcess() as kafka:
        kafka_tool("kafka-topics", "--bootstrap-server", kafka.bootstrap, "--list")

The package: `kclient.testing.process` holds the subprocess lifecycle both
servers share (start, wait until ready, stop with SIGTERM, kill with
SIGKILL, log capture, temporary directories); `kclient.testing.broker` the
bundled broker; `kclient.testing.zookeeper` ZooKeeper; `kclient.testing.cluster` the
cluster. Every public name
imports from ``kclient.testing`` itself.
"""

from kclient.testing.broker import BrokerProcess, run_broker
from kclient.testing.cluster import CLUSTER_DEFAULTS, Cluster
from kclient.testing.kafka import (
    KAFKA_RELEASES,
    KAFKA_TOOLS,
    KafkaCluster,
    KafkaProcess,
    kafka_classpath,
    kafka_tool,
    kafka_tool_command,
    kafka_version,
)
from kclient.testing.maven import JarFetchError, JavaUnavailableError, jars, java_unavailable_reason
from kclient.testing.process import BrokerProcessError, ServerProcess
from kclient.testing.security import (
    ALL_LISTENERS,
    ClientCertificate,
    TestCertificates,
    client_properties,
    kafka_python_options,
    security_properties,
)
from kclient.testing.zookeeper import (
    ZOOKEEPER_JAR_DIRS,
    ZooKeeperProcess,
    ZooKeeperUnavailableError,
    four_letter_word,
    zookeeper_classpath,
    zookeeper_unavailable_reason,
)

__all__ = [
    "ALL_LISTENERS",
    "JarFetchError",
    "JavaUnavailableError",
    "KAFKA_RELEASES",
    "KAFKA_TOOLS",
    "KafkaCluster",
    "KafkaProcess",
    "jars",
    "java_unavailable_reason",
    "kafka_classpath",
    "kafka_tool",
    "kafka_tool_command",
    "kafka_version",
    "BrokerProcess",
    "CLUSTER_DEFAULTS",
    "ClientCertificate",
    "Cluster",
    "TestCertificates",
    "client_properties",
    "kafka_python_options",
    "security_properties",
    "BrokerProcessError",
    "ServerProcess",
    "ZOOKEEPER_JAR_DIRS",
    "ZooKeeperProcess",
    "ZooKeeperUnavailableError",
    "four_letter_word",
    "run_broker",
    "zookeeper_classpath",
    "zookeeper_unavailable_reason",
]
