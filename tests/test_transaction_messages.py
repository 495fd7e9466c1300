"""The transaction APIs' messages (KIP-98, KIP-360, KIP-447, KIP-664) and
the control records of the v2 record format (the transaction markers).

For each API: hand-derived bytes of a request and a response at its lowest
and highest version (derived from Kafka's message JSON,
``/work/scratch/kjson/*.json``, by the protocol guide's encoding rules),
a round trip of every version, and a cross-check against kafka-python
3.0.12's own classes generated from Kafka's message JSON (an
implementation independent of kclient's schemas): our bytes decode there
to the same values and encode back to the same bytes, and a message built
there encodes to the bytes we write. The control records: exact bytes,
round trips, Kafka's checks on read, and kafka-python reading a marker
batch we build.
"""

from __future__ import annotations

import warnings
from typing import Any

import attrs
import pytest
from helpers.examples import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kclient.errors import CorruptRecordError
from kclient.protocol.messages import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    ALL_APIS,
    APIS,
    DESCRIBE_TRANSACTIONS,
    END_TXN,
    INIT_PRODUCER_ID,
    INIT_PRODUCER_ID_FULL,
    LIST_TRANSACTIONS,
    TXN_OFFSET_COMMIT,
    WRITE_TXN_MARKERS,
)
from kclient.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from kclient.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnPartitionResult,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    AddPartitionsToTxnResult,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTopicResult,
    AddPartitionsToTxnTransaction,
)
from kclient.protocol.messages.describe_transactions import (
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    DescribeTransactionsState,
    DescribeTransactionsTopicData,
)
from kclient.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from kclient.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from kclient.protocol.messages.list_transactions import ListTransactionsRequest, ListTransactionsResponse, ListTransactionsState
from kclient.protocol.messages.txn_offset_commit import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
    TxnOffsetCommitResponse,
    TxnOffsetCommitResponsePartition,
    TxnOffsetCommitResponseTopic,
)
from kclient.protocol.messages.write_txn_markers import (
    WritableTxnMarker,
    WritableTxnMarkerPartitionResult,
    WritableTxnMarkerResult,
    WritableTxnMarkerTopic,
    WritableTxnMarkerTopicResult,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kclient.protocol.records.control import (
    ABORT,
    COMMIT,
    ControlRecordKey,
    EndTransactionMarker,
    build_end_txn_marker_batch,
    decode_control_key,
    decode_end_txn_marker,
    encode_control_key,
    encode_end_txn_marker_value,
)
from kclient.protocol.records.v2 import iter_records, read_header, validate_batch
from kclient.protocol.schema import Api, Field

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.admin import transactions as kp_admin
    from kafka.protocol.producer import transaction as kp_producer
    from kafka.record.default_records import DefaultRecordBatch

pytestmark = pytest.mark.unit

#: The transaction APIs, with the widest version range kclient has.
TXN_APIS: tuple[Api, ...] = (
    INIT_PRODUCER_ID_FULL,
    ADD_PARTITIONS_TO_TXN,
    ADD_OFFSETS_TO_TXN,
    END_TXN,
    WRITE_TXN_MARKERS,
    TXN_OFFSET_COMMIT,
    DESCRIBE_TRANSACTIONS,
    LIST_TRANSACTIONS,
)

#: (api, version, "request" | "response") of every version of every API.
_CASES = [pytest.param(api, version, kind, id=f"{api.name}-v{version}-{kind}") for api in TXN_APIS for version in range(api.min_version, api.max_version + 1) for kind in ("request", "response")]

#: API name -> kafka-python's (request class, response class).
_PEER = {
    "InitProducerId": (kp_producer.InitProducerIdRequest, kp_producer.InitProducerIdResponse),
    "AddPartitionsToTxn": (kp_producer.AddPartitionsToTxnRequest, kp_producer.AddPartitionsToTxnResponse),
    "AddOffsetsToTxn": (kp_producer.AddOffsetsToTxnRequest, kp_producer.AddOffsetsToTxnResponse),
    "EndTxn": (kp_producer.EndTxnRequest, kp_producer.EndTxnResponse),
    "WriteTxnMarkers": (kp_producer.WriteTxnMarkersRequest, kp_producer.WriteTxnMarkersResponse),
    "TxnOffsetCommit": (kp_producer.TxnOffsetCommitRequest, kp_producer.TxnOffsetCommitResponse),
    "DescribeTransactions": (kp_admin.DescribeTransactionsRequest, kp_admin.DescribeTransactionsResponse),
    "ListTransactions": (kp_admin.ListTransactionsRequest, kp_admin.ListTransactionsResponse),
}


def _hex(text: str) -> bytes:
    return bytes.fromhex(text)


# ------------------------------------------------------------ registration


def test_the_apis_are_listed_and_init_producer_id_stays_capped_in_apis():
    for api in TXN_APIS:
        assert ALL_APIS[api.key] is api
    # APIS, the table `decode_request` and the broker's header parsing use,
    # keeps InitProducerId v0-1 (what the clients send today); the broker
    # advertises its own table (kclient.broker.handlers.SUPPORTED_VERSIONS).
    assert APIS[22] is INIT_PRODUCER_ID and INIT_PRODUCER_ID.max_version == 1


def test_versions_and_flexible_versions_are_kafkas():
    expected = {
        22: (0, 5, 2),
        24: (0, 5, 3),
        25: (0, 4, 3),
        26: (0, 5, 3),
        27: (0, 1, 1),
        28: (0, 4, 3),
        65: (0, 0, 0),
        66: (0, 1, 0),
    }
    assert {api.key: (api.min_version, api.max_version, api.flexible_from) for api in TXN_APIS} == expected


def test_the_capped_init_producer_id_encodes_as_the_full_one():
    body = InitProducerIdRequest(transactional_id="t", transaction_timeout_ms=1000)
    for version in (0, 1):
        assert INIT_PRODUCER_ID.request(version).encode(body) == INIT_PRODUCER_ID_FULL.request(version).encode(body)
    with pytest.raises(ValueError):
        INIT_PRODUCER_ID.request(2)


# ------------------------------------------------------------ exact bytes

#: (api, version, message, expected bytes as hex): a request and a response
#: of each API at its lowest and highest version. Non-flexible versions:
#: int16-length strings, int32-count arrays; flexible ones: compact strings
#: and arrays (uvarint length + 1) and an empty tagged-field section (00)
#: closing every struct.
_EXACT = [
    # InitProducerId: null transactional id (ffff), timeout 60000.
    (INIT_PRODUCER_ID_FULL, 0, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000), "ffff 0000ea60"),
    # v5: "tx", timeout, KIP-360's producer id 1000 and epoch 3, tags.
    (
        INIT_PRODUCER_ID_FULL,
        5,
        InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60_000, producer_id=1000, producer_epoch=3),
        "03 7478 0000ea60 00000000000003e8 0003 00",
    ),
    (INIT_PRODUCER_ID_FULL, 0, InitProducerIdResponse(producer_id=7, producer_epoch=1), "00000000 0000 0000000000000007 0001"),
    # v5: throttle 5, PRODUCER_FENCED (90), no producer.
    (INIT_PRODUCER_ID_FULL, 5, InitProducerIdResponse(throttle_time_ms=5, error_code=90), "00000005 005a ffffffffffffffff ffff 00"),
    # AddPartitionsToTxn v0: one transaction, topic "a" partitions 0 and 1.
    (
        ADD_PARTITIONS_TO_TXN,
        0,
        AddPartitionsToTxnRequest(
            v3_and_below_transactional_id="t",
            v3_and_below_producer_id=1,
            v3_and_below_producer_epoch=0,
            v3_and_below_topics=[AddPartitionsToTxnTopic(name="a", partitions=[0, 1])],
        ),
        "0001 74 0000000000000001 0000 00000001 0001 61 00000002 00000000 00000001",
    ),
    # v5: the brokers' batched form (KIP-890), verify only.
    (
        ADD_PARTITIONS_TO_TXN,
        5,
        AddPartitionsToTxnRequest(
            transactions=[
                AddPartitionsToTxnTransaction(
                    transactional_id="t",
                    producer_id=1,
                    producer_epoch=2,
                    verify_only=True,
                    topics=[AddPartitionsToTxnTopic(name="a", partitions=[3])],
                )
            ]
        ),
        "02 02 74 0000000000000001 0002 01 02 02 61 02 00000003 00 00 00",
    ),
    (
        ADD_PARTITIONS_TO_TXN,
        0,
        AddPartitionsToTxnResponse(results_by_topic_v3_and_below=[AddPartitionsToTxnTopicResult(name="a", results_by_partition=[AddPartitionsToTxnPartitionResult(partition_index=0)])]),
        "00000000 00000001 0001 61 00000001 00000000 0000",
    ),
    # v5: top-level error code, results per transaction; INVALID_TXN_STATE (48).
    (
        ADD_PARTITIONS_TO_TXN,
        5,
        AddPartitionsToTxnResponse(
            results_by_transaction=[
                AddPartitionsToTxnResult(
                    transactional_id="t",
                    topic_results=[
                        AddPartitionsToTxnTopicResult(
                            name="a",
                            results_by_partition=[AddPartitionsToTxnPartitionResult(partition_index=3, partition_error_code=48)],
                        )
                    ],
                )
            ]
        ),
        "00000000 0000 02 02 74 02 02 61 02 00000003 0030 00 00 00 00",
    ),
    # AddOffsetsToTxn.
    (
        ADD_OFFSETS_TO_TXN,
        0,
        AddOffsetsToTxnRequest(transactional_id="t", producer_id=1, producer_epoch=0, group_id="g"),
        "0001 74 0000000000000001 0000 0001 67",
    ),
    (
        ADD_OFFSETS_TO_TXN,
        4,
        AddOffsetsToTxnRequest(transactional_id="t", producer_id=1, producer_epoch=0, group_id="g"),
        "02 74 0000000000000001 0000 02 67 00",
    ),
    (ADD_OFFSETS_TO_TXN, 0, AddOffsetsToTxnResponse(), "00000000 0000"),
    # CONCURRENT_TRANSACTIONS (51).
    (ADD_OFFSETS_TO_TXN, 4, AddOffsetsToTxnResponse(throttle_time_ms=1, error_code=51), "00000001 0033 00"),
    # EndTxn: commit, then abort.
    (END_TXN, 0, EndTxnRequest(transactional_id="t", producer_id=1, producer_epoch=2, committed=True), "0001 74 0000000000000001 0002 01"),
    (END_TXN, 5, EndTxnRequest(transactional_id="t", producer_id=1, producer_epoch=2, committed=False), "02 74 0000000000000001 0002 00 00"),
    # v0 has no producer id and epoch (v5+).
    (END_TXN, 0, EndTxnResponse(producer_id=7, producer_epoch=8), "00000000 0000"),
    (END_TXN, 5, EndTxnResponse(producer_id=7, producer_epoch=8), "00000000 0000 0000000000000007 0008 00"),
    # WriteTxnMarkers: a COMMIT of producer 1 epoch 2 for a-0, coordinator epoch 5.
    (
        WRITE_TXN_MARKERS,
        0,
        WriteTxnMarkersRequest(
            markers=[
                WritableTxnMarker(
                    producer_id=1,
                    producer_epoch=2,
                    transaction_result=True,
                    topics=[WritableTxnMarkerTopic(name="a", partition_indexes=[0])],
                    coordinator_epoch=5,
                )
            ]
        ),
        "00000001 0000000000000001 0002 01 00000001 0001 61 00000001 00000000 00000005",
    ),
    (
        WRITE_TXN_MARKERS,
        1,
        WriteTxnMarkersRequest(
            markers=[
                WritableTxnMarker(
                    producer_id=1,
                    producer_epoch=2,
                    transaction_result=True,
                    topics=[WritableTxnMarkerTopic(name="a", partition_indexes=[0])],
                    coordinator_epoch=5,
                )
            ]
        ),
        "02 0000000000000001 0002 01 02 02 61 02 00000000 00 00000005 00 00",
    ),
    (
        WRITE_TXN_MARKERS,
        0,
        WriteTxnMarkersResponse(
            markers=[
                WritableTxnMarkerResult(
                    producer_id=1,
                    topics=[WritableTxnMarkerTopicResult(name="a", partitions=[WritableTxnMarkerPartitionResult(partition_index=0)])],
                )
            ]
        ),
        "00000001 0000000000000001 00000001 0001 61 00000001 00000000 0000",
    ),
    (
        WRITE_TXN_MARKERS,
        1,
        WriteTxnMarkersResponse(
            markers=[
                WritableTxnMarkerResult(
                    producer_id=1,
                    topics=[WritableTxnMarkerTopicResult(name="a", partitions=[WritableTxnMarkerPartitionResult(partition_index=0)])],
                )
            ]
        ),
        "02 0000000000000001 02 02 61 02 00000000 0000 00 00 00 00",
    ),
    # TxnOffsetCommit v0: offset 42 of a-0, null metadata.
    (
        TXN_OFFSET_COMMIT,
        0,
        TxnOffsetCommitRequest(
            transactional_id="t",
            group_id="g",
            producer_id=1,
            producer_epoch=0,
            topics=[TxnOffsetCommitRequestTopic(name="a", partitions=[TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=42, committed_leader_epoch=4)])],
        ),
        "0001 74 0001 67 0000000000000001 0000 00000001 0001 61 00000001 00000000 000000000000002a ffff",
    ),
    # v4: KIP-447's generation 3, member "m", no instance id (00: null);
    # the leader epoch (v2+) and empty metadata (01).
    (
        TXN_OFFSET_COMMIT,
        4,
        TxnOffsetCommitRequest(
            transactional_id="t",
            group_id="g",
            producer_id=1,
            producer_epoch=0,
            generation_id=3,
            member_id="m",
            topics=[
                TxnOffsetCommitRequestTopic(
                    name="a",
                    partitions=[TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=42, committed_leader_epoch=4, committed_metadata="")],
                )
            ],
        ),
        "02 74 02 67 0000000000000001 0000 00000003 02 6d 00 02 02 61 02 00000000 000000000000002a 00000004 01 00 00 00",
    ),
    (
        TXN_OFFSET_COMMIT,
        0,
        TxnOffsetCommitResponse(topics=[TxnOffsetCommitResponseTopic(name="a", partitions=[TxnOffsetCommitResponsePartition(partition_index=0)])]),
        "00000000 00000001 0001 61 00000001 00000000 0000",
    ),
    # ILLEGAL_GENERATION (22).
    (
        TXN_OFFSET_COMMIT,
        4,
        TxnOffsetCommitResponse(topics=[TxnOffsetCommitResponseTopic(name="a", partitions=[TxnOffsetCommitResponsePartition(partition_index=0, error_code=22)])]),
        "00000000 02 02 61 02 00000000 0016 00 00 00",
    ),
    # DescribeTransactions (flexible from v0).
    (DESCRIBE_TRANSACTIONS, 0, DescribeTransactionsRequest(transactional_ids=["t"]), "02 02 74 00"),
    (
        DESCRIBE_TRANSACTIONS,
        0,
        DescribeTransactionsResponse(
            transaction_states=[
                DescribeTransactionsState(
                    transactional_id="t",
                    transaction_state="Ongoing",
                    transaction_timeout_ms=60_000,
                    transaction_start_time_ms=1000,
                    producer_id=1,
                    producer_epoch=0,
                    topics=[DescribeTransactionsTopicData(topic="a", partitions=[0])],
                )
            ]
        ),
        "00000000 02 0000 02 74 08 4f6e676f696e67 0000ea60 00000000000003e8 0000000000000001 0000 02 02 61 02 00000000 00 00 00",
    ),
    # ListTransactions: state and producer id filters; v1 the duration filter.
    (
        LIST_TRANSACTIONS,
        0,
        ListTransactionsRequest(state_filters=["Ongoing"], producer_id_filters=[1]),
        "02 08 4f6e676f696e67 02 0000000000000001 00",
    ),
    (LIST_TRANSACTIONS, 1, ListTransactionsRequest(duration_filter=1000), "01 01 00000000000003e8 00"),
    (
        LIST_TRANSACTIONS,
        0,
        ListTransactionsResponse(
            unknown_state_filters=["Bad"],
            transaction_states=[ListTransactionsState(transactional_id="t", producer_id=1, transaction_state="Ongoing")],
        ),
        "00000000 0000 02 04 426164 02 02 74 0000000000000001 08 4f6e676f696e67 00 00",
    ),
    (LIST_TRANSACTIONS, 1, ListTransactionsResponse(throttle_time_ms=2), "00000002 0000 01 01 00"),
]


def _kind(api: Api, message: Any) -> str:
    return "request" if type(message) is api.request_type else "response"


@pytest.mark.parametrize(
    ("api", "version", "message", "expected"),
    [pytest.param(*case, id=f"{case[0].name}-v{case[1]}-{_kind(case[0], case[2])}") for case in _EXACT],
)
def test_exact_bytes(api, version, message, expected):
    codec = getattr(api, _kind(api, message))(version)
    encoded = codec.encode(message)
    assert encoded == _hex(expected)
    decoded = codec.decode_message(encoded)
    assert codec.encode(decoded) == encoded
    # kafka-python's classes read the same bytes to the same values.
    peer_cls = _PEER[api.name][0 if _kind(api, message) == "request" else 1]
    assert peer_cls.decode(encoded, version=version).to_dict(json=False) == codec.decode(encoded)


def test_every_api_and_version_has_exact_bytes_at_its_ends():
    covered = {(api.key, version, _kind(api, message)) for api, version, message, _ in _EXACT}
    for api in TXN_APIS:
        for version in {api.min_version, api.max_version}:
            assert (api.key, version, "request") in covered and (api.key, version, "response") in covered, (api.name, version)


def test_a_message_keeps_the_fields_of_other_versions_at_kafkas_defaults():
    decoded = INIT_PRODUCER_ID_FULL.request(2).decode_message(_hex("03 7478 0000ea60 00"))
    assert decoded == InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1)
    decoded = TXN_OFFSET_COMMIT.request(2).decode_message(TXN_OFFSET_COMMIT.request(2).encode(TxnOffsetCommitRequest(generation_id=9)))
    assert decoded.generation_id == -1 and decoded.member_id == "" and decoded.group_instance_id is None
    assert ListTransactionsRequest().duration_filter == -1
    assert EndTxnResponse().producer_id == -1 and EndTxnResponse().producer_epoch == -1


# ------------------------------------------------------------ round trips


def _value(t: Any, nullable: bool) -> st.SearchStrategy[Any]:
    """Values of wire type ``t`` (None only where Kafka allows it)."""
    scalars: dict[str, st.SearchStrategy[Any]] = {
        "int8": st.integers(-(1 << 7), (1 << 7) - 1),
        "int16": st.integers(-(1 << 15), (1 << 15) - 1),
        "int32": st.integers(-(1 << 31), (1 << 31) - 1),
        "int64": st.integers(-(1 << 63), (1 << 63) - 1),
        "bool": st.booleans(),
        "string": st.text(max_size=8),
        "nullable_string": st.text(max_size=8) | st.none(),
    }
    if isinstance(t, str):
        return scalars[t]
    items = st.lists(_value(t[1], False), max_size=3)  # ("array", primitive)
    return items | st.none() if nullable else items


def _field_strategies(fields: tuple[Field, ...]) -> dict[str, st.SearchStrategy[Any]]:
    out = {}
    for f in fields:
        if isinstance(f.type, str) or f.type[0] == "array":
            out[f.name] = _value(f.type, f.nullable)
        else:
            items = st.lists(st.builds(f.struct_type, **_field_strategies(tuple(f.type))), max_size=3)
            out[f.name] = items | st.none() if f.nullable else items
    return out


def _messages(api: Api, kind: str) -> st.SearchStrategy[Any]:
    cls = api.request_type if kind == "request" else api.response_type
    fields = api.request_fields if kind == "request" else api.response_fields
    return st.builds(cls, **_field_strategies(tuple(fields)))


def _only_version(message: Any, version: int, fields: tuple[Field, ...]) -> Any:
    """``message`` with the fields absent from ``version`` at their defaults
    (what a decoder of that version builds)."""
    changes = {}
    for f in fields:
        attribute = attrs.fields_dict(type(message))[f.name]
        if not f.present_in(version):
            default = attribute.default
            changes[f.name] = default.factory() if isinstance(default, attrs.Factory) else default
        elif not isinstance(f.type, str) and f.type[0] != "array" and getattr(message, f.name) is not None:
            changes[f.name] = [_only_version(item, version, tuple(f.type)) for item in getattr(message, f.name)]
    return attrs.evolve(message, **changes)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@pytest.mark.parametrize(("api", "version", "kind"), _CASES)
@given(data=st.data())
def test_round_trip_of_every_version(api, version, kind, data):
    codec = getattr(api, kind)(version)
    fields = tuple(api.request_fields if kind == "request" else api.response_fields)
    message = data.draw(_messages(api, kind))
    encoded = codec.encode(message)
    decoded = codec.decode_message(encoded)
    assert decoded == _only_version(message, version, fields)
    assert codec.encode(decoded) == encoded


# ------------------------------------------------------------ kafka-python


def _peer_build(peer_cls: type, values: dict[str, Any], **kwargs: Any) -> Any:
    """A kafka-python message (or nested struct) from a dict of values, the
    dict codec's form."""
    args = dict(kwargs)
    for name, field in peer_cls._struct.fields.items():
        if name not in values:
            continue
        value = values[name]
        if field.is_struct_array() and value is not None:
            value = [_peer_build(field.data_class, item) for item in value]
        args[name] = value
    return peer_cls(**args)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@pytest.mark.parametrize(("api", "version", "kind"), _CASES)
@given(data=st.data())
def test_kafka_python_reads_and_writes_the_same_bytes(api, version, kind, data):
    codec = getattr(api, kind)(version)
    peer_cls = _PEER[api.name][0 if kind == "request" else 1]
    encoded = codec.encode(data.draw(_messages(api, kind)))
    values = codec.decode(encoded)
    # Our bytes, read by kafka-python: the same values.
    assert peer_cls.decode(encoded, version=version).to_dict(json=False) == values
    # A message built by kafka-python from the values: the same bytes.
    assert _peer_build(peer_cls, values, version=version).encode(version=version) == encoded


# ------------------------------------------------------------ control records


def test_control_record_key_bytes():
    assert encode_control_key(ABORT) == _hex("0000 0000")
    assert encode_control_key(COMMIT) == _hex("0000 0001")
    assert decode_control_key(_hex("0000 0001")) == ControlRecordKey(version=0, type=COMMIT)
    assert decode_control_key(_hex("0000 0000")).is_transaction_marker
    # Another of Kafka's types (KRaft's), and a newer version read by its
    # version-0 fields, as Kafka does.
    assert not decode_control_key(_hex("0000 0003")).is_transaction_marker
    assert decode_control_key(_hex("0001 0001 ffff")) == ControlRecordKey(version=1, type=COMMIT)


def test_end_transaction_marker_value_bytes():
    assert encode_end_txn_marker_value(5) == _hex("0000 00000005")
    assert encode_end_txn_marker_value(-1) == _hex("0000 ffffffff")
    marker = decode_end_txn_marker(_hex("0000 0000"), _hex("0000 0000002a"))
    assert marker == EndTransactionMarker(control_type=ABORT, coordinator_epoch=42) and not marker.committed
    assert decode_end_txn_marker(_hex("0000 0001"), _hex("0001 00000007 99")).committed


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        (None, "0000 00000000", "null"),
        ("0000 00", "0000 00000000", "3 bytes"),
        ("ffff 0001", "0000 00000000", "version -1"),
        ("0000 0002", "0000 00000000", "no transaction marker"),
        ("0000 0001", None, "null"),
        ("0000 0001", "0000 000000", "5 bytes"),
        ("0000 0001", "fffe 00000000", "version -2"),
    ],
)
def test_a_bad_control_record_is_refused(key, value, match):
    with pytest.raises(CorruptRecordError, match=match):
        decode_end_txn_marker(None if key is None else _hex(key), None if value is None else _hex(value))


def test_encoding_refuses_values_out_of_range():
    with pytest.raises(ValueError, match="control record type"):
        encode_control_key(1 << 15)
    with pytest.raises(ValueError, match="coordinator epoch"):
        encode_end_txn_marker_value(1 << 31)


@given(st.sampled_from([ABORT, COMMIT]), st.integers(-(1 << 31), (1 << 31) - 1))
def test_marker_round_trip(control_type, coordinator_epoch):
    key = encode_control_key(control_type)
    value = encode_end_txn_marker_value(coordinator_epoch)
    assert len(key) == 4 and len(value) == 6
    assert decode_end_txn_marker(key, value) == EndTransactionMarker(control_type, coordinator_epoch)


def test_a_marker_batch_as_kafka_builds_it():
    batch = build_end_txn_marker_batch(EndTransactionMarker(COMMIT, 7), producer_id=5, producer_epoch=1, timestamp_ms=1000, base_offset=10, partition_leader_epoch=3)
    validate_batch(batch)
    header = read_header(batch)
    assert header.is_control and header.is_transactional and header.codec == 0 and not header.is_log_append_time
    assert (header.base_offset, header.records_count, header.last_offset_delta) == (10, 1, 0)
    assert (header.producer_id, header.producer_epoch, header.base_sequence, header.partition_leader_epoch) == (5, 1, -1, 3)
    (record,) = iter_records(batch)
    assert (record.offset, record.timestamp, record.key, record.value, record.headers) == (10, 1000, _hex("00000001"), _hex("000000000007"), ())
    # The record after the 61-byte header: length 16, attributes 0, deltas
    # 0 and 0, key (4 bytes), value (6 bytes), no headers (varints zigzag).
    assert batch[61:] == _hex("20 00 00 00 08 00000001 0c 000000000007 00")
    assert decode_end_txn_marker(record.key, record.value) == EndTransactionMarker(COMMIT, 7)
    # kafka-python reads it as a control batch holding a commit marker.
    theirs = DefaultRecordBatch(batch)
    assert theirs.is_control_batch and theirs.is_transactional and theirs.producer_id == 5
    (control,) = list(theirs)
    assert control.commit and not control.abort and control.version == 0 and control.offset == 10
