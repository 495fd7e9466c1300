"""The client side's one Metadata parse (`kclient.client.cluster.parse_metadata`),
the leader lookup the consumers share (`ClusterMetadata.leaders`) and the
connection settings every client opens its connections with
(`kclient.net.settings.ConnectionSettings`). No broker: Metadata responses
built as messages, or as the codec decodes them."""

from __future__ import annotations

import pytest

from kclient.client.cluster import ClusterMetadata, parse_metadata
from kclient.net.settings import ConnectionSettings
from kclient.protocol.messages import METADATA
from kclient.protocol.messages.metadata import MetadataResponse, MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic
from kclient.security.settings import ClientSecurity

pytestmark = pytest.mark.unit


def _partition(index: int, leader: int, replicas: list[int]) -> MetadataResponsePartition:
    return MetadataResponsePartition(error_code=0, partition_index=index, leader_id=leader, leader_epoch=0, replica_nodes=replicas, isr_nodes=replicas)


BODY = MetadataResponse(
    brokers=[MetadataResponseBroker(node_id=1, host="h1", port=9091, rack=None), MetadataResponseBroker(node_id=2, host="h2", port=9092, rack="r2")],
    cluster_id="c1",
    controller_id=2,
    topics=[
        MetadataResponseTopic(error_code=0, name="events", is_internal=False, partitions=[_partition(1, 2, [2, 1]), _partition(0, 1, [1, 2]), _partition(2, -1, [1])]),
        MetadataResponseTopic(error_code=0, name="__consumer_offsets", is_internal=True, partitions=[_partition(0, 1, [1])]),
        MetadataResponseTopic(error_code=3, name="missing", is_internal=False, partitions=[]),
    ],
)


def test_parse_metadata_reads_brokers_partitions_errors_and_internal_topics():
    md = parse_metadata(BODY)
    assert isinstance(md, ClusterMetadata)
    assert sorted(md.brokers) == [1, 2] and md.brokers[2].rack == "r2"
    assert [p.partition for p in md.partitions_for("events")] == [0, 1, 2]  # sorted by id
    assert md.partitions_for("events")[1].replicas == (2, 1)
    assert md.topic_errors == {"events": 0, "__consumer_offsets": 0, "missing": 3}
    assert md.internal_topics == frozenset({"__consumer_offsets"})
    assert (md.cluster_id, md.controller_id) == ("c1", 2)
    assert md.partitions_for("nope") == ()


def test_parse_metadata_of_a_v0_answer_has_no_controller_and_no_internal_topics():
    v0 = METADATA.response(0)
    body = v0.decode_message(v0.encode(MetadataResponse(brokers=BODY.brokers[:1], topics=[MetadataResponseTopic(name="t", partitions=[_partition(0, 1, [1])])])))
    md = parse_metadata(body)
    assert md.controller_id == -1 and md.cluster_id is None and md.internal_topics == frozenset()
    assert md.leaders([("t", 0)]) == {("t", 0): (1, "h1", 9091)}


def test_leaders_leaves_out_partitions_without_a_known_leader():
    md = parse_metadata(BODY)
    keys = [("events", 0), ("events", 1), ("events", 2), ("events", 9), ("missing", 0)]
    assert md.leaders(keys) == {("events", 0): (1, "h1", 9091), ("events", 1): (2, "h2", 9092)}
    assert md.leaders([]) == {}


def test_connection_settings_build_a_tls_context_only_for_tls():
    plain = ConnectionSettings("c", 1000, 2000, ClientSecurity())
    assert plain.with_tls_context() is plain and plain.ssl_context is None and not plain.uses_ssl
    assert ConnectionSettings.with_timeout(500, client_id="tool") == ConnectionSettings("tool", 500, 500, None)
    tls = ConnectionSettings(security=ClientSecurity.from_properties({"security.protocol": "SSL"}))
    built = tls.with_tls_context()
    assert tls.uses_ssl and built.ssl_context is not None and built == tls  # the context is not part of equality
    assert built.with_tls_context() is built  # built once
