"""A client's security keys, as Kafka's clients name them, checked the same way by every client config.

``security.protocol`` (PLAINTEXT, SASL_PLAINTEXT, SSL, SASL_SSL), ``sasl.mechanism`` (SCRAM-SHA-256 or
PLAIN: both carry a user name and password, which the brokers check against the user's SCRAM
credential), ``sasl.jaas.config`` (Java clients' form of the user and password), librdkafka's
``sasl.username`` / ``sasl.password``, and ``ssl.truststore.location``, ``ssl.truststore.type`` (PEM
only: Kafka's Java clients need it said) and ``ssl.endpoint.identification.algorithm`` for TLS. The
producer and consumer configs accept them so that one ``client.properties`` serves every tool;
``ops/clients/connection.py`` turns them into the credential. Secrets (``sasl.jaas.config``,
``sasl.password``) are never shown.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = ["SECRET_SECURITY_KEYS", "SECURITY_KEYS", "describe_security", "security_properties"]

SECURITY_KEYS: Final = frozenset(
    {
        "security.protocol",
        "sasl.mechanism",
        "sasl.jaas.config",
        "sasl.username",
        "sasl.password",
        "ssl.truststore.location",
        "ssl.truststore.type",
        "ssl.endpoint.identification.algorithm",
    }
)
SECRET_SECURITY_KEYS: Final = frozenset({"sasl.jaas.config", "sasl.password"})
_CHOICES: Final = {
    "security.protocol": ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL"),
    "sasl.mechanism": ("SCRAM-SHA-256", "PLAIN"),
    "ssl.truststore.type": ("PEM",),
    "ssl.endpoint.identification.algorithm": ("https", ""),
}


def security_properties(properties: Mapping[str, object]) -> tuple[tuple[str, str], ...]:
    """The security keys of ``properties``, checked; raises ValueError naming the key."""
    found: list[tuple[str, str]] = []
    for key in sorted(SECURITY_KEYS & properties.keys()):
        value = str(properties[key]).strip()
        choices = _CHOICES.get(key)
        if choices is not None and value not in choices:
            raise ValueError(
                f"{key}: expected one of {', '.join(c or '(empty)' for c in choices)}, got {value!r}"
            )
        found.append((key, value))
    return tuple(found)


def describe_security(security: tuple[tuple[str, str], ...]) -> list[str]:
    return [f"{key} = {'[redacted]' if key in SECRET_SECURITY_KEYS else value}" for key, value in security]
