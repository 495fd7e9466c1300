"""Unit checks of the pre-login limits (issue 30, holes 1-2): the request
memory's unauthenticated share (`kclient.broker.limits.RequestMemory`),
the read deadline (`kclient.broker.read_clock.ReadClock`) and the
``sasl.server.max.receive.size`` / ``queued.max.unauthenticated.request.bytes``
settings. No process, no connection; the broker-level behaviour is in
tests/test_broker_preauth.py."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from kclient.broker.limits import RequestMemory
from kclient.broker.offload import run_in_worker
from kclient.broker.read_clock import ReadClock
from kclient.config import BrokerConfig
from kclient.errors import ConfigError, ProtocolError
from kclient.security.settings import SASL_SERVER_MAX_RECEIVE_SIZE, broker_listener_security

pytestmark = pytest.mark.unit

JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";'


async def test_unauthenticated_frames_take_from_their_own_share():
    memory = RequestMemory(100, 10)
    silent = memory.begin(authenticated=False)
    await memory.reserve(silent, 10)  # the share is full
    later = memory.begin(authenticated=False)
    assert memory.must_wait(later, 1)
    producer = memory.begin(authenticated=True)
    assert not memory.must_wait(producer, 100)  # the authenticated budget is untouched
    await memory.reserve(producer, 100)
    assert (memory.used, memory.unauthenticated_used) == (110, 10)
    memory.release(producer, 100)
    memory.done_reading(producer)


async def test_the_oldest_unauthenticated_frame_may_go_over_the_share_and_others_wait():
    memory = RequestMemory(None, 10)
    first = memory.begin(authenticated=False)
    await memory.reserve(first, 64)  # oldest: never held back
    second = memory.begin(authenticated=False)
    got: list[int] = []

    async def take() -> None:
        await memory.reserve(second, 5)
        got.append(5)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(take)
        await trio.testing.wait_all_tasks_blocked()
        assert got == [] and memory.waits == 1
        memory.done_reading(first)  # answered: the second is the oldest now
        memory.release(first, 64)
    assert got == [5] and memory.unauthenticated_used == 5


async def test_read_clock_counts_time_held_back_by_the_budget(autojump_clock):
    memory = RequestMemory(10, 10)
    holder = memory.begin()
    await memory.reserve(holder, 10)
    held = memory.begin()
    clock = ReadClock(30.0)
    with pytest.raises(trio.TooSlowError):
        await clock.reserve(memory, held, 1)
    assert trio.current_time() == pytest.approx(clock.deadline)
    assert memory.used == 10  # a cancelled wait takes nothing


async def test_run_in_worker_returns_exceptions_without_traceback():
    def parse(data: bytes) -> int:
        raise ProtocolError(f"bad frame of {len(data)} bytes")

    with pytest.raises(ProtocolError) as caught:
        await run_in_worker(parse, b"x" * 10)
    assert caught.value.__context__ is None and caught.value.__cause__ is None
    assert await run_in_worker(len, b"abc") == 3


def test_sasl_server_max_receive_size_per_listener():
    props = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:9092,INTERNAL://127.0.0.1:9093",
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.jaas.config": JAAS,
        "listener.name.internal.sasl.server.max.receive.size": "1048576",
    }
    external, internal = broker_listener_security(props)
    assert external.sasl_server_max_receive_size == SASL_SERVER_MAX_RECEIVE_SIZE == 524288
    assert internal.sasl_server_max_receive_size == 1048576
    with pytest.raises(ConfigError, match="sasl.server.max.receive.size"):
        broker_listener_security({**props, "sasl.server.max.receive.size": "0"})
    with pytest.raises(ConfigError, match="sasl.server.max.receive.size"):
        broker_listener_security({**props, "sasl.server.max.receive.size": "lots"})


def test_queued_max_unauthenticated_request_bytes():
    assert BrokerConfig.from_properties({}).queued_max_unauthenticated_request_bytes == 4194304
    assert BrokerConfig.from_properties({"queued.max.unauthenticated.request.bytes": 0}).queued_max_unauthenticated_request_bytes == 0
    with pytest.raises(ConfigError, match="queued.max.unauthenticated.request.bytes"):
        BrokerConfig.from_properties({"queued.max.unauthenticated.request.bytes": -1})
