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
