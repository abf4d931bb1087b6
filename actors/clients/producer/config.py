"""The producer's configuration: Kafka's producer keys, Kafka's defaults, Kafka's validation.

``ProducerConfig.from_properties`` reads a mapping of Kafka keys (``linger.ms``, ``acks``...) whose
values are strings (a properties file) or Python values (``{"linger.ms": 5}``); field names are the
keys with dots turned into underscores. Defaults are Kafka 2.4's (docs/defaults.md §2) except
the durability default this project chooses on purpose: **``enable.idempotence`` is true**, so
``acks`` is ``all``.

Rules kept (Kafka's ``ProducerConfig``):

* an unknown key is an error naming the closest known keys; a Kafka key this producer does not
  offer (``transactional.id``, serializers, ``partitioner.class``) is an error saying why;
* a bad value is an error naming the key, the value and what was expected;
* idempotence needs ``acks=all``, ``retries > 0`` and ``max.in.flight.requests.per.connection <= 5``.
  Set explicitly, a conflict is an error; left at its default, idempotence is switched off by a
  conflicting setting, as Kafka 3.2+ does (``notes`` says so) — that is how ``acks=1`` works
  without also writing ``enable.idempotence=false``;
* ``delivery.timeout.ms >= linger.ms + request.timeout.ms``: an explicit smaller value is an error;
  the default is raised to that sum silently, as Kafka 2.4 does;
* ``internal.auth.secret`` never appears in ``repr`` or ``describe()``.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from actors.common.client_security import SECURITY_KEYS, describe_security, security_properties
from runtime.storage.compression import CompressionType

__all__ = ["INT32_MAX", "KNOWN_KEYS", "ProducerConfig", "ProducerConfigError"]

INT32_MAX: Final = 2_147_483_647
MAX_IDEMPOTENT_IN_FLIGHT: Final = 5

_HOST_PORT: Final = re.compile(r"^(\[[^\]]+\]|[^:\s,\[\]]+):(\d{1,5})$")

# Kafka producer keys that exist in Kafka but not here, and why: a person setting one expects it
# to do something, so it is refused with the reason rather than ignored.
_UNSUPPORTED: Final[dict[str, str]] = {
    "transactional.id": "transactions are not supported (the idempotent producer is)",
    "transaction.timeout.ms": "transactions are not supported (the idempotent producer is)",
    "key.serializer": "keys and values are bytes: serialize them before send()",
    "value.serializer": "keys and values are bytes: serialize them before send()",
    "partitioner.class": "only Kafka's default partitioner (murmur2 keys, sticky otherwise) is available",
    "interceptor.classes": "producer interceptors are not supported",
}


class ProducerConfigError(ValueError):
    """A configuration problem, worded for the person who wrote the configuration."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerConfig:
    bootstrap_servers: tuple[str, ...]
    client_id: str = "actorlog-producer"
    acks: int = -1
    batch_size: int = 16_384
    linger_ms: int = 0
    buffer_memory: int = 33_554_432
    max_block_ms: int = 60_000
    max_request_size: int = 1_048_576
    compression_type: CompressionType = CompressionType.NONE
    retries: int = INT32_MAX
    retry_backoff_ms: int = 100
    request_timeout_ms: int = 30_000
    delivery_timeout_ms: int = 120_000
    max_in_flight_requests_per_connection: int = 5
    enable_idempotence: bool = True
    metadata_max_age_ms: int = 300_000
    internal_auth_secret: str | None = field(default=None, repr=False)
    # security.protocol, sasl.*, ssl.* (actors/common/client_security.py): for the connection.
    security: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    # What from_properties adjusted on its own (idempotence switched off, delivery timeout raised),
    # in words, for the client to log.
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.bootstrap_servers:
            raise ProducerConfigError("bootstrap.servers is empty: give at least one host:port")
        for server in self.bootstrap_servers:
            _check_host_port(server)
        if self.acks not in (-1, 0, 1):
            raise ProducerConfigError(f"acks: expected all, -1, 0 or 1, got {self.acks!r}")
        for name, minimum in _MINIMUMS.items():
            value = getattr(self, name)
            if value < minimum:
                raise ProducerConfigError(f"{_key(name)}: must be at least {minimum}, got {value}")
        if self.retries > INT32_MAX:
            raise ProducerConfigError(f"retries: must be at most {INT32_MAX}, got {self.retries}")
        if self.compression_type is CompressionType.SNAPPY:
            raise ProducerConfigError(
                "compression.type: snappy is not available in this build (use gzip, lz4 or zstd)"
            )
        if self.enable_idempotence:
            _check_idempotence(self.acks, self.retries, self.max_in_flight_requests_per_connection)
        if self.delivery_timeout_ms < self.linger_ms + self.request_timeout_ms:
            raise ProducerConfigError(
                f"delivery.timeout.ms should be equal to or larger than linger.ms + request.timeout.ms "
                f"({self.linger_ms} + {self.request_timeout_ms}), got {self.delivery_timeout_ms}"
            )

    @property
    def guarantee_message_order(self) -> bool:
        """Kafka's ``guaranteeMessageOrder``: one request in flight, so partitions are muted."""
        return self.max_in_flight_requests_per_connection == 1

    @classmethod
    def from_properties(cls, properties: Mapping[str, object]) -> ProducerConfig:
        """Parse Kafka keys; raises ProducerConfigError on any problem."""
        try:
            security = security_properties(properties)
        except ValueError as error:
            raise ProducerConfigError(str(error)) from None
        properties = {k: v for k, v in properties.items() if k not in SECURITY_KEYS}
        _reject_unknown_keys(properties)
        values: dict[str, object] = {"security": security}
        for key, raw in properties.items():
            name = key.replace(".", "_")
            parse = _PARSERS[name]
            values[name] = parse(key, raw)
        if "bootstrap_servers" not in values:
            raise ProducerConfigError("bootstrap.servers is required (host:port[,host:port...])")
        notes: list[str] = []
        if "enable_idempotence" not in values:
            conflict = _idempotence_conflict(
                _int_value(values, "acks", -1),
                _int_value(values, "retries", INT32_MAX),
                _int_value(values, "max_in_flight_requests_per_connection", MAX_IDEMPOTENT_IN_FLIGHT),
            )
            if conflict is not None:
                values["enable_idempotence"] = False
                notes.append(f"enable.idempotence switched off because {conflict}")
        if "delivery_timeout_ms" not in values:
            linger_ms = _int_value(values, "linger_ms", 0)
            request_timeout_ms = _int_value(values, "request_timeout_ms", 30_000)
            if linger_ms + request_timeout_ms > 120_000:
                values["delivery_timeout_ms"] = linger_ms + request_timeout_ms
                notes.append(
                    f"delivery.timeout.ms raised to linger.ms + request.timeout.ms = "
                    f"{linger_ms + request_timeout_ms}"
                )
        values["notes"] = tuple(notes)
        return cls(**values)  # type: ignore[arg-type]

    def describe(self) -> list[str]:
        """The effective configuration as ``key = value`` lines, the secret redacted."""
        lines = []
        for item in dataclasses.fields(self):
            if item.name == "notes":
                continue
            if item.name == "security":
                lines.extend(describe_security(self.security))
                continue
            value = getattr(self, item.name)
            if item.name == "internal_auth_secret":
                shown = "[redacted]" if value else "null"
            elif item.name == "acks":
                shown = "all" if value == -1 else str(value)
            elif item.name == "compression_type":
                shown = value.name.lower()
            elif item.name == "bootstrap_servers":
                shown = ",".join(value)
            elif isinstance(value, bool):
                shown = str(value).lower()
            else:
                shown = str(value)
            lines.append(f"{_key(item.name)} = {shown}")
        return lines


def _int_value(values: Mapping[str, object], name: str, default: int) -> int:
    value = values.get(name, default)
    assert isinstance(value, int)
    return value


def _key(name: str) -> str:
    return name.replace("_", ".")


_MINIMUMS: Final[dict[str, int]] = {
    "batch_size": 0,
    "linger_ms": 0,
    "buffer_memory": 0,
    "max_block_ms": 0,
    "max_request_size": 0,
    "retries": 0,
    "retry_backoff_ms": 0,
    "request_timeout_ms": 0,
    "delivery_timeout_ms": 0,
    "max_in_flight_requests_per_connection": 1,
    "metadata_max_age_ms": 0,
}


def _idempotence_conflict(acks: int, retries: int, max_in_flight: int) -> str | None:
    if acks != -1:
        return f"acks={'all' if acks == -1 else acks} (idempotence requires acks=all)"
    if retries == 0:
        return "retries=0 (idempotence requires retries > 0)"
    if max_in_flight > MAX_IDEMPOTENT_IN_FLIGHT:
        return (
            f"max.in.flight.requests.per.connection={max_in_flight} "
            f"(idempotence requires at most {MAX_IDEMPOTENT_IN_FLIGHT})"
        )
    return None


def _check_idempotence(acks: int, retries: int, max_in_flight: int) -> None:
    conflict = _idempotence_conflict(acks, retries, max_in_flight)
    if conflict is not None:
        raise ProducerConfigError(
            f"enable.idempotence=true conflicts with {conflict}; set enable.idempotence=false to use it"
        )


def _check_host_port(server: str) -> None:
    match = _HOST_PORT.match(server.removeprefix("http://"))
    if match is None or not 0 < int(match.group(2)) <= 65535:
        raise ProducerConfigError(f"bootstrap.servers: {server!r} is not host:port")


# ------------------------------------------------------------------------------------- parsing


def _parse_int(key: str, raw: object) -> int:
    if isinstance(raw, bool):
        raise ProducerConfigError(f"{key}: expected an integer, got {raw!r}")
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str):
        try:
            return int(raw.strip())
        except ValueError:
            pass
    raise ProducerConfigError(f"{key}: expected an integer, got {raw!r}")


def _parse_bool(key: str, raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise ProducerConfigError(f"{key}: expected true or false, got {raw!r}")


def _parse_str(key: str, raw: object) -> str:
    if not isinstance(raw, str):
        raise ProducerConfigError(f"{key}: expected a string, got {raw!r}")
    return raw.strip()


def _parse_acks(key: str, raw: object) -> int:
    text = str(raw).strip().lower() if isinstance(raw, (str, int)) and not isinstance(raw, bool) else None
    if text == "all":
        return -1
    if text in ("-1", "0", "1"):
        return int(text)
    raise ProducerConfigError(f"{key}: expected all, -1, 0 or 1, got {raw!r}")


def _parse_compression(key: str, raw: object) -> CompressionType:
    names = {codec.name.lower(): codec for codec in CompressionType}
    if isinstance(raw, str) and raw.strip().lower() in names:
        return names[raw.strip().lower()]
    raise ProducerConfigError(f"{key}: expected one of {', '.join(names)}, got {raw!r}")


def _parse_servers(key: str, raw: object) -> tuple[str, ...]:
    if isinstance(raw, str):
        parts = raw.split(",")
    elif isinstance(raw, Sequence) and all(isinstance(part, str) for part in raw):
        parts = [piece for part in raw for piece in str(part).split(",")]
    else:
        raise ProducerConfigError(f"{key}: expected host:port[,host:port...], got {raw!r}")
    servers = tuple(part.strip() for part in parts if part.strip())
    for server in servers:
        _check_host_port(server)
    return servers


def _parse_secret(key: str, raw: object) -> str | None:
    return _parse_str(key, raw) or None


_PARSERS: Final = {
    "bootstrap_servers": _parse_servers,
    "client_id": _parse_str,
    "acks": _parse_acks,
    "batch_size": _parse_int,
    "linger_ms": _parse_int,
    "buffer_memory": _parse_int,
    "max_block_ms": _parse_int,
    "max_request_size": _parse_int,
    "compression_type": _parse_compression,
    "retries": _parse_int,
    "retry_backoff_ms": _parse_int,
    "request_timeout_ms": _parse_int,
    "delivery_timeout_ms": _parse_int,
    "max_in_flight_requests_per_connection": _parse_int,
    "enable_idempotence": _parse_bool,
    "metadata_max_age_ms": _parse_int,
    "internal_auth_secret": _parse_secret,
}

KNOWN_KEYS: Final = frozenset(_key(name) for name in _PARSERS)


def _reject_unknown_keys(properties: Mapping[str, object]) -> None:
    problems = []
    for key in sorted(set(properties) - KNOWN_KEYS):
        if key in _UNSUPPORTED:
            problems.append(f"{key!r} is not supported: {_UNSUPPORTED[key]}")
            continue
        close = difflib.get_close_matches(key, sorted(KNOWN_KEYS), n=2)
        if not close and "_" in key and key.replace("_", ".") in KNOWN_KEYS:
            close = [key.replace("_", ".")]
        hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
        problems.append(f"unknown producer configuration key {key!r}{hint}")
    if problems:
        raise ProducerConfigError("; ".join(problems))
