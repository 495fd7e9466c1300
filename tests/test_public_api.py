"""What `import kclient` offers."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.unit


def test_public_names_import_from_kclient():
    """The names a user reaches for are importable from `kclient` itself
    and are the objects of their home modules."""
    import kclient
    from kclient.client import serde
    from kclient.testing import BrokerProcess, ZooKeeperProcess

    for name in ("Encoder", "DefaultEncoder", "StringEncoder", "Decoder", "DefaultDecoder", "StringDecoder"):
        assert getattr(kclient, name) is getattr(serde, name)
        assert name in kclient.__all__
    assert kclient.BrokerProcess is BrokerProcess and kclient.ZooKeeperProcess is ZooKeeperProcess


def test_cluster_and_admin_names_import_from_kclient():
    """The cluster helper and the admin client (issue 11) are public names."""
    import kclient
    import kclient.testing
    from kclient.client import admin
    from kclient.config import AdminConfig
    from kclient.errors import InvalidReplicationFactorError, NotControllerError, TopicAlreadyExistsError
    from kclient.testing.cluster import Cluster

    assert kclient.Cluster is Cluster and kclient.testing.Cluster is Cluster and "Cluster" in kclient.testing.__all__
    assert kclient.AdminClient is admin.AdminClient and kclient.NewTopic is admin.NewTopic
    assert kclient.AdminConfig is AdminConfig
    assert (kclient.TopicAlreadyExistsError.code, kclient.InvalidReplicationFactorError.code, kclient.NotControllerError.code) == (36, 38, 41)
    assert kclient.TopicAlreadyExistsError is TopicAlreadyExistsError and kclient.NotControllerError is NotControllerError
    assert kclient.InvalidReplicationFactorError is InvalidReplicationFactorError
    for name in ("AdminClient", "AdminConfig", "Cluster", "NewTopic", "NotControllerError"):
        assert name in kclient.__all__


def test_statistics_types_import_from_kclient():
    """The snapshots ``statistics()`` returns are public names too."""
    import kclient
    from kclient.client.consumer import statistics
    from kclient.client.producer import producer

    assert kclient.ConsumerStatistics is statistics.ConsumerStatistics
    assert kclient.PartitionStatistics is statistics.PartitionStatistics
    assert kclient.ProducerStatistics is producer.ProducerStatistics
    for name in ("ConsumerStatistics", "PartitionStatistics", "ProducerStatistics"):
        assert name in kclient.__all__


def test_delivery_result_types_import_from_kclient():
    """The per-record delivery results (issue 14) are public names."""
    import kclient
    from kclient.client.producer import delivery

    assert kclient.RecordMetadata is delivery.RecordMetadata
    assert kclient.RecordFuture is delivery.RecordFuture
    for name in ("RecordFuture", "RecordMetadata"):
        assert name in kclient.__all__


def test_consumer_factory_imports_from_kclient():
    """``Consumer.create`` (Kafka 0.8's ``kafka.consumer.Consumer``) is a
    public name of its home module (issue 12); ``kclient.Consumer`` is the
    poll consumer since issue 27 and keeps ``create`` as that factory."""
    import kclient
    from kclient.client.consumer.group import connector
    from kclient.client.consumer.poll.consumer import Consumer

    assert kclient.Consumer is Consumer and "Consumer" in kclient.__all__
    assert callable(kclient.Consumer.create) and callable(connector.Consumer.create)
