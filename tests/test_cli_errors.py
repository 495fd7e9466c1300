"""How ``kclient`` reports an error that ends a command (issue 27): one
line on stderr, ``kclient COMMAND: error: message``, without the logger's
time stamp and name and without the message said twice; exit status 2 for
bad arguments only, 1 for the other errors. A busy port is one line naming
it. Subprocesses against one bundled broker for the module; the unit tests
check the wording helpers and `kclient.tools.shutdown` in process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import require_zookeeper

from kclient.errors import ConfigError, GroupIdNotFoundError, NoBrokersAvailableError, TopicAlreadyExistsError
from kclient.testing import BrokerProcess
from kclient.tools.messages import error_message, line_ranges
from kclient.tools.shutdown import ShutdownSignals

ROOT = Path(__file__).resolve().parent.parent


def kc(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "kclient", *args], input=input, capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)


@pytest.fixture(scope="module")
def broker():
    with BrokerProcess() as proc:
        yield proc


@pytest.fixture
def busy_port():
    """A loopback port another socket listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def test_broker_on_a_busy_port_is_one_line_naming_it(busy_port, tmp_path):
    result = kc("broker", "--override", f"port={busy_port}", "--override", f"log.dirs={tmp_path}")
    assert result.returncode == 1
    assert result.stderr == f"kclient broker: error: cannot listen on 127.0.0.1:{busy_port} (PLAINTEXT): Address already in use\n"
    assert result.stdout == ""


def test_zookeeper_on_a_busy_port_is_one_line_naming_it(busy_port):
    require_zookeeper()
    result = kc("zookeeper", "--port", str(busy_port))
    assert result.returncode == 1
    assert result.stderr == f"kclient zookeeper: error: cannot listen on 127.0.0.1:{busy_port}: Address already in use\n"
    assert "running" not in result.stdout


def test_zookeeper_on_the_port_of_a_running_zookeeper_does_not_say_it_runs(zookeeper):
    port = int(zookeeper.connect.rsplit(":", 1)[1])
    result = kc("zookeeper", "--port", str(port))
    assert result.returncode == 1
    assert result.stderr == f"kclient zookeeper: error: cannot listen on 127.0.0.1:{port}: Address already in use\n"
    assert result.stdout == ""


def test_a_broker_error_is_one_line_with_its_name_once(broker):
    assert kc("topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", "twice").returncode == 0
    result = kc("topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", "twice")
    assert result.returncode == 1
    assert result.stderr.startswith("kclient topics: error: TopicAlreadyExistsError: ") and result.stderr.count("\n") == 1, result.stderr
    assert "[Error" not in result.stderr and "TOPIC_ALREADY_EXISTS" not in result.stderr


def test_a_bad_property_is_status_2_and_one_plain_line(broker):
    result = kc("console-consumer", "--bootstrap-server", broker.bootstrap, "--topic", "t", "--property", "print.key=maybe")
    assert result.returncode == 2
    assert result.stderr == "kclient console-consumer: error: --property print.key='maybe': expected true or false\n"


def test_argparse_usage_errors_are_status_2(broker):
    result = kc("console-consumer", "--bootstrap-server", broker.bootstrap)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == "kclient console-consumer: error: the following arguments are required: --topic"


def test_an_unreachable_broker_is_status_1():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    result = kc("get-offsets", "--bootstrap-server", dead, "--topic", "t")
    assert result.returncode == 1
    assert result.stderr.startswith("kclient get-offsets: error: NoBrokersAvailableError: ") and result.stderr.count("\n") == 1, result.stderr


def test_a_lost_line_is_named_by_number():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    result = kc("console-producer", "--bootstrap-server", dead, "--topic", "t", input="a\nb\nc\n")
    assert result.returncode == 1
    assert result.stderr.startswith("kclient console-producer: error: FailedToSendMessageError: 3 of 3 lines read were not delivered (lines 1-3): "), result.stderr
    assert result.stderr.count("FailedToSendMessageError") == 1 and result.stderr.count("\n") == 1


@pytest.mark.unit
def test_error_message_names_the_error_once():
    assert error_message(TopicAlreadyExistsError("Topic 't' already exists.")) == "TopicAlreadyExistsError: Topic 't' already exists."
    assert error_message(GroupIdNotFoundError()) == "GroupIdNotFoundError: GROUP_ID_NOT_FOUND"
    assert error_message(NoBrokersAvailableError("no broker answered\nmore")) == "NoBrokersAvailableError: no broker answered"
    assert error_message(ConfigError("--offset N needs --partition")) == "--offset N needs --partition"
    assert error_message(OSError(98, "cannot listen on h:1: Address already in use")) == "cannot listen on h:1: Address already in use"
    assert error_message(FileNotFoundError(2, "No such file or directory", "x.properties")) == "No such file or directory: 'x.properties'"


@pytest.mark.unit
def test_line_ranges():
    assert line_ranges([]) == ""
    assert line_ranges([3, 1, 2, 7, 9, 10, 9]) == "1-3,7,9-10"


@pytest.mark.unit
def test_shutdown_signals_modes():
    # What was installed before (Python's own handlers, or another library's
    # in a process that ran, say, a SparkContext): put back on exit.
    before = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    with ShutdownSignals() as signals:
        os.kill(os.getpid(), signal.SIGINT)  # held: recorded only
        assert signals.received == [signal.SIGINT]
        with pytest.raises(KeyboardInterrupt), signals.raising():  # a stop asked for: raises on entry
            pass
        with pytest.raises(KeyboardInterrupt), signals.stopping():  # a second signal raises
            os.kill(os.getpid(), signal.SIGTERM)
        assert signals.received == [signal.SIGINT, signal.SIGTERM]
        read, write = os.pipe()
        try:
            assert signals.wait_readable(read) is False  # a stop was asked for
        finally:
            os.close(read)
            os.close(write)
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


@pytest.mark.unit
def test_shutdown_signals_raising_hands_sigint_to_python():
    with ShutdownSignals() as signals:
        read, write = os.pipe()
        try:
            os.write(write, b"x")
            assert signals.wait_readable(read) is True
        finally:
            os.close(read)
            os.close(write)
        with pytest.raises(KeyboardInterrupt), signals.raising():
            assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
            os.kill(os.getpid(), signal.SIGINT)
        assert signals.requested


def test_an_unreachable_broker_and_an_existing_topic_are_said_once(broker, tmp_path):
    """The address of a broker nobody listens on, and the name of a topic
    that exists, appear once in the error line (not trio's "all attempts to
    connect to X failed" after "cannot connect to X", not "topic 't':
    Topic 't' already exists.")."""
    with socket.socket() as closed:  # a port nobody listens on once this socket is closed
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    result = kc("consumer-groups", "--bootstrap-server", f"127.0.0.1:{port}", "--list")
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.endswith(f"cannot connect to 127.0.0.1:{port}: Connection refused"), line
    assert line.count(f"127.0.0.1:{port}") == 1 and "all attempts" not in line, line
    topic = f"once-{os.getpid()}"
    assert kc("topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", topic).returncode == 0
    result = kc("topics", "--bootstrap-server", broker.bootstrap, "--create", "--topic", topic)
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.count(topic) == 1 and line.endswith(f"Topic '{topic}' already exists."), line


@pytest.mark.unit
def test_main_in_process_gives_the_logger_levels_back():
    """The client tools quiet kclient's loggers while they run; `main`
    called in the caller's process (a test, an app) restores the levels."""
    import logging

    from kclient.cli import main

    kclient_logger = logging.getLogger("kclient")
    before = kclient_logger.level
    kclient_logger.setLevel(logging.INFO)
    try:
        status = main(["acls", "--bootstrap-server", "127.0.0.1:1", "--add", "--topic", "t"])  # a client tool, refused before it connects
        assert status == 2
        assert kclient_logger.level == logging.INFO
    finally:
        kclient_logger.setLevel(before)
