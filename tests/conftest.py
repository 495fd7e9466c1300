"""Shared fixtures: a real bundled broker in a subprocess, unique topic names."""

from __future__ import annotations

import re
import uuid

import pytest

from kclient.testing import BrokerProcess

#: Partitions of auto-created topics on the session broker.
BROKER_PARTITIONS = 2


@pytest.fixture(scope="session")
def broker():
    """A :class:`kclient.testing.BrokerProcess` running for the whole test
    session on a free loopback port, with a temporary log directory,
    auto-created topics getting :data:`BROKER_PARTITIONS` partitions."""
    with BrokerProcess(properties={"num.partitions": BROKER_PARTITIONS}) as proc:
        yield proc


@pytest.fixture
def topic(request) -> str:
    """A topic name no other test uses: the test's name (legal characters
    only) plus a random suffix."""
    base = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name)[:80].strip("-") or "t"
    return f"{base}-{uuid.uuid4().hex[:8]}"
