"""ByteBufferMessageSet.next_offset moves a SimpleConsumer past transaction
markers (control batches), which take an offset but hand out no message.
Found by tests/conformance/test_simple_consumer.py against Kafka's
transactional producer: a reader following each message's next_offset
fetched the marker's offset forever."""

from __future__ import annotations

import pytest

from kclient.client.consumer.message_set import ByteBufferMessageSet
from kclient.protocol.records import v2

pytestmark = pytest.mark.unit


def test_next_offset_passes_a_trailing_marker():
    buffer = v2.build_batch([(b"k", b"a", 1), (b"k", b"b", 1)], base_offset=5, producer_id=7, producer_epoch=0, is_transactional=True) + v2.build_batch(
        [(None, b"\x00\x00\x00\x01", 1)], base_offset=7, producer_id=7, producer_epoch=0, is_transactional=True, is_control=True
    )
    whole = ByteBufferMessageSet("t", 0, buffer, start_offset=5)
    assert [(m.offset, m.message.payload) for m in whole] == [(5, b"a"), (6, b"b")]
    assert whole.next_offset == 8
    only_marker = ByteBufferMessageSet("t", 0, buffer, start_offset=7)
    assert list(only_marker) == []
    assert only_marker.next_offset == 8


def test_next_offset_without_a_complete_batch():
    batch = v2.build_batch([(b"k", b"a" * 100, 1)], base_offset=3)
    assert ByteBufferMessageSet("t", 0, batch[:40], start_offset=3).next_offset == 3
    assert ByteBufferMessageSet("t", 0, b"", start_offset=9).next_offset == 9
    assert ByteBufferMessageSet("t", 0, b"", start_offset=9, error_code=1).next_offset == 9
