"""TLS for the brokers' listeners: Kafka's ``ssl.*`` and ``security.protocol`` keys into SSL contexts.

What this module owns: the names of the TLS keys brokers and clients read, what each means, and
turning them into the server context a broker listens with (on an ``HTTPS://`` listener, and on a
``KAFKA`` listener that ``listener.security.protocol.map`` makes ``SASL_SSL``: the same keystore)
and the client context brokers and clients connect with. Every problem (a missing file, a file
that is not PEM, a wrong key password) is one ``ConfigError`` naming the key, raised when the
configuration is read, so a broker with a bad keystore stops at start rather than at its first
handshake.

* ``ssl.keystore.location``: a PEM file holding the broker's certificate chain (its own first) and
  private key (Kafka's ``ssl.keystore.type=PEM``, Kafka 2.7+; no JKS/PKCS12 here).
  ``ssl.keystore.password``: the private key's password, when it is encrypted (a secret).
* ``ssl.truststore.location``: a PEM bundle of the CA certificates a peer's certificate must chain
  to; absent, the system's default CAs. ``ssl.truststore.type`` (clients): ``PEM``, the only type
  read here; Kafka's Java clients need it said, as their default is JKS.
* ``ssl.endpoint.identification.algorithm``: ``https`` (the default, as in Kafka since 2.0): the
  peer's certificate must name the host connected to; empty: it need not.
* ``security.protocol`` (clients): ``PLAINTEXT``/``SASL_PLAINTEXT`` speak ``http://``,
  ``SSL``/``SASL_SSL`` ``https://``. The credential is the same either way (``sasl.jaas.config``):
  TLS adds the channel's secrecy and the broker's identity, not the client's.

Both contexts require TLS 1.2 or later. The server does not ask for client certificates (Kafka's
``ssl.client.auth=none``): clients and brokers prove who they are with their credentials.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from ops.properties import ConfigError

__all__ = [
    "BROKER_SSL_KEYS",
    "CLIENT_SSL_KEYS",
    "SECURITY_PROTOCOL",
    "SSL_ENDPOINT_IDENTIFICATION_ALGORITHM",
    "SSL_KEYSTORE_LOCATION",
    "SSL_KEYSTORE_PASSWORD",
    "SSL_TRUSTSTORE_LOCATION",
    "SSL_TRUSTSTORE_TYPE",
    "client_context",
    "server_context",
    "uses_tls",
]

SSL_KEYSTORE_LOCATION: Final = "ssl.keystore.location"
SSL_KEYSTORE_PASSWORD: Final = "ssl.keystore.password"
SSL_TRUSTSTORE_LOCATION: Final = "ssl.truststore.location"
SSL_TRUSTSTORE_TYPE: Final = "ssl.truststore.type"
SSL_ENDPOINT_IDENTIFICATION_ALGORITHM: Final = "ssl.endpoint.identification.algorithm"
SECURITY_PROTOCOL: Final = "security.protocol"

BROKER_SSL_KEYS: Final = frozenset(
    {
        SSL_KEYSTORE_LOCATION,
        SSL_KEYSTORE_PASSWORD,
        SSL_TRUSTSTORE_LOCATION,
        SSL_ENDPOINT_IDENTIFICATION_ALGORITHM,
    }
)
CLIENT_SSL_KEYS: Final = frozenset(
    {SSL_TRUSTSTORE_LOCATION, SSL_TRUSTSTORE_TYPE, SSL_ENDPOINT_IDENTIFICATION_ALGORITHM}
)
_TLS_PROTOCOLS: Final = frozenset({"SSL", "SASL_SSL"})
_PLAIN_PROTOCOLS: Final = frozenset({"PLAINTEXT", "SASL_PLAINTEXT"})


def uses_tls(properties: Mapping[str, str]) -> bool:
    """Whether a client's ``security.protocol`` asks for TLS (PLAINTEXT when unset, as in Kafka)."""
    protocol = properties.get(SECURITY_PROTOCOL, "PLAINTEXT").strip().upper()
    if protocol not in _TLS_PROTOCOLS | _PLAIN_PROTOCOLS:
        raise ConfigError(
            f"{SECURITY_PROTOCOL} must be PLAINTEXT, SASL_PLAINTEXT, SSL or SASL_SSL, got {protocol!r}"
        )
    return protocol in _TLS_PROTOCOLS


def _existing_file(properties: Mapping[str, str], key: str, needed_by: str) -> str:
    location = properties.get(key, "").strip()
    if not location:
        raise ConfigError(f"{key} is required for {needed_by} (a PEM file)")
    if not Path(location).is_file():
        raise ConfigError(f"{key}: no readable file at {location!r}")
    return location


def server_context(properties: Mapping[str, str], *, needed_by: str = "an HTTPS listener") -> ssl.SSLContext:
    """The context a TLS listener serves with, from ``ssl.keystore.location`` (and password);
    ``needed_by`` names that listener in the error when the keystore is not given."""
    location = _existing_file(properties, SSL_KEYSTORE_LOCATION, needed_by)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    password = properties.get(SSL_KEYSTORE_PASSWORD) or None
    try:
        context.load_cert_chain(location, password=password)
    except (ssl.SSLError, ValueError, OSError) as error:
        reason = getattr(error, "reason", None) or str(error) or type(error).__name__
        raise ConfigError(
            f"{SSL_KEYSTORE_LOCATION}: {location!r} is not a PEM certificate chain with its private key "
            f"(or {SSL_KEYSTORE_PASSWORD} is wrong): {reason}"
        ) from None
    return context


def client_context(properties: Mapping[str, str]) -> ssl.SSLContext:
    """The context that verifies a broker: ``ssl.truststore.location`` (else the system's CAs) and
    ``ssl.endpoint.identification.algorithm`` (hostname verification unless empty)."""
    algorithm = properties.get(SSL_ENDPOINT_IDENTIFICATION_ALGORITHM, "https").strip().lower()
    if algorithm not in ("https", ""):
        raise ConfigError(
            f"{SSL_ENDPOINT_IDENTIFICATION_ALGORITHM} must be https or empty, got {algorithm!r}"
        )
    truststore_type = properties.get(SSL_TRUSTSTORE_TYPE, "PEM").strip().upper()
    if truststore_type != "PEM":
        raise ConfigError(
            f"{SSL_TRUSTSTORE_TYPE} must be PEM (the only type read here), got {truststore_type!r}"
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = algorithm == "https"
    if properties.get(SSL_TRUSTSTORE_LOCATION, "").strip():
        location = _existing_file(properties, SSL_TRUSTSTORE_LOCATION, "TLS")
        try:
            context.load_verify_locations(cafile=location)
        except (ssl.SSLError, ValueError, OSError) as error:
            reason = getattr(error, "reason", None) or str(error) or type(error).__name__
            raise ConfigError(
                f"{SSL_TRUSTSTORE_LOCATION}: {location!r} is not a PEM bundle of CA certificates: {reason}"
            ) from None
    else:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    return context
