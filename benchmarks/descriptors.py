"""How many file descriptors the bundled broker holds at N partitions.

Starts a broker (optionally under a ``RLIMIT_NOFILE``, as ``ulimit -n``
sets it), creates one topic of N partitions, writes one record to each,
reads each back (Fetch v11, the zero-copy path, and v3, the copying one)
and prints the broker's open descriptors (``/proc/<pid>/fd``) after each
step. Linux only.

Usage::

    python benchmarks/descriptors.py [PARTITIONS] [--ulimit N]

Issue 16's figure: 6,153 descriptors at 2,048 partitions before segment
files opened lazily (three per partition), and no more than about 340
partitions under ``ulimit -n 1024``.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from typing import Any

from kclient.client.admin import AdminClient, NewTopic
from kclient.protocol.connection import ClientConnection
from kclient.protocol.messages import FETCH, PRODUCE
from kclient.protocol.records import iter_record_set
from kclient.protocol.records.v2 import build_batch
from kclient.testing import BrokerProcess


def _request(sock: socket.socket, conn: ClientConnection, api, version: int, body: dict) -> Any:
    """One request on a blocking socket; the response message."""
    _, data = conn.send(api, version, body)
    sock.sendall(data)
    while (response := conn.next_response()) is None:
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        conn.receive_data(chunk)
    return response.body


def _fetch_body(topic: str, partitions: int) -> dict:
    return {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 50_000_000,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {"partition": p, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1, "partition_max_bytes": 1 << 20}
                    for p in range(partitions)
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def main(argv: list[str] | None = None) -> int:
    """Run the measurement; returns the exit status (1 if a record was not read back)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("partitions", type=int, nargs="?", default=2048)
    parser.add_argument("--ulimit", type=int, default=None, help="RLIMIT_NOFILE of the broker process")
    args = parser.parse_args(argv)
    n = args.partitions
    with BrokerProcess(properties={"num.partitions": 1}, max_open_files=args.ulimit, startup_timeout=120) as broker:

        def fds() -> int:
            return len(os.listdir(f"/proc/{broker.pid}/fd"))

        print(f"broker pid {broker.pid}, RLIMIT_NOFILE {args.ulimit or 'inherited'}: {fds()} descriptors at start")
        with AdminClient({"bootstrap.servers": broker.bootstrap, "request.timeout.ms": 120000}) as admin:
            admin.create_topics([NewTopic("many", n, 1)], timeout_ms=120000)
        print(f"{n} partitions created: {fds()} descriptors")
        now = int(time.time() * 1000)
        produce = {
            "transactional_id": None,
            "acks": 1,
            "timeout_ms": 60000,
            "topic_data": [{"name": "many", "partition_data": [{"index": p, "records": build_batch([(None, b"v%d" % p, now)])} for p in range(n)]}],
        }
        with socket.create_connection((broker.host, broker.port), timeout=120) as sock:
            conn = ClientConnection(client_id="descriptors")
            reply = _request(sock, conn, PRODUCE, 7, produce)
            failed = sum(1 for p in reply.responses[0].partition_responses if p.error_code)
            print(f"one record written to each: {fds()} descriptors ({failed} partitions failed)")
            good = 0
            for version in (11, 3):
                reply = _request(sock, conn, FETCH, version, _fetch_body("many", n))
                for part in reply.responses[0].partitions:
                    values = [r.value for r in iter_record_set(part.records or b"")]
                    good += values == [b"v%d" % part.partition_index]
            print(f"read back {good} of {2 * n} (Fetch v11 and v3): {fds()} descriptors")
    return 0 if good == 2 * n and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
