"""What `import kclient` offers."""

from __future__ import annotations


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
