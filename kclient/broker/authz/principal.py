"""Who is asking: the principal and client address of a request (Kafka's
``RequestContext`` / ``KafkaPrincipal``), and the TLS principal mapping
rules (``ssl.principal.mapping.rules``, KIP-371; Kafka's
``SslPrincipalMapper``).

A connection's principal is ``User:<name>``: the SASL authorization id
(`kclient.broker.security.SaslAuthenticator`), else the subject of a TLS
client certificate mapped by the rules, else ``User:ANONYMOUS`` (Kafka's
``KafkaPrincipal.ANONYMOUS``, PLAINTEXT and TLS without a certificate).

Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from kclient.errors import ConfigError

__all__ = ["ANONYMOUS", "DEFAULT_RULES", "ConnectionSession", "NoMatchingRule", "RequestContext", "SslPrincipalMapper", "principal_mappers"]

#: The principal of an unauthenticated connection.
ANONYMOUS = "User:ANONYMOUS"

#: ``ssl.principal.mapping.rules``' default: the whole distinguished name.
DEFAULT_RULES = "DEFAULT"


@attrs.frozen
class RequestContext:
    """What the authorizer needs to know about a request's sender.

    Attributes:
        principal: ``User:<name>`` (`ANONYMOUS` unauthenticated).
        client_address: The client's IP address (``10.0.0.7``, no port).
        listener: The listener name the request came in on.
    """

    principal: str = ANONYMOUS
    client_address: str = ""
    listener: str = ""


@attrs.define
class ConnectionSession:
    """What one connection knows about its client, for the `RequestContext`
    of each of its requests.

    Attributes:
        client_address: The client's IP address.
        listener: The listener's name.
        tls_principal: The mapped principal of a TLS client certificate.
        sasl: The connection's SASL exchange (its ``principal`` is set once
            authenticated), or None.
    """

    client_address: str = ""
    listener: str = ""
    tls_principal: str | None = None
    sasl: Any = None

    def context(self) -> RequestContext:
        """The context of a request on this connection now."""
        sasl_principal = getattr(self.sasl, "principal", None) if self.sasl is not None else None
        principal = sasl_principal or self.tls_principal or ANONYMOUS
        return RequestContext(principal=principal, client_address=self.client_address, listener=self.listener)


class NoMatchingRule(Exception):
    """No ``ssl.principal.mapping.rules`` rule applies to a certificate's
    subject (Kafka fails the authentication)."""


_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\\(.)|\$(\d+)")


@attrs.frozen
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        match = self.pattern.fullmatch(dn)
        if match is None:
            return None
        result = self.pattern.sub(lambda m: _expand(self.replacement, m), dn)
        if self.case == "L":
            return result.lower()
        return result.upper() if self.case == "U" else result


def _expand(replacement: str, match: re.Match[str]) -> str:
    """Java's ``Matcher.replaceAll`` replacement: ``$n`` is group n (a
    reference to a group that does not exist is shortened digit by digit,
    then kept literally, as Kafka's rule escaping does), ``\\x`` is x."""
    groups = match.re.groups

    def one(ref: re.Match[str]) -> str:
        if ref.group(1) is not None:
            return ref.group(1)
        digits = ref.group(2)
        index = int(digits)
        while index > groups and index >= 10:
            index //= 10
            digits = digits[:-1]
        if index > groups:
            return ref.group(0)
        rest = ref.group(2)[len(digits) :]
        return (match.group(index) or "") + rest

    return _BACK_REFERENCE.sub(one, replacement)


class SslPrincipalMapper:
    """``ssl.principal.mapping.rules``: a comma-separated list of
    ``RULE:pattern/replacement/`` (optionally ``/L`` or ``/U`` for lower or
    upper case) and ``DEFAULT``, tried in order on the certificate subject
    (RFC 2253, ``CN=alice,OU=eng,O=Example``); the first rule whose
    pattern matches the whole subject gives the name.

    Args:
        rules: The property's value (None: ``DEFAULT``).

    Raises:
        ConfigError: A rule that does not parse, or a bad pattern.
    """

    def __init__(self, rules: str | None = None) -> None:
        self.rules: list[_Rule] = []
        text = (rules if rules is not None else DEFAULT_RULES).strip()
        for found in _SPLITTER.finditer(text):
            rule = found.group(1)
            if found.group(0) == "" and found.start() >= len(text):
                break
            parsed = _PARSER.match(rule)
            if parsed is None or parsed.end() != len(rule):
                raise ConfigError(f"Invalid rule in ssl.principal.mapping.rules: {rule!r}")
            if parsed.group(1) is not None:
                self.rules.append(_Rule(None))
            elif parsed.group(2) is not None:
                try:
                    pattern = re.compile(parsed.group(2))
                except re.error as exc:
                    raise ConfigError(f"Invalid rule in ssl.principal.mapping.rules: {rule!r}: {exc}") from None
                self.rules.append(_Rule(pattern, parsed.group(3), parsed.group(4)))
            elif parsed.group(5):
                raise ConfigError(f"Invalid rule in ssl.principal.mapping.rules: {rule!r}")

    def name(self, dn: str) -> str:
        """The principal name for a certificate subject.

        Args:
            dn: The subject in RFC 2253 form.

        Returns:
            The name (without ``User:``).

        Raises:
            NoMatchingRule: No rule applies.
        """
        for rule in self.rules:
            result = rule.apply(dn)
            if result is not None:
                return result
        raise NoMatchingRule(f"No rules apply to {dn}")


def principal_mappers(props: Mapping[str, str], listener_names: Iterable[str]) -> dict[str, SslPrincipalMapper]:
    """Each listener's ``ssl.principal.mapping.rules``
    (``listener.name.<listener>.ssl.principal.mapping.rules`` first).

    Args:
        props: The broker's security properties.
        listener_names: The listener names (upper case).

    Returns:
        Listener name -> its mapper.

    Raises:
        ConfigError: A rule that does not parse.
    """
    out = {}
    for name in listener_names:
        rules = props.get(f"listener.name.{name.lower()}.ssl.principal.mapping.rules", props.get("ssl.principal.mapping.rules"))
        out[name] = SslPrincipalMapper(rules)
    return out
