"""docs/security.md's examples are correct for the code: they run.

The page marks its examples with an HTML comment on the line before the
code fence (invisible in the built site):

- ``<!-- broker -->``: the ``server.properties`` of the broker every other
  example talks to. The module's broker is started FROM it (ports 0,
  placeholder paths and ZooKeeper replaced), so its listeners, PEM stores,
  ``ssl.client.auth``, SASL mechanisms and JAAS users are the page's;
- ``<!-- run: sh -->``: shell commands (``kclient configs``), run with this
  interpreter's ``-m kclient`` before any Python example (they add the
  SCRAM user the examples log in as);
- ``<!-- run -->``: Python, run in page order, each in a fresh namespace
  (an example that prints must print something);
- ``<!-- run: spark -->``: Python that needs Spark (skipped without it,
  failing in CI, as the other Spark tests).

The placeholders (``broker.example.com:9093``, ``/etc/kafka/ca.pem``,
``zk.example.com:2181``, ...) are replaced by the real addresses and the
``trustme`` files of `kclient.testing.TestCertificates`; no placeholder may
be left over. One ZooKeeper (the session's) and one broker for the module;
the "testing your own application" example starts its own, as it says.

The tables are checked against the code too: every client property listed
is one `ProducerConfig` reads, every error listed is an
`AuthenticationError` exported from ``kclient``, and what the page says is
not supported is refused.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import subprocess
import sys
import uuid
from pathlib import Path

import attrs
import pytest

import kclient
from kclient.errors import AuthenticationError, ConfigError, NotSupportedError
from kclient.testing import BrokerProcess, TestCertificates

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "security.md"

pytestmark = pytest.mark.timeout(300)

#: A marker comment, then a fenced block: (marker, language, code).
_BLOCK = re.compile(r"<!-- (?P<marker>[a-z: ]+?) -->\n```(?P<lang>\w+)\n(?P<code>.*?)\n```", re.DOTALL)
_FENCE = re.compile(r"```(?P<lang>\w+)\n(?P<code>.*?)\n```", re.DOTALL)


@attrs.frozen
class Block:
    marker: str
    lang: str
    code: str
    line: int
    heading: str

    @property
    def id(self) -> str:
        return f"L{self.line}-{re.sub(r'[^A-Za-z0-9]+', '-', self.heading).strip('-')}"


def _blocks(text: str) -> list[Block]:
    out = []
    for m in _BLOCK.finditer(text):
        before = text[: m.start()]
        headings = re.findall(r"^#+ (.+)$", before, re.MULTILINE)
        out.append(Block(m["marker"], m["lang"], m["code"], before.count("\n") + 1, headings[-1] if headings else ""))
    return out


TEXT = PAGE.read_text(encoding="utf-8")
BLOCKS = _blocks(TEXT)
RUN = [b for b in BLOCKS if b.marker == "run"]


def _one(marker: str) -> list[Block]:
    return [b for b in BLOCKS if b.marker == marker]


# ---------------------------------------------------------------- the page


@pytest.mark.unit
def test_the_page_marks_its_examples() -> None:
    assert {b.marker for b in BLOCKS} <= {"run", "run: sh", "run: spark", "broker"}, "an unknown marker"
    assert len(_one("broker")) == 1 and _one("broker")[0].lang == "properties"
    assert len(_one("run: sh")) == 1 and len(_one("run: spark")) == 1
    assert all(b.lang == "python" for b in RUN)
    # the page's promises: one tested example per client
    runnable = "\n".join(b.code for b in RUN)
    for shown in ("Producer(", "SimpleConsumer(", "ConsumerConnector(", "SaslAuthenticationFailedError", "TestCertificates("):
        assert shown in runnable, f"no runnable example shows {shown}"
    assert "kafka.security.protocol" in _one("run: spark")[0].code


@pytest.mark.unit
def test_every_python_block_compiles() -> None:
    for m in _FENCE.finditer(TEXT):
        if m["lang"] == "python":
            compile(m["code"], f"{PAGE.name}:{TEXT[: m.start()].count(chr(10)) + 1}", "exec")


@pytest.mark.unit
def test_the_client_property_table_lists_what_the_clients_read() -> None:
    from kclient.config import ProducerConfig
    from kclient.config.security import SECURITY_PROPERTIES

    section = TEXT.split("## Client properties", 1)[1].split("### Producer", 1)[0]
    listed = set(re.findall(r"^\| `([a-z.]+)`", section, re.MULTILINE)) | set(re.findall(r"\(alias `([a-z.]+)`\)", section))
    listed |= set(re.findall(r"^\| `[a-z.]+`, `([a-z.]+)`", section, re.MULTILINE))
    assert set(SECURITY_PROPERTIES) <= listed, f"not documented: {set(SECURITY_PROPERTIES) - listed}"
    known = {spec.name for spec in ProducerConfig.properties().values()}
    aliases = {alias for spec in ProducerConfig.properties().values() for alias in getattr(spec, "aliases", ()) or ()}
    assert listed <= known | aliases, f"documented but not read: {listed - known - aliases}"


@pytest.mark.unit
def test_the_errors_table_lists_the_typed_errors() -> None:
    section = TEXT.split("## Errors", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `(\w+Error)` \|", section, re.MULTILINE)
    assert listed == ["SslAuthenticationError", "SaslAuthenticationFailedError", "UnsupportedSaslMechanismError", "IllegalSaslStateError"]
    for name in listed:
        error = getattr(kclient.errors, name)
        assert issubclass(error, AuthenticationError), name
    for name in listed[:3]:
        assert getattr(kclient, name) is getattr(kclient.errors, name)


@pytest.mark.unit
def test_what_is_not_supported_is_refused(tmp_path) -> None:
    from kclient.config import BrokerConfig, ProducerConfig

    with pytest.raises(NotSupportedError):
        ProducerConfig.from_properties({"metadata.broker.list": "h:1", "security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI", "sasl.username": "u", "sasl.password": "p"})
    with pytest.raises(ConfigError):
        ProducerConfig.from_properties({"metadata.broker.list": "h:1", "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER", "sasl.username": "u", "sasl.password": "p"})
    keystore = tmp_path / "broker.jks"
    keystore.write_bytes(b"\xfe\xed\xfe\xed")
    with pytest.raises(ConfigError, match="ssl.keystore"):
        BrokerConfig.from_properties({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "JKS", "ssl.keystore.location": str(keystore)})
    with pytest.raises(ConfigError, match="sasl.enabled.mechanisms"):
        BrokerConfig.from_properties({"listeners": "SASL_PLAINTEXT://127.0.0.1:0"})


@pytest.mark.unit
def test_the_default_bind_is_loopback() -> None:
    from kclient.config import BrokerConfig

    assert BrokerConfig.from_properties({}).listen_host == "127.0.0.1"


# --------------------------------------------------------- the live examples


@attrs.define
class DocsBroker:
    broker: BrokerProcess
    certs: TestCertificates
    zk_connect: str
    replacements: dict[str, str]

    def substitute(self, code: str) -> str:
        for placeholder, real in self.replacements.items():
            code = code.replace(placeholder, real)
        assert "example.com" not in code and "/etc/kafka" not in code, f"a placeholder is left:\n{code}"
        return code


def _placeholders(certs: TestCertificates, zk_connect: str) -> dict[str, str]:
    client = certs.client_certificate("payments-app")
    return {
        "/etc/kafka/ca.pem": certs.ca_location,
        "/etc/kafka/broker.pem": certs.keystore_location,
        "/etc/kafka/client.pem": client.certificate_location,
        "/etc/kafka/client.key": client.key_location,
        "zk.example.com:2181": zk_connect,
    }


def _run_shell(block: Block, env: DocsBroker) -> None:
    """Each command of a ``sh`` block (backslash continuations joined), with
    ``kclient`` run as ``python -m kclient``."""
    for command in env.substitute(block.code).replace("\\\n", " ").splitlines():
        argv = shlex.split(command)
        if not argv:
            continue
        assert argv[0] == "kclient", f"only kclient commands are run: {command}"
        result = subprocess.run([sys.executable, "-m", "kclient", *argv[1:]], capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert result.returncode == 0, f"{command}\n{result.stdout}\n{result.stderr}"


@pytest.fixture(scope="module")
def docs_broker(zookeeper, tmp_path_factory) -> DocsBroker:
    """ZooKeeper (a fresh chroot), the page's SCRAM users added by its own
    ``kclient configs`` commands, and a broker started from its
    ``server.properties``."""
    from kazoo.client import KazooClient

    tmp = tmp_path_factory.mktemp("docs-security")
    chroot = f"/docs-security-{uuid.uuid4().hex[:8]}"
    zk = KazooClient(hosts=zookeeper.connect)
    zk.start(timeout=15)
    try:
        zk.ensure_path(chroot)
    finally:
        zk.stop()
        zk.close()
    zk_connect = zookeeper.connect_string(chroot)
    with TestCertificates(tmp / "certs") as certs:
        replacements = _placeholders(certs, zk_connect)
        env = DocsBroker(None, certs, zk_connect, replacements)  # type: ignore[arg-type]
        _run_shell(_one("run: sh")[0], env)

        properties = env.substitute(_one("broker")[0].code.replace("log.dirs=/var/lib/kclient", f"log.dirs={tmp / 'logs'}"))
        properties = re.sub(r"(://127\.0\.0\.1):\d+", r"\1:0", properties)  # free ports
        config_file = tmp / "server.properties"
        config_file.write_text(properties + "\n", encoding="utf-8")
        with BrokerProcess(config_file=config_file, log_dir=tmp / "logs") as broker:
            sasl_ssl = broker.bootstrap_for("SASL_SSL")
            host, port = sasl_ssl.rsplit(":", 1)
            env.broker = broker
            # longest first: "broker.example.com:9093" before "broker.example.com"
            env.replacements = {
                "broker.example.com:9093": sasl_ssl,
                "broker.example.com:9094": broker.bootstrap_for("MTLS"),
                '"broker.example.com", 9093': f'"{host}", {port}',
                **replacements,
            }
            yield env


def test_the_broker_serves_the_pages_listeners(docs_broker) -> None:
    assert list(docs_broker.broker.ports) == ["PLAINTEXT", "SASL_SSL", "MTLS"]
    assert "listening on 127.0.0.1" in docs_broker.broker.output()


def _zk_endpoint(env: DocsBroker, protocol: str):
    """The broker's endpoint for ``protocol`` in its ZooKeeper registration
    (KIP-103), where the ConsumerConnector looks leaders up; None if absent."""
    from kazoo.client import KazooClient

    from kclient.zk.paths import BrokerRegistration, broker_path

    zk = KazooClient(hosts=env.zk_connect)
    zk.start(timeout=15)
    try:
        broker_id = int(zk.get_children("/brokers/ids")[0])
        registration = BrokerRegistration.from_json(broker_id, zk.get(broker_path(broker_id))[0])
    finally:
        zk.stop()
        zk.close()
    return registration.endpoint_for(protocol)


@pytest.mark.parametrize("block", RUN, ids=[b.id for b in RUN])
def test_python_example_runs(docs_broker, block: Block) -> None:
    if "ConsumerConnector(" in block.code:
        assert _zk_endpoint(docs_broker, "SASL_SSL") is not None, "the broker registers no SASL_SSL endpoint in ZooKeeper"
    printed = _run_block(docs_broker, block)
    if "print(" in block.code:
        assert printed.strip(), f"the example at {PAGE.name}:{block.line} printed nothing"
    if "not-the-password" in block.code:
        assert printed.startswith("login refused:"), printed


def _run_block(env: DocsBroker, block: Block) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(env.substitute(block.code), f"{PAGE.name}:{block.line}", "exec"), {"__name__": f"docs_security_{block.line}"})
    return out.getvalue()


def _producer_examples() -> list[Block]:
    """The Producer examples that send payments (not the failing login, not
    the self-contained testing one)."""
    return [b for b in RUN if "Producer(" in b.code and "payments" in b.code and "not-the-password" not in b.code]


def test_simple_consumer_example_reads_what_the_producer_examples_wrote(docs_broker) -> None:
    """The SimpleConsumer example prints the payments the Producer examples
    send (they run again here, so this test stands alone)."""
    assert len(_producer_examples()) == 3
    for block in _producer_examples():
        _run_block(docs_broker, block)
    consumer_block = next(b for b in RUN if "SimpleConsumer(" in b.code and "TestCertificates" not in b.code)
    printed = _run_block(docs_broker, consumer_block)
    for value in (b"paid 42.00", b"paid 7.50", b"paid 12.00"):
        assert repr(value) in printed


def test_spark_example_runs(docs_broker, spark) -> None:
    """The page's Spark example, run in this process: its
    ``kclient.spark.session(...)`` gets the test session's one SparkSession
    (the ``spark`` fixture), which it must not stop (Spark reads its
    class path once; the other Spark tests share it)."""
    for block in _producer_examples():
        _run_block(docs_broker, block)
    block = _one("run: spark")[0]
    namespace: dict = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(docs_broker.substitute(block.code), f"{PAGE.name}:{block.line}", "exec"), namespace)
    assert namespace["spark"].sparkContext is spark.sparkContext
    assert "paid 42.00" in out.getvalue()
    from kclient import OffsetRequest, SimpleConsumer

    host, port = docs_broker.broker.bootstrap_for("PLAINTEXT").rsplit(":", 1)
    with SimpleConsumer(host, int(port)) as consumer:
        copied = consumer.get_offsets_before("payments-copy", 0, OffsetRequest.LATEST_TIME, 1)[0]
        source = consumer.get_offsets_before("payments", 0, OffsetRequest.LATEST_TIME, 1)[0]
    assert copied == source > 0
