"""KIP-554's messages byte for byte (flexible v0: compact arrays and
strings, tagged fields), the client's salted password against scramp's
derivation of Kafka's stored credential, and the broker's per-user
validation of AlterUserScramCredentials (issue 30). No process, no socket."""

from __future__ import annotations

import pytest
import trio

from kclient.broker.scram.apis import NO_ZOOKEEPER, UserScramApis, credential_infos
from kclient.protocol.connection import RequestHeader
from kclient.protocol.messages import ALTER_USER_SCRAM_CREDENTIALS, DESCRIBE_USER_SCRAM_CREDENTIALS
from kclient.protocol.messages.user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
    CredentialInfo,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
    UserName,
)
from kclient.security.credentials import credential_from_salted_password, make_scram_credential, salted_password

pytestmark = pytest.mark.unit


def _cs(text: str) -> str:
    """A compact string: unsigned varint length + 1, UTF-8 (hex)."""
    return f"{len(text) + 1:02x}" + text.encode().hex()


def test_describe_v0_bytes():
    body = DescribeUserScramCredentialsRequest(users=[UserName(name="alice")])
    expected = "02" + _cs("alice") + "00" + "00"
    assert DESCRIBE_USER_SCRAM_CREDENTIALS.request(0).encode(body).hex() == expected
    assert DESCRIBE_USER_SCRAM_CREDENTIALS.request(0).decode_message(bytes.fromhex(expected)) == body
    # null users (every user): compact array length 0.
    assert DESCRIBE_USER_SCRAM_CREDENTIALS.request(0).encode(DescribeUserScramCredentialsRequest(users=None)).hex() == "0000"
    response = DescribeUserScramCredentialsResponse(
        results=[DescribeUserScramCredentialsResult(user="alice", credential_infos=[CredentialInfo(mechanism=1, iterations=8192)])]
    )
    expected = "00000000" + "0000" + "00" + "02" + _cs("alice") + "0000" + "00" + "02" + "01" + "00002000" + "00" + "00" + "00"
    assert DESCRIBE_USER_SCRAM_CREDENTIALS.response(0).encode(response).hex() == expected
    assert DESCRIBE_USER_SCRAM_CREDENTIALS.response(0).decode_message(bytes.fromhex(expected)) == response


def test_alter_v0_bytes():
    body = AlterUserScramCredentialsRequest(
        deletions=[ScramCredentialDeletion(name="bob", mechanism=2)],
        upsertions=[ScramCredentialUpsertion(name="al", mechanism=1, iterations=4096, salt=b"\x01\x02", salted_password=b"\x03")],
    )
    expected = "02" + _cs("bob") + "02" + "00" + "02" + _cs("al") + "01" + "00001000" + "03" + "0102" + "02" + "03" + "00" + "00"
    assert ALTER_USER_SCRAM_CREDENTIALS.request(0).encode(body).hex() == expected
    assert ALTER_USER_SCRAM_CREDENTIALS.request(0).decode_message(bytes.fromhex(expected)) == body
    response = AlterUserScramCredentialsResponse(results=[AlterUserScramCredentialsResult(user="al", error_code=93, error_message="Too few iterations")])
    expected = "00000000" + "02" + _cs("al") + "005d" + _cs("Too few iterations") + "00" + "00"
    assert ALTER_USER_SCRAM_CREDENTIALS.response(0).encode(response).hex() == expected


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_salted_password_gives_the_credential_scramp_derives(mechanism):
    salt = b"0123456789abcdef"
    expected = make_scram_credential(mechanism, "pässword", iterations=4096, salt=salt)
    assert credential_from_salted_password(mechanism, salt, salted_password(mechanism, "pässword", salt, 4096), 4096) == expected


def test_credential_infos_list_sha256_first():
    sha512 = str(make_scram_credential("SCRAM-SHA-512", "pw", iterations=5000))
    sha256 = str(make_scram_credential("SCRAM-SHA-256", "pw", iterations=8192))
    config = {"SCRAM-SHA-512": sha512, "producer_byte_rate": "1024", "SCRAM-SHA-256": sha256}
    assert credential_infos(config) == [CredentialInfo(mechanism=1, iterations=8192), CredentialInfo(mechanism=2, iterations=5000)]
    assert credential_infos({"producer_byte_rate": "1024"}) == []


def test_a_broker_without_zookeeper_keeps_no_credentials():
    """Without zookeeper.connect there is nowhere to keep credentials:
    describe finds none, every alteration fails with a message saying why,
    and the request's own errors still come first."""
    apis = UserScramApis(None)
    header = RequestHeader(api_key=51, api_version=0, correlation_id=1, client_id="t", body_offset=0)
    body = AlterUserScramCredentialsRequest(
        upsertions=[
            ScramCredentialUpsertion(name="al", mechanism=1, iterations=4096, salt=b"s", salted_password=b"p"),
            ScramCredentialUpsertion(name="bo", mechanism=1, iterations=10, salt=b"s", salted_password=b"p"),
        ]
    )
    altered = trio.run(apis.alter_user_scram_credentials, header, body)
    assert [(r.user, r.error_code, r.error_message) for r in altered.results] == [("bo", 93, "Too few iterations"), ("al", -1, NO_ZOOKEEPER)]
    described = trio.run(apis.describe_user_scram_credentials, header, DescribeUserScramCredentialsRequest(users=[UserName(name="al")]))
    assert [(r.user, r.error_code) for r in described.results] == [("al", 91)]
    assert trio.run(apis.describe_user_scram_credentials, header, DescribeUserScramCredentialsRequest()).results == []
