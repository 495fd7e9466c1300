"""Unit tests of kclient.security: settings, TLS contexts, SASL mechanisms.

No broker and no mocks: SASL exchanges run client object against server
object (ours and scramp's), TLS handshakes run over a real
``socket.socketpair()`` with certificates from a throwaway ``trustme`` CA.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import socket
import ssl
import threading

import pytest
import scramp
import trustme

from kclient.errors import (
    AuthenticationError,
    ConfigError,
    IllegalSaslStateError,
    KafkaError,
    NotSupportedError,
    SaslAuthenticationFailedError,
    SslAuthenticationError,
    UnsupportedSaslMechanismError,
    error_for_code,
)
from kclient.security.sasl import (
    PLAIN_LOGIN_MODULE,
    SCRAM_LOGIN_MODULE,
    PlainClient,
    PlainServer,
    ScramClient,
    ScramCredential,
    ScramServer,
    client_mechanism,
    jaas_plain_users,
    jaas_username_password,
    make_scram_credential,
    parse_jaas_config,
    parse_scram_user_config,
    scram_user_config,
    scram_user_path,
    server_mechanism,
)
from kclient.security.settings import (
    ClientSecurity,
    ListenerEndpoint,
    ListenerSecurity,
    SecurityProtocol,
    SslClientAuth,
    broker_listener_security,
    parse_listeners,
    parse_security_protocol_map,
)
from kclient.security.tls import (
    MINIMUM_TLS_VERSION,
    client_ssl_context,
    server_ssl_context,
    ssl_authentication_error,
)

SCRAMS = ["SCRAM-SHA-256", "SCRAM-SHA-512"]
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


# --------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------


@pytest.mark.unit
def test_error_codes_registered():
    assert error_for_code(33) is UnsupportedSaslMechanismError
    assert error_for_code(34) is IllegalSaslStateError
    assert error_for_code(58) is SaslAuthenticationFailedError
    assert SaslAuthenticationFailedError.name == "SASL_AUTHENTICATION_FAILED"
    assert not SaslAuthenticationFailedError.retriable
    assert str(SaslAuthenticationFailedError("x")) == "[Error 58] SASL_AUTHENTICATION_FAILED: x"
    assert issubclass(SaslAuthenticationFailedError, AuthenticationError)
    assert issubclass(SslAuthenticationError, AuthenticationError)
    assert issubclass(AuthenticationError, KafkaError)
    assert SslAuthenticationError.code is None


# --------------------------------------------------------------------------
# SASL/PLAIN (RFC 4616)
# --------------------------------------------------------------------------


@pytest.mark.unit
def test_plain_client_bytes_follow_rfc4616():
    client = PlainClient("alice", "alice-secret")
    assert client.initial_response() == b"\0alice\0alice-secret"
    assert not client.is_complete
    assert client.evaluate_challenge(b"") is None
    assert client.is_complete
    assert PlainClient("alice", "pw", "alice").initial_response() == b"alice\0alice\0pw"
    assert PlainClient("jörg", "pässword").initial_response() == "\0jörg\0pässword".encode()


@pytest.mark.unit
def test_plain_client_state_and_input_errors():
    client = PlainClient("a", "b")
    with pytest.raises(IllegalSaslStateError):
        client.evaluate_challenge(b"")
    client.initial_response()
    with pytest.raises(IllegalSaslStateError):
        client.initial_response()
    client.evaluate_challenge(b"")
    with pytest.raises(IllegalSaslStateError):
        client.evaluate_challenge(b"")
    with pytest.raises(ConfigError, match="sasl.password"):
        PlainClient("a", "")
    with pytest.raises(ConfigError, match="sasl.username"):
        PlainClient("a\0b", "c")


@pytest.mark.unit
def test_plain_exchange_client_to_server():
    client = PlainClient("alice", "alice-secret")
    server = PlainServer({"alice": "alice-secret", "bob": "bob-secret"})
    reply = server.evaluate_response(client.initial_response())
    assert reply == b""
    assert server.is_complete and server.authorization_id == "alice"
    assert client.evaluate_challenge(reply) is None and client.is_complete
    with pytest.raises(IllegalSaslStateError):
        server.evaluate_response(b"\0alice\0alice-secret")


@pytest.mark.unit
@pytest.mark.parametrize(
    "token",
    [
        b"\0alice\0wrong",  # wrong password
        b"\0mallory\0alice-secret",  # unknown user
        b"\0alice\0",  # empty password
        b"\0\0alice-secret",  # empty user
        b"alice\0alice-secret",  # two fields
        b"\0alice\0alice-secret\0x",  # four fields
        b"bob\0alice\0alice-secret",  # another authorization id
        b"\0\xff\0alice-secret",  # not UTF-8
        b"",
    ],
)
def test_plain_server_refuses_with_one_message(token):
    server = PlainServer({"alice": "alice-secret"})
    with pytest.raises(SaslAuthenticationFailedError) as info:
        server.evaluate_response(token)
    assert info.value.code == 58
    assert str(info.value) == "[Error 58] SASL_AUTHENTICATION_FAILED: Authentication failed: Invalid username or password"
    assert not server.is_complete and server.authorization_id is None
    with pytest.raises(IllegalSaslStateError):  # no second try on the same exchange
        server.evaluate_response(b"\0alice\0alice-secret")


@pytest.mark.unit
def test_plain_server_accepts_own_authorization_id():
    server = PlainServer({"alice": "alice-secret"})
    server.evaluate_response(b"alice\0alice\0alice-secret")
    assert server.authorization_id == "alice"


# --------------------------------------------------------------------------
# SASL/SCRAM (RFC 5802, KIP-84)
# --------------------------------------------------------------------------


def _run_scram(client, server) -> None:
    """Drive a client and a server object through a whole exchange the way
    SaslAuthenticate would carry the tokens."""
    token = client.initial_response()
    while token is not None:
        reply = server.evaluate_response(token)
        token = client.evaluate_challenge(reply)


@pytest.mark.unit
@pytest.mark.parametrize("mechanism", SCRAMS)
def test_scram_exchange_client_to_server(mechanism):
    credential = make_scram_credential(mechanism, "alice-secret")
    store = {"alice": credential}
    client = ScramClient(mechanism, "alice", "alice-secret")
    server = ScramServer(mechanism, store.get)
    first = client.initial_response()
    assert first.startswith(b"n,,n=alice,r=")  # no channel binding, as Kafka
    server_first = server.evaluate_response(first)
    assert re.fullmatch(rb"r=[^,]+,s=[A-Za-z0-9+/=]+,i=4096", server_first)
    client_final = client.evaluate_challenge(server_first)
    assert client_final.startswith(b"c=biws,r=")
    server_final = server.evaluate_response(client_final)
    assert server_final.startswith(b"v=")
    assert server.is_complete and server.authorization_id == "alice"
    assert client.evaluate_challenge(server_final) is None
    assert client.is_complete
    with pytest.raises(IllegalSaslStateError):
        client.evaluate_challenge(server_final)
    with pytest.raises(IllegalSaslStateError):
        server.evaluate_response(client_final)


@pytest.mark.unit
@pytest.mark.parametrize("mechanism", SCRAMS)
def test_scram_username_escaping(mechanism):
    store = {"a,b=c": make_scram_credential(mechanism, "pw")}
    client = ScramClient(mechanism, "a,b=c", "pw")
    server = ScramServer(mechanism, store.get)
    first = client.initial_response()
    assert first.startswith(b"n,,n=a=2Cb=3Dc,r=")  # RFC 5802 saslname escaping
    assert client.evaluate_challenge(server.evaluate_response(client.evaluate_challenge(server.evaluate_response(first)))) is None
    assert server.authorization_id == "a,b=c"


@pytest.mark.unit
@pytest.mark.parametrize("mechanism", SCRAMS)
def test_scram_our_client_against_scramp_server(mechanism):
    credential = make_scram_credential(mechanism, "pw", iterations=8192)
    server = scramp.ScramMechanism(mechanism).make_server(
        lambda user: (credential.salt, credential.stored_key, credential.server_key, credential.iterations)
    )
    client = ScramClient(mechanism, "alice", "pw")
    server.set_client_first(client.initial_response().decode())
    client_final = client.evaluate_challenge(server.get_server_first().encode())
    server.set_client_final(client_final.decode())
    assert client.evaluate_challenge(server.get_server_final().encode()) is None
    assert client.is_complete


@pytest.mark.unit
@pytest.mark.parametrize("mechanism", SCRAMS)
def test_scram_scramp_client_against_our_server(mechanism):
    salt, stored_key, server_key, iterations = scramp.ScramMechanism(mechanism).make_auth_info("pw")
    store = {"alice": ScramCredential(salt, stored_key, server_key, iterations)}
    server = ScramServer(mechanism, store.get)
    client = scramp.ScramClient([mechanism], "alice", "pw")
    server_first = server.evaluate_response(client.get_client_first().encode())
    client.set_server_first(server_first.decode())
    server_final = server.evaluate_response(client.get_client_final().encode())
    client.set_server_final(server_final.decode())  # raises if the server signature is wrong
    assert server.authorization_id == "alice"


@pytest.mark.unit
def test_scram_sha_256_rfc7677_test_vector():
    """RFC 7677 section 3: user "user", password "pencil"."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = make_scram_credential("SCRAM-SHA-256", "pencil", salt=salt)
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")
    server = ScramServer("SCRAM-SHA-256", {"user": credential}.get, nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    assert client.initial_response() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = server.evaluate_response(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert server_first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    client_final = client.evaluate_challenge(server_first)
    assert client_final == (
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    server_final = server.evaluate_response(client_final)
    assert server_final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert client.evaluate_challenge(server_final) is None


@pytest.mark.unit
@pytest.mark.parametrize("mechanism", SCRAMS)
def test_scram_wrong_password_and_unknown_user_fail_alike(mechanism):
    store = {"alice": make_scram_credential(mechanism, "alice-secret")}
    messages = []
    salts = []
    for user, password in (("alice", "wrong"), ("mallory", "alice-secret"), ("mallory", "other")):
        client = ScramClient(mechanism, user, password)
        server = ScramServer(mechanism, store.get)
        server_first = server.evaluate_response(client.initial_response())  # no early "no such user"
        salts.append((user, re.search(rb",s=([^,]+),", server_first).group(1)))
        with pytest.raises(SaslAuthenticationFailedError) as info:
            server.evaluate_response(client.evaluate_challenge(server_first))
        assert info.value.code == 58
        messages.append(str(info.value))
        assert not server.is_complete and server.authorization_id is None
        with pytest.raises(IllegalSaslStateError):
            server.evaluate_response(b"c=biws,r=x,p=eA==")
    assert len(set(messages)) == 1
    assert "mallory" not in messages[0] and "alice" not in messages[0]
    assert mechanism in messages[0]
    # The made-up salt of an unknown user is stable, like a real one.
    assert salts[1][1] == salts[2][1]


@pytest.mark.unit
@pytest.mark.parametrize("mechanism", SCRAMS)
def test_scram_failing_lookup_is_an_authentication_failure(mechanism):
    def lookup(user):
        raise RuntimeError("credential cache not ready")

    server = ScramServer(mechanism, lookup)
    with pytest.raises(SaslAuthenticationFailedError) as info:
        server.evaluate_response(ScramClient(mechanism, "alice", "pw").initial_response())
    assert "cache" not in str(info.value)


@pytest.mark.unit
@pytest.mark.parametrize("token", [b"", b"garbage", b"\xff\xfe", b"p=tls-unique,,n=alice,r=abc"])
def test_scram_server_refuses_malformed_client_first(token):
    server = ScramServer("SCRAM-SHA-256", {}.get)
    with pytest.raises(SaslAuthenticationFailedError):
        server.evaluate_response(token)


@pytest.mark.unit
@pytest.mark.parametrize("mechanism", SCRAMS)
def test_scram_client_checks_the_server(mechanism):
    """A server that does not hold the credential cannot forge server-final."""
    store = {"alice": make_scram_credential(mechanism, "pw")}
    client = ScramClient(mechanism, "alice", "pw")
    server = ScramServer(mechanism, store.get)
    client_final = client.evaluate_challenge(server.evaluate_response(client.initial_response()))
    server.evaluate_response(client_final)
    forged = b"v=" + base64.b64encode(b"\0" * hashlib.new(HASHES[mechanism]).digest_size)
    with pytest.raises(SaslAuthenticationFailedError):
        client.evaluate_challenge(forged)
    assert not client.is_complete

    client = ScramClient(mechanism, "alice", "pw")
    server = ScramServer(mechanism, store.get)
    client.evaluate_challenge(server.evaluate_response(client.initial_response()))
    with pytest.raises(SaslAuthenticationFailedError, match="invalid-proof"):
        client.evaluate_challenge(b"e=invalid-proof")


@pytest.mark.unit
def test_scram_client_refuses_too_few_iterations():
    client = ScramClient("SCRAM-SHA-256", "alice", "pw", nonce="abcdefgh")
    client.initial_response()
    salt = base64.b64encode(b"0123456789abcdef").decode()
    with pytest.raises(SaslAuthenticationFailedError, match="4096"):
        client.evaluate_challenge(f"r=abcdefghXYZ,s={salt},i=1024".encode())


@pytest.mark.unit
def test_client_mechanism_factory():
    assert isinstance(client_mechanism("PLAIN", "a", "b"), PlainClient)
    for mechanism in SCRAMS:
        mech = client_mechanism(mechanism, "a", "b")
        assert isinstance(mech, ScramClient) and mech.mechanism == mechanism
    with pytest.raises(UnsupportedSaslMechanismError):
        client_mechanism("GSSAPI", "a", "b")
    with pytest.raises(UnsupportedSaslMechanismError):
        ScramClient("SCRAM-SHA-1", "a", "b")


@pytest.mark.unit
def test_server_mechanism_factory():
    enabled = ("PLAIN", "SCRAM-SHA-512")
    assert isinstance(server_mechanism("PLAIN", enabled, plain_users={"a": "b"}), PlainServer)
    credential = make_scram_credential("SCRAM-SHA-512", "pw")
    server = server_mechanism("SCRAM-SHA-512", enabled, scram_lookup=lambda m, u: credential if m == "SCRAM-SHA-512" else None)
    _run_scram(ScramClient("SCRAM-SHA-512", "anyone", "pw"), server)
    with pytest.raises(UnsupportedSaslMechanismError) as info:
        server_mechanism("SCRAM-SHA-256", enabled, scram_lookup=lambda m, u: None)
    assert info.value.code == 33
    with pytest.raises(UnsupportedSaslMechanismError):
        server_mechanism("PLAIN", enabled)  # no users


# --------------------------------------------------------------------------
# SCRAM credentials as Kafka stores them
# --------------------------------------------------------------------------


def _rfc5802_credential(hash_name: str, password: str, salt: bytes, iterations: int) -> ScramCredential:
    """RFC 5802 section 3, computed here with hmac/hashlib only."""

    def mac(key: bytes, msg: bytes) -> bytes:
        return hmac.new(key, msg, hash_name).digest()

    u = mac(password.encode(), salt + b"\0\0\0\1")  # Hi(): U1 = HMAC(str, salt + INT(1))
    salted = u
    for _ in range(iterations - 1):
        u = mac(password.encode(), u)
        salted = bytes(a ^ b for a, b in zip(salted, u))
    assert salted == hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)
    client_key = mac(salted, b"Client Key")
    return ScramCredential(salt, hashlib.new(hash_name, client_key).digest(), mac(salted, b"Server Key"), iterations)


@pytest.mark.unit
@pytest.mark.parametrize("mechanism", SCRAMS)
def test_credential_matches_rfc5802_and_round_trips(mechanism):
    salt = b"kafka-salt-0123456789"
    credential = make_scram_credential(mechanism, "alice-secret", iterations=4096, salt=salt)
    assert credential == _rfc5802_credential(HASHES[mechanism], "alice-secret", salt, 4096)
    text = str(credential)

    def b64(raw: bytes) -> str:
        return base64.b64encode(raw).decode()

    assert text == (
        f"salt={b64(salt)},stored_key={b64(credential.stored_key)},"
        f"server_key={b64(credential.server_key)},iterations=4096"
    )
    assert ScramCredential.from_string(text) == credential
    reordered = ",".join(reversed(text.split(",")))
    assert ScramCredential.from_string(reordered) == credential
    assert "stored_key" not in repr(credential) and b64(credential.stored_key) not in repr(credential)


@pytest.mark.unit
def test_credential_random_salt_and_bounds():
    a = make_scram_credential("SCRAM-SHA-256", "pw")
    b = make_scram_credential("SCRAM-SHA-256", "pw")
    assert a.salt != b.salt and len(a.salt) >= 12 and a.iterations == 4096
    assert make_scram_credential("SCRAM-SHA-256", "pw", iterations=16384).iterations == 16384
    for iterations in (4095, 16385):
        with pytest.raises(ConfigError, match="iterations"):
            make_scram_credential("SCRAM-SHA-256", "pw", iterations=iterations)
    with pytest.raises(ConfigError):
        make_scram_credential("SCRAM-SHA-256", "pw", salt=b"short")
    with pytest.raises(UnsupportedSaslMechanismError):
        make_scram_credential("PLAIN", "pw")


@pytest.mark.unit
@pytest.mark.parametrize(
    "text",
    [
        "salt=c2FsdA==,stored_key=a2V5,server_key=a2V5",  # no iterations
        "salt=c2FsdA==,stored_key=a2V5,server_key=a2V5,iterations=4096,extra=1",
        "salt=c2FsdA==,salt=c2FsdA==,stored_key=a2V5,server_key=a2V5,iterations=4096",
        "salt=not base64!,stored_key=a2V5,server_key=a2V5,iterations=4096",
        "salt=c2FsdA==,stored_key=a2V5,server_key=a2V5,iterations=many",
        "salt=c2FsdA==,stored_key=a2V5,server_key=a2V5,iterations=0",
        "salt=,stored_key=a2V5,server_key=a2V5,iterations=4096",
        "garbage",
        "",
    ],
)
def test_credential_string_errors(text):
    with pytest.raises(ConfigError, match="SCRAM credential"):
        ScramCredential.from_string(text)


@pytest.mark.unit
def test_zookeeper_user_config():
    c256 = make_scram_credential("SCRAM-SHA-256", "alice-secret")
    c512 = make_scram_credential("SCRAM-SHA-512", "alice-secret")
    data = scram_user_config({"SCRAM-SHA-256": c256, "SCRAM-SHA-512": c512}, {"producer_byte_rate": "1024"})
    node = json.loads(data)
    assert node == {
        "version": 1,
        "config": {"producer_byte_rate": "1024", "SCRAM-SHA-256": str(c256), "SCRAM-SHA-512": str(c512)},
    }
    assert parse_scram_user_config(data) == {"SCRAM-SHA-256": c256, "SCRAM-SHA-512": c512}
    # As kafka-configs writes it: the exchange works from the parsed node.
    kafka_node = (
        '{"version":1,"config":{"SCRAM-SHA-256":"' + str(c256) + '"}}'
    )
    store = parse_scram_user_config(kafka_node.encode())
    server = ScramServer("SCRAM-SHA-256", lambda user: store.get("SCRAM-SHA-256") if user == "alice" else None)
    _run_scram(ScramClient("SCRAM-SHA-256", "alice", "alice-secret"), server)
    assert parse_scram_user_config(b'{"version":1,"config":{"consumer_byte_rate":"1"}}') == {}
    for bad in (b"not json", b'{"version":2,"config":{}}', b"[]", b'{"version":1,"config":{"SCRAM-SHA-256":"x=1"}}'):
        with pytest.raises(ConfigError, match="/config/users/alice"):
            parse_scram_user_config(bad, path="/config/users/alice")
    with pytest.raises(UnsupportedSaslMechanismError):
        scram_user_config({"PLAIN": c256})


@pytest.mark.unit
def test_zookeeper_user_path_is_sanitized_like_kafka():
    assert scram_user_path("alice") == "/config/users/alice"
    assert scram_user_path("User:a b*c~d+e/f.g-h_i") == "/config/users/User%3Aa%20b%2Ac%7Ed%2Be%2Ff.g-h_i"
    assert scram_user_path("jörg") == "/config/users/j%C3%B6rg"


# --------------------------------------------------------------------------
# JAAS
# --------------------------------------------------------------------------


@pytest.mark.unit
def test_jaas_plain_users():
    text = (
        'org.apache.kafka.common.security.plain.PlainLoginModule required\n'
        '    username="admin" password="admin-secret"\n'
        '    user_admin="admin-secret"\n'
        '    user_alice="alice-secret";'
    )
    entry = parse_jaas_config(text)
    assert entry.login_module == PLAIN_LOGIN_MODULE and entry.control_flag == "required"
    assert jaas_plain_users(entry) == {"admin": "admin-secret", "alice": "alice-secret"}
    assert jaas_username_password(entry) == ("admin", "admin-secret")
    assert "admin-secret" not in repr(entry)


@pytest.mark.unit
def test_jaas_tokenizer_rules():
    text = (
        "/* broker users */ org.apache.kafka.common.security.plain.PlainLoginModule REQUIRED // flag\n"
        "user_bob='b;o=b' user_carol=unquoted-value.1 user_dave=\"say \\\"hi\\\"\\n\" ;  "
    )
    entry = parse_jaas_config(text)
    assert entry.control_flag == "required"
    assert jaas_plain_users(entry) == {"bob": "b;o=b", "carol": "unquoted-value.1", "dave": 'say "hi"\n'}


@pytest.mark.unit
def test_jaas_scram_login_module():
    entry = parse_jaas_config(
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";'
    )
    assert entry.login_module == SCRAM_LOGIN_MODULE
    assert jaas_username_password(entry) == ("alice", "alice-secret")
    with pytest.raises(ConfigError, match="sasl.jaas.config.*PlainLoginModule"):
        jaas_plain_users(entry)


@pytest.mark.unit
@pytest.mark.parametrize(
    "text, why",
    [
        ("", "login module not specified"),
        ("   // nothing\n", "login module not specified"),
        ("org.Foo", "control flag not specified"),
        ("org.Foo mandatory;", "invalid login module control flag"),
        ('org.Foo required user_a="secret-a"', "not terminated by a semicolon"),
        ("org.Foo required user_a=;", "value not specified for key 'user_a'"),
        ("org.Foo required user_a;", "value not specified for key 'user_a'"),
        ('org.Foo required user_a="x" user_a="y";', "given twice"),
        ('org.Foo required user_a="secret-a', "unterminated quoted value"),
        ("org.Foo required; org.Bar required;", "expected one login module, found 2"),
        ("org.Foo required /* open", "unterminated /\\* comment"),
        ("= required;", "expected a login module class name"),
    ],
)
def test_jaas_errors_name_the_property(text, why):
    prop = "listener.name.sasl_ssl.plain.sasl.jaas.config"
    with pytest.raises(ConfigError, match=why) as info:
        parse_jaas_config(text, prop)
    assert prop in str(info.value)
    assert "secret-a" not in str(info.value)


@pytest.mark.unit
def test_jaas_username_password_errors():
    entry = parse_jaas_config("org.apache.kafka.common.security.scram.ScramLoginModule required username=alice;")
    with pytest.raises(ConfigError, match="option password"):
        jaas_username_password(entry)
    with pytest.raises(ConfigError, match="ScramLoginModule"):
        jaas_username_password(parse_jaas_config("com.sun.security.auth.module.Krb5LoginModule required;"))


# --------------------------------------------------------------------------
# client settings
# --------------------------------------------------------------------------


@pytest.mark.unit
def test_client_settings_defaults():
    settings = ClientSecurity.from_properties({"metadata.broker.list": "h:9092", "sasl.username": "ignored"})
    assert settings.security_protocol is SecurityProtocol.PLAINTEXT
    assert not settings.security_protocol.uses_ssl and not settings.security_protocol.uses_sasl
    assert settings.sasl_username is None  # sasl.* ignored without SASL
    with pytest.raises(ConfigError, match="does not use SASL"):
        settings.sasl_client()
    with pytest.raises(ConfigError, match="does not use TLS"):
        client_ssl_context(settings)


@pytest.mark.unit
def test_client_settings_sasl_ssl():
    settings = ClientSecurity.from_properties(
        {
            "security.protocol": "sasl_ssl",
            "ssl.ca.location": " /etc/kafka/ca.pem ",
            "ssl.certificate.location": "/etc/kafka/client.pem",
            "ssl.key.location": "/etc/kafka/client.key",
            "ssl.key.password": "key-secret",
            "sasl.mechanism": "scram-sha-512",
            "sasl.username": "alice",
            "sasl.password": "alice-secret",
        }
    )
    assert settings.security_protocol is SecurityProtocol.SASL_SSL
    assert settings.ssl_ca_location == "/etc/kafka/ca.pem"
    assert settings.ssl_key_password == "key-secret"
    assert settings.check_hostname
    assert settings.sasl_mechanism == "SCRAM-SHA-512"
    assert "alice-secret" not in repr(settings) and "key-secret" not in repr(settings)
    mech = settings.sasl_client()
    assert isinstance(mech, ScramClient) and mech.mechanism == "SCRAM-SHA-512"
    assert settings.sasl_client() is not mech  # one per connection


@pytest.mark.unit
def test_client_settings_aliases_and_jaas():
    settings = ClientSecurity.from_properties(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN",
            "sasl.jaas.config": f'{PLAIN_LOGIN_MODULE} required username="alice" password="alice-secret";',
        }
    )
    assert (settings.sasl_mechanism, settings.sasl_username, settings.sasl_password) == ("PLAIN", "alice", "alice-secret")
    assert settings.sasl_client().initial_response() == b"\0alice\0alice-secret"
    ssl_settings = ClientSecurity.from_properties({"security.protocol": "SSL", "ssl.cafile": "/ca.pem"})
    assert ssl_settings.ssl_ca_location == "/ca.pem"
    with pytest.raises(ConfigError, match="ssl.ca.location and ssl.cafile"):
        ClientSecurity.from_properties({"security.protocol": "SSL", "ssl.ca.location": "/a", "ssl.cafile": "/b"})


@pytest.mark.unit
@pytest.mark.parametrize(
    "value, check", [("https", True), ("HTTPS", True), ("", False), ("none", False), (None, False)]
)
def test_client_settings_endpoint_identification(value, check):
    settings = ClientSecurity.from_properties({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": value})
    assert settings.check_hostname is check


@pytest.mark.unit
@pytest.mark.parametrize(
    "props, error, prop",
    [
        ({"security.protocol": "TLS"}, ConfigError, "security.protocol"),
        ({"security.protocol": 3}, ConfigError, "security.protocol"),
        ({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "ldaps"}, ConfigError,
         "ssl.endpoint.identification.algorithm"),
        ({"security.protocol": "SSL", "ssl.key.location": "/k.pem"}, ConfigError, "ssl.certificate.location"),
        ({"security.protocol": "SASL_SSL", "sasl.username": "a", "sasl.password": "b"}, ConfigError, "sasl.mechanism"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.password": "b"}, ConfigError,
         "sasl.username"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "a"}, ConfigError,
         "sasl.password"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "DIGEST-MD5", "sasl.username": "a", "sasl.password": "b"},
         ConfigError, "sasl.mechanism"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"}, NotSupportedError, "sasl.mechanism"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": "nonsense"}, ConfigError,
         "sasl.jaas.config"),
    ],
)
def test_client_settings_errors_name_the_property(props, error, prop):
    with pytest.raises(error) as info:
        ClientSecurity.from_properties(props)
    assert prop in str(info.value)


# --------------------------------------------------------------------------
# broker listeners
# --------------------------------------------------------------------------


@pytest.mark.unit
def test_listeners_with_map():
    listeners = parse_listeners(
        "SASL_SSL://127.0.0.1:9093,PLAINTEXT://:9092, internal://[::1]:9094",
        "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,INTERNAL:sasl_plaintext",
    )
    assert [tuple(e) for e in listeners] == [
        ("SASL_SSL", SecurityProtocol.SASL_SSL, "127.0.0.1", 9093),
        ("PLAINTEXT", SecurityProtocol.PLAINTEXT, "", 9092),
        ("INTERNAL", SecurityProtocol.SASL_PLAINTEXT, "::1", 9094),
    ]
    name, protocol, host, port = listeners[2]
    assert (name, protocol, host, port) == ("INTERNAL", "SASL_PLAINTEXT", "::1", 9094)
    assert listeners[2].config_prefix == "listener.name.internal."


@pytest.mark.unit
def test_listeners_default_map():
    listeners = parse_listeners(["SSL://broker.test:0", "SASL_PLAINTEXT://0.0.0.0:0", "PLAINTEXT://h:1"])
    assert [(e.name, e.protocol) for e in listeners] == [
        ("SSL", SecurityProtocol.SSL),
        ("SASL_PLAINTEXT", SecurityProtocol.SASL_PLAINTEXT),
        ("PLAINTEXT", SecurityProtocol.PLAINTEXT),
    ]
    assert parse_security_protocol_map(None) == {p.value: p for p in SecurityProtocol}
    assert parse_security_protocol_map({"a": "ssl"}) == {"A": SecurityProtocol.SSL}


@pytest.mark.unit
@pytest.mark.parametrize(
    "listeners, protocol_map, prop, why",
    [
        ("EXTERNAL://h:9092", None, "listener.security.protocol.map", "No security protocol defined for listener EXTERNAL"),
        ("PLAINTEXT://h:9092", "EXTERNAL:SSL", "listener.security.protocol.map", "listener PLAINTEXT"),
        ("SSL://h:9092", "SSL:TLS", "listener.security.protocol.map", "expected one of"),
        ("SSL://h:9092", "SSL", "listener.security.protocol.map", "NAME:PROTOCOL"),
        ("SSL://h:9092", "SSL:SSL,ssl:SSL", "listener.security.protocol.map", "mapped twice"),
        ("h:9092", None, "listeners", "is not NAME://host:port"),
        ("SSL://h", None, "listeners", "is not NAME://host:port"),
        ("SSL://h:-1", None, "listeners", "is not NAME://host:port"),
        ("SSL://h:65536", None, "listeners", "not in 0..65535"),
        ("SSL://h:1,SSL://g:2", None, "listeners", "given twice"),
        ("SSL://h:1,PLAINTEXT://g:1", None, "listeners", "port 1 is used by two listeners"),
        ("", None, "listeners", "at least one"),
    ],
)
def test_listener_errors(listeners, protocol_map, prop, why):
    with pytest.raises(ConfigError, match=why) as info:
        parse_listeners(listeners, protocol_map)
    assert prop in str(info.value)


@pytest.mark.unit
def test_two_listeners_may_both_pick_a_free_port():
    assert [e.port for e in parse_listeners("SSL://:0,PLAINTEXT://:0")] == [0, 0]


@pytest.mark.unit
def test_listener_security_from_properties():
    props = {
        "listeners": "SASL_SSL://127.0.0.1:9093,SSL://127.0.0.1:9094,PLAINTEXT://127.0.0.1:9092",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": "/etc/kafka/broker.pem",
        "ssl.key.password": "key-secret",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/etc/kafka/ca.pem",
        "listener.name.ssl.ssl.client.auth": "REQUIRED",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": f'{PLAIN_LOGIN_MODULE} required user_alice="alice-secret";',
    }
    sasl_ssl, ssl_, plaintext = broker_listener_security(props)
    assert sasl_ssl.ssl_keystore_location == "/etc/kafka/broker.pem"
    assert sasl_ssl.ssl_key_password == "key-secret"
    assert sasl_ssl.ssl_client_auth is SslClientAuth.NONE
    props["ssl.client.auth"] = "requested"  # KIP-684: not for SASL_SSL unless listener-prefixed
    assert broker_listener_security(props)[0].ssl_client_auth is SslClientAuth.NONE
    assert broker_listener_security(props)[1].ssl_client_auth is SslClientAuth.REQUIRED  # prefixed wins
    props["listener.name.sasl_ssl.ssl.client.auth"] = "required"
    assert broker_listener_security(props)[0].ssl_client_auth is SslClientAuth.REQUIRED
    assert sasl_ssl.sasl_enabled_mechanisms == ("PLAIN", "SCRAM-SHA-256")
    assert dict(sasl_ssl.plain_users) == {"alice": "alice-secret"}
    assert "alice-secret" not in repr(sasl_ssl) and "key-secret" not in repr(sasl_ssl)
    assert ssl_.ssl_client_auth is SslClientAuth.REQUIRED
    assert ssl_.sasl_enabled_mechanisms == () and ssl_.ssl_truststore_location == "/etc/kafka/ca.pem"
    assert plaintext.ssl_keystore_location is None and plaintext.sasl_enabled_mechanisms == ()


@pytest.mark.unit
def test_listener_security_global_jaas_and_keystore_password_fallback():
    endpoint = parse_listeners("SASL_SSL://:0")[0]
    props = {
        "ssl.keystore.location": "/ks.pem",
        "ssl.keystore.password": "key-secret",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "plain",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.jaas.config": f'{PLAIN_LOGIN_MODULE} required user_bob="bob-secret";',
    }
    security = ListenerSecurity.from_properties(props, endpoint)
    assert security.ssl_key_password == "key-secret"
    assert security.sasl_enabled_mechanisms == ("PLAIN",)
    assert dict(security.plain_users) == {"bob": "bob-secret"}


@pytest.mark.unit
@pytest.mark.parametrize(
    "extra, error, prop",
    [
        ({"ssl.keystore.location": None}, ConfigError, "ssl.keystore.location"),
        ({"ssl.keystore.type": "JKS"}, NotSupportedError, "ssl.keystore.type"),
        ({"listener.name.sasl_ssl.ssl.truststore.type": "PKCS12"}, NotSupportedError,
         "listener.name.sasl_ssl.ssl.truststore.type"),
        ({"ssl.truststore.password": "x"}, ConfigError, "ssl.truststore.password"),
        ({"ssl.keystore.key": "-----BEGIN"}, NotSupportedError, "ssl.keystore.key"),
        ({"ssl.client.auth": "maybe"}, ConfigError, "ssl.client.auth"),
        ({"sasl.enabled.mechanisms": None}, NotSupportedError, "sasl.enabled.mechanisms"),
        ({"sasl.enabled.mechanisms": "GSSAPI"}, NotSupportedError, "sasl.enabled.mechanisms"),
        ({"sasl.enabled.mechanisms": "CRAM-MD5"}, ConfigError, "sasl.enabled.mechanisms"),
        ({"sasl.enabled.mechanisms": " , "}, ConfigError, "sasl.enabled.mechanisms"),
        ({"sasl.enabled.mechanisms": "PLAIN"}, ConfigError, "listener.name.sasl_ssl.plain.sasl.jaas.config"),
        ({"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": "org.Foo required"}, ConfigError,
         "sasl.jaas.config"),
        ({"sasl.enabled.mechanisms": "PLAIN",
          "listener.name.sasl_ssl.plain.sasl.jaas.config": f"{SCRAM_LOGIN_MODULE} required username=a password=b;"},
         ConfigError, "listener.name.sasl_ssl.plain.sasl.jaas.config"),
    ],
)
def test_listener_security_errors_name_the_property(extra, error, prop):
    props = {"ssl.keystore.location": "/ks.pem", "sasl.enabled.mechanisms": "SCRAM-SHA-256"}
    props.update(extra)
    props = {k: v for k, v in props.items() if v is not None}
    with pytest.raises(error) as info:
        ListenerSecurity.from_properties(props, parse_listeners("SASL_SSL://:0")[0])
    assert prop in str(info.value)


@pytest.mark.unit
def test_broker_listener_security_requires_listeners():
    with pytest.raises(ConfigError, match="listeners"):
        broker_listener_security({})


# --------------------------------------------------------------------------
# TLS
# --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A CA, a stranger CA, a broker keystore (KIP-651: key + chain in one
    PEM file, plain and encrypted) and a client certificate."""
    from cryptography.hazmat.primitives import serialization

    root = tmp_path_factory.mktemp("pki")
    ca, stranger = trustme.CA(), trustme.CA()
    broker = ca.issue_cert("broker.test", "127.0.0.1")
    client = ca.issue_cert("client.test")
    stranger_client = stranger.issue_cert("client.test")
    paths = {
        "ca": root / "ca.pem",
        "stranger_ca": root / "stranger-ca.pem",
        "keystore": root / "broker.pem",
        "keystore_encrypted": root / "broker-encrypted.pem",
        "client": root / "client.pem",
        "client_cert": root / "client-cert.pem",
        "client_key": root / "client-key.pem",
        "stranger_client": root / "stranger-client.pem",
    }
    ca.cert_pem.write_to_path(str(paths["ca"]))
    stranger.cert_pem.write_to_path(str(paths["stranger_ca"]))
    broker.private_key_and_cert_chain_pem.write_to_path(str(paths["keystore"]))
    client.private_key_and_cert_chain_pem.write_to_path(str(paths["client"]))
    stranger_client.private_key_and_cert_chain_pem.write_to_path(str(paths["stranger_client"]))
    client.private_key_pem.write_to_path(str(paths["client_key"]))
    paths["client_cert"].write_bytes(b"".join(blob.bytes() for blob in client.cert_chain_pems))
    key = serialization.load_pem_private_key(broker.private_key_pem.bytes(), password=None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"key-secret"),
    )
    paths["keystore_encrypted"].write_bytes(encrypted + b"".join(blob.bytes() for blob in broker.cert_chain_pems))
    return {k: str(v) for k, v in paths.items()}


def _client(pki, **props) -> ssl.SSLContext:
    base = {"security.protocol": "SSL", "ssl.ca.location": pki["ca"]}
    base.update(props)
    return client_ssl_context(ClientSecurity.from_properties({k: v for k, v in base.items() if v is not None}))


def _server(pki, **props) -> ssl.SSLContext:
    base = {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "PEM", "ssl.keystore.location": pki["keystore"]}
    base.update(props)
    (listener,) = broker_listener_security({k: v for k, v in base.items() if v is not None})
    return server_ssl_context(listener)


def _handshake(client_ctx: ssl.SSLContext, server_ctx: ssl.SSLContext, host: str) -> dict:
    """A TLS handshake and one round trip over a real socket pair: the
    broker side in a thread, the client in this one. Returns what each side
    got: the echoed bytes (client), the peer certificate (server), or the
    `ssl.SSLError` / `OSError` each side raised."""
    client_sock, server_sock = socket.socketpair()
    client_sock.settimeout(20)
    server_sock.settimeout(20)
    result: dict = {}

    def serve() -> None:
        try:
            with server_ctx.wrap_socket(server_sock, server_side=True) as tls:
                result["server_peer"] = tls.getpeercert()
                result["server_version"] = tls.version()
                tls.sendall(tls.recv(4).upper())
        except (ssl.SSLError, OSError) as exc:
            result["server_error"] = exc
        finally:
            server_sock.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with client_ctx.wrap_socket(client_sock, server_hostname=host) as tls:
            tls.sendall(b"ping")
            reply = tls.recv(4)
            if reply:
                result["client_reply"] = reply
            else:
                result["client_error"] = ConnectionResetError("closed by the broker")
    except (ssl.SSLError, OSError) as exc:
        result["client_error"] = exc
    finally:
        client_sock.close()
        thread.join(20)
    assert not thread.is_alive()
    return result


@pytest.mark.unit
def test_tls_handshake_succeeds(pki):
    client_ctx, server_ctx = _client(pki), _server(pki)
    assert client_ctx.minimum_version == server_ctx.minimum_version == MINIMUM_TLS_VERSION == ssl.TLSVersion.TLSv1_2
    assert client_ctx.verify_mode == ssl.CERT_REQUIRED and client_ctx.check_hostname
    assert server_ctx.verify_mode == ssl.CERT_NONE
    result = _handshake(client_ctx, server_ctx, "broker.test")
    assert result["client_reply"] == b"PING"
    assert result["server_version"] in ("TLSv1.2", "TLSv1.3")
    assert not result["server_peer"]  # no client certificate asked for
    assert _handshake(client_ctx, server_ctx, "127.0.0.1")["client_reply"] == b"PING"


@pytest.mark.unit
def test_tls_untrusted_ca_fails(pki):
    result = _handshake(_client(pki, **{"ssl.ca.location": pki["stranger_ca"]}), _server(pki), "broker.test")
    assert "client_reply" not in result
    exc = result["client_error"]
    assert isinstance(exc, ssl.SSLCertVerificationError)
    error = ssl_authentication_error(exc, host="broker.test")
    assert isinstance(error, SslAuthenticationError)
    assert "broker.test" in str(error) and "not trusted" in str(error) and "ssl.ca.location" in str(error)


@pytest.mark.unit
def test_tls_host_name_mismatch_fails_unless_check_disabled(pki):
    result = _handshake(_client(pki), _server(pki), "other.test")
    exc = result["client_error"]
    error = ssl_authentication_error(exc, host="other.test")
    assert "host name mismatch" in str(error) and "ssl.endpoint.identification.algorithm" in str(error)
    for algorithm in ("", "none"):
        client_ctx = _client(pki, **{"ssl.endpoint.identification.algorithm": algorithm})
        assert not client_ctx.check_hostname and client_ctx.verify_mode == ssl.CERT_REQUIRED
        assert _handshake(client_ctx, _server(pki), "other.test")["client_reply"] == b"PING"
    # Without the host-name check the CA is still checked.
    client_ctx = _client(pki, **{"ssl.endpoint.identification.algorithm": "", "ssl.ca.location": pki["stranger_ca"]})
    assert "client_reply" not in _handshake(client_ctx, _server(pki), "other.test")


@pytest.mark.unit
def test_mutual_tls_required(pki):
    server_ctx = _server(pki, **{"ssl.client.auth": "required", "ssl.truststore.location": pki["ca"]})
    assert server_ctx.verify_mode == ssl.CERT_REQUIRED
    # No client certificate: refused.
    result = _handshake(_client(pki), server_ctx, "broker.test")
    assert "client_reply" not in result
    assert isinstance(result["server_error"], ssl.SSLError)
    assert "no certificate" in str(ssl_authentication_error(result["server_error"]))
    client_error = result["client_error"]
    if isinstance(client_error, ssl.SSLError):  # TLS 1.3: the alert arrives on the first read
        assert "certificate" in str(ssl_authentication_error(client_error, host="broker.test"))
    # A certificate from another CA: refused.
    result = _handshake(_client(pki, **{"ssl.certificate.location": pki["stranger_client"]}), server_ctx, "broker.test")
    assert "client_reply" not in result and "server_error" in result
    # Our CA's certificate, key and chain in one file, or in two files: accepted.
    for props in (
        {"ssl.certificate.location": pki["client"]},
        {"ssl.certificate.location": pki["client_cert"], "ssl.key.location": pki["client_key"]},
    ):
        result = _handshake(_client(pki, **props), server_ctx, "broker.test")
        assert result["client_reply"] == b"PING"
        assert result["server_peer"]["subjectAltName"] == (("DNS", "client.test"),)


@pytest.mark.unit
def test_eof_during_handshake_names_the_likely_causes():
    """A bare close during the handshake (how a TLS 1.3 server's refusal of
    a missing client certificate can reach the client) is not reported as a
    TLS version problem."""
    text = str(ssl_authentication_error(ssl.SSLEOFError(8, "EOF occurred in violation of protocol (_ssl.c:2427)"), host="broker.test"))
    assert "closed the connection during the handshake" in text
    assert "ssl.certificate.location" in text
    assert "TLS version" not in text


@pytest.mark.unit
def test_mutual_tls_requested(pki):
    server_ctx = _server(pki, **{"ssl.client.auth": "requested", "ssl.truststore.location": pki["ca"]})
    assert server_ctx.verify_mode == ssl.CERT_OPTIONAL
    result = _handshake(_client(pki), server_ctx, "broker.test")
    assert result["client_reply"] == b"PING" and not result["server_peer"]
    result = _handshake(_client(pki, **{"ssl.certificate.location": pki["client"]}), server_ctx, "broker.test")
    assert result["client_reply"] == b"PING" and result["server_peer"]


@pytest.mark.unit
def test_encrypted_keystore(pki):
    server_ctx = _server(pki, **{"ssl.keystore.location": pki["keystore_encrypted"], "ssl.key.password": "key-secret"})
    assert _handshake(_client(pki), server_ctx, "broker.test")["client_reply"] == b"PING"
    with pytest.raises(ConfigError, match="ssl.key.password") as info:
        _server(pki, **{"ssl.keystore.location": pki["keystore_encrypted"], "ssl.key.password": "wrong"})
    assert "wrong" not in str(info.value)
    with pytest.raises(ConfigError, match="Missing required configuration ssl.key.password"):
        _server(pki, **{"ssl.keystore.location": pki["keystore_encrypted"]})


@pytest.mark.unit
def test_tls_file_errors_name_the_property(pki, tmp_path):
    missing = str(tmp_path / "missing.pem")
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello\n")
    with pytest.raises(ConfigError, match="ssl.ca.location"):
        _client(pki, **{"ssl.ca.location": missing})
    with pytest.raises(ConfigError, match="ssl.ca.location"):
        _client(pki, **{"ssl.ca.location": str(not_pem)})
    with pytest.raises(ConfigError, match="ssl.certificate.location"):
        _client(pki, **{"ssl.certificate.location": missing})
    with pytest.raises(ConfigError, match="ssl.key.location"):
        _client(pki, **{"ssl.certificate.location": pki["client_cert"], "ssl.key.location": missing})
    with pytest.raises(ConfigError, match="ssl.key.location|ssl.certificate.location"):
        _client(pki, **{"ssl.certificate.location": pki["client_cert"]})  # no key anywhere
    with pytest.raises(ConfigError, match="ssl.keystore.location"):
        _server(pki, **{"ssl.keystore.location": missing})
    with pytest.raises(ConfigError, match="ssl.keystore.location"):
        _server(pki, **{"ssl.keystore.location": str(not_pem)})
    with pytest.raises(ConfigError, match="ssl.truststore.location"):
        _server(pki, **{"ssl.client.auth": "required", "ssl.truststore.location": missing})


@pytest.mark.unit
def test_tls_contexts_refuse_non_tls_settings(pki):
    plaintext = ListenerSecurity(listener=ListenerEndpoint("PLAINTEXT", SecurityProtocol.PLAINTEXT, "", 0))
    with pytest.raises(ConfigError, match="does not use TLS"):
        server_ssl_context(plaintext)


def test_tls_ca_directory(pki, tmp_path):
    """``ssl.ca.location`` may be an OpenSSL hashed CA directory."""
    import shutil
    import subprocess

    openssl = shutil.which("openssl")
    from helpers.skips import require

    require(None if openssl else "not on PATH", name="openssl", needs="needs the openssl command to hash a CA directory")
    name = subprocess.run(
        [openssl, "x509", "-hash", "-noout", "-in", pki["ca"]], check=True, capture_output=True, text=True
    ).stdout.strip()
    shutil.copy(pki["ca"], tmp_path / f"{name}.0")
    client_ctx = _client(pki, **{"ssl.ca.location": str(tmp_path)})
    assert _handshake(client_ctx, _server(pki), "broker.test")["client_reply"] == b"PING"


@pytest.mark.unit
def test_listeners_from_tuples_and_typed_protocol():
    listeners = parse_listeners([("ssl", "::1", 9093), ("PLAINTEXT", "", 9092)])
    assert [tuple(e) for e in listeners] == [("SSL", "SSL", "::1", 9093), ("PLAINTEXT", "PLAINTEXT", "", 9092)]
    assert ClientSecurity(security_protocol="ssl").security_protocol is SecurityProtocol.SSL
    typed = ClientSecurity(security_protocol="SASL_SSL", sasl_mechanism="plain", sasl_username="a", sasl_password="b")
    assert typed.sasl_mechanism == "PLAIN" and isinstance(typed.sasl_client(), PlainClient)
    with pytest.raises(ConfigError, match="security.protocol"):
        ClientSecurity(security_protocol="TLS")
