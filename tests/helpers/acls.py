"""ACL test helpers: brokers with kclient's authorizer, raw connections that
log in as a SASL PLAIN user or present a TLS client certificate, and the
ACL requests (CreateAcls / DescribeAcls / DeleteAcls) sent raw.

The brokers serve a PLAINTEXT listener first (the inter-broker one: its
principal, ``User:ANONYMOUS``, is in ``super.users``, as a Kafka cluster
with a PLAINTEXT inter-broker listener needs), a SASL_PLAINTEXT listener
for the users of `PLAIN_USERS` and, with certificates, an MTLS listener.
"""

from __future__ import annotations

import ssl
from typing import Any

from helpers.raw import SocketClient
from kclient.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from kclient.protocol.messages import CREATE_ACLS, DELETE_ACLS, DESCRIBE_ACLS, SASL_AUTHENTICATE, SASL_HANDSHAKE
from kclient.testing import security_properties

PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}

#: The authorizer properties of the ACL tests' brokers.
AUTHORIZER_PROPS = {
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "super.users": "User:admin;User:ANONYMOUS",
}


def acl_broker_properties(certs: Any = None, *, mapping_rules: str | None = None) -> dict[str, str]:
    """Properties of a broker with the authorizer and the test listeners."""
    listeners = ["PLAINTEXT", "SASL_PLAINTEXT"] + (["MTLS:SSL"] if certs is not None else [])
    props = security_properties(certs, listeners=listeners, mechanisms=["PLAIN"], plain_users=PLAIN_USERS)
    props.update(AUTHORIZER_PROPS)
    if mapping_rules is not None:
        props["ssl.principal.mapping.rules"] = mapping_rules
    return props


def sasl_client(broker: Any, user: str, *, timeout: float = 15) -> SocketClient:
    """A raw connection to the SASL_PLAINTEXT listener, logged in as ``user``."""
    host, port = broker.bootstrap_for("SASL_PLAINTEXT").rsplit(":", 1)
    client = SocketClient(host, int(port), client_id=f"acl-test-{user}", timeout=timeout)
    assert client.request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})["error_code"] == 0
    token = f"\0{user}\0{PLAIN_USERS[user]}".encode()
    answer = client.request(SASL_AUTHENTICATE, 1, {"auth_bytes": token})
    assert answer["error_code"] == 0, answer
    return client


def tls_client(broker: Any, certs: Any, name: str, *, timeout: float = 15) -> SocketClient:
    """A raw connection to the MTLS listener with the client certificate ``CN=name``."""
    host, port = broker.bootstrap_for("MTLS").rsplit(":", 1)
    client = SocketClient(host, int(port), client_id=f"acl-test-tls-{name}", timeout=timeout)
    cert = certs.client_certificate(name)
    context = ssl.create_default_context(cafile=certs.truststore_location)
    context.load_cert_chain(cert.certificate_location, cert.key_location)
    client.sock = context.wrap_socket(client.sock, server_hostname=host)
    return client


def binding(
    resource_type: ResourceType,
    name: str,
    principal: str,
    operation: AclOperation,
    permission: AclPermissionType = AclPermissionType.ALLOW,
    *,
    pattern: PatternType = PatternType.LITERAL,
    host: str = "*",
) -> dict[str, Any]:
    """A CreateAcls ``AclCreation`` as a dict."""
    return {
        "resource_type": int(resource_type),
        "resource_name": name,
        "resource_pattern_type": int(pattern),
        "principal": principal,
        "host": host,
        "operation": int(operation),
        "permission_type": int(permission),
    }


def create_acls(client: SocketClient, *bindings: dict[str, Any], version: int = 3) -> list[dict[str, Any]]:
    """CreateAcls; the per-binding results."""
    results: list[dict[str, Any]] = client.request(CREATE_ACLS, version, {"creations": list(bindings)})["results"]
    return results


def acl_filter(
    resource_type: ResourceType = ResourceType.ANY,
    name: str | None = None,
    *,
    pattern: PatternType = PatternType.ANY,
    principal: str | None = None,
    host: str | None = None,
    operation: AclOperation = AclOperation.ANY,
    permission: AclPermissionType = AclPermissionType.ANY,
) -> dict[str, Any]:
    """A DescribeAcls request / DeleteAcls filter as a dict."""
    return {
        "resource_type_filter": int(resource_type),
        "resource_name_filter": name,
        "pattern_type_filter": int(pattern),
        "principal_filter": principal,
        "host_filter": host,
        "operation": int(operation),
        "permission_type": int(permission),
    }


def describe_acls(client: SocketClient, flt: dict[str, Any] | None = None, *, version: int = 3) -> dict[str, Any]:
    """DescribeAcls; the whole response."""
    return client.request(DESCRIBE_ACLS, version, flt or acl_filter())


def delete_acls(client: SocketClient, *filters: dict[str, Any], version: int = 3) -> list[dict[str, Any]]:
    """DeleteAcls; the per-filter results."""
    results: list[dict[str, Any]] = client.request(DELETE_ACLS, version, {"filters": list(filters)})["filter_results"]
    return results
