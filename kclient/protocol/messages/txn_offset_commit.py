"""TxnOffsetCommit (key 28), versions 0-4. Source:
``TxnOffsetCommitRequest.json`` / ``TxnOffsetCommitResponse.json``; see
KIP-98, KIP-447 and the Kafka protocol guide
(https://kafka.apache.org/protocol#The_Messages_TxnOffsetCommit).

A transactional producer commits a consumer group's offsets inside its
transaction, to the group coordinator (after AddOffsetsToTxn). The offsets
become visible to the group only when the transaction commits.

v1 is v0 (responses sent before throttling); v2+ carries the committed
leader epoch (KIP-320); v3+ the consumer's group metadata, its generation
id, member id and group instance id, so that the group coordinator fences
a zombie member's commit (KIP-447: ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
FENCED_INSTANCE_ID); v3 is the first flexible version (KIP-482); v4 allows
TRANSACTION_ABORTABLE (KIP-890)."""

from typing import Annotated

import attrs

from kclient.protocol.schema import Api
from kclient.protocol.types import Int16, Int32, Int64, NullableString, String, Versions


@attrs.define(kw_only=True)
class TxnOffsetCommitRequestPartition:
    """An entry of ``TxnOffsetCommitRequestTopic.partitions``."""

    partition_index: Int32 = 0
    committed_offset: Int64 = 0
    #: The leader epoch of the last consumed record, -1 if unknown (v2+).
    committed_leader_epoch: Annotated[Int32, Versions("2+")] = -1
    committed_metadata: NullableString = None


@attrs.define(kw_only=True)
class TxnOffsetCommitRequestTopic:
    """An entry of ``TxnOffsetCommitRequest.topics``."""

    name: String = ""
    partitions: list[TxnOffsetCommitRequestPartition] = attrs.Factory(list)


@attrs.define(kw_only=True)
class TxnOffsetCommitRequest:
    """The TxnOffsetCommit request body, versions 0-4 (``TxnOffsetCommitRequest.json``)."""

    transactional_id: String = ""
    group_id: String = ""
    producer_id: Int64 = 0
    producer_epoch: Int16 = 0
    #: The consumer's generation (v3+, KIP-447), -1 if unknown.
    generation_id: Annotated[Int32, Versions("3+")] = -1
    #: The consumer's member id (v3+, KIP-447).
    member_id: Annotated[String, Versions("3+")] = ""
    #: The static member's group instance id (v3+, KIP-447), or None.
    group_instance_id: Annotated[NullableString, Versions("3+")] = None
    topics: list[TxnOffsetCommitRequestTopic] = attrs.Factory(list)


@attrs.define(kw_only=True)
class TxnOffsetCommitResponsePartition:
    """An entry of ``TxnOffsetCommitResponseTopic.partitions``."""

    partition_index: Int32 = 0
    error_code: Int16 = 0


@attrs.define(kw_only=True)
class TxnOffsetCommitResponseTopic:
    """An entry of ``TxnOffsetCommitResponse.topics``."""

    name: String = ""
    partitions: list[TxnOffsetCommitResponsePartition] = attrs.Factory(list)


@attrs.define(kw_only=True)
class TxnOffsetCommitResponse:
    """The TxnOffsetCommit response body, versions 0-4 (``TxnOffsetCommitResponse.json``)."""

    throttle_time_ms: Int32 = 0
    topics: list[TxnOffsetCommitResponseTopic] = attrs.Factory(list)


TXN_OFFSET_COMMIT = Api(
    key=28,
    name="TxnOffsetCommit",
    min_version=0,
    max_version=4,
    flexible_from=3,
    request_type=TxnOffsetCommitRequest,
    response_type=TxnOffsetCommitResponse,
)
