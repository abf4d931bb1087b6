"""The consumer's configuration: Kafka's consumer keys, Kafka 2.4's defaults, strict validation.

Keys: ``bootstrap.servers``, ``client.id``, ``fetch.min.bytes`` (1), ``fetch.max.wait.ms`` (500),
``fetch.max.bytes`` (52428800), ``max.partition.fetch.bytes`` (1048576), ``max.poll.records`` (500),
``auto.offset.reset`` (latest), ``request.timeout.ms`` (30000), ``retry.backoff.ms`` (100),
``metadata.max.age.ms`` (300000), ``check.crcs`` (true), ``isolation.level`` (read_uncommitted),
``internal.auth.secret``.

Rules kept: an unknown key is an error naming the closest known keys; a Kafka key this consumer
does not offer (``group.id``: there are no consumer groups, partitions are assigned by the
application) is an error saying why; a bad value names the key, the value and what was expected.
"""

from __future__ import annotations

import difflib
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Final

from actors.common.client_security import SECURITY_KEYS, security_properties

__all__ = ["ConsumerConfig", "ConsumerConfigError", "OffsetResetStrategy"]


class ConsumerConfigError(ValueError):
    """A configuration problem, worded for the person who wrote the configuration."""


class OffsetResetStrategy(enum.Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    NONE = "none"


_UNSUPPORTED: Final[dict[str, str]] = {
    "group.id": "consumer groups are not supported: assign partitions (Consumer.assign) and seek",
    "enable.auto.commit": "there are no consumer groups, hence no committed offsets",
    "auto.commit.interval.ms": "there are no consumer groups, hence no committed offsets",
    "key.deserializer": "keys and values are bytes: deserialize them after poll()",
    "value.deserializer": "keys and values are bytes: deserialize them after poll()",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerConfig:
    client_id: str = "actorlog-consumer"
    fetch_min_bytes: int = 1
    fetch_max_wait_ms: int = 500
    fetch_max_bytes: int = 52_428_800
    max_partition_fetch_bytes: int = 1_048_576
    max_poll_records: int = 500
    auto_offset_reset: OffsetResetStrategy = OffsetResetStrategy.LATEST
    request_timeout_ms: int = 30_000
    retry_backoff_ms: int = 100
    metadata_max_age_ms: int = 300_000
    check_crcs: bool = True
    internal_auth_secret: str | None = field(default=None, repr=False)
    # security.protocol, sasl.*, ssl.* (actors/common/client_security.py): for the connection.
    security: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        for name in (
            "fetch_max_bytes",
            "max_partition_fetch_bytes",
            "max_poll_records",
            "request_timeout_ms",
        ):
            if getattr(self, name) <= 0:
                raise ConsumerConfigError(
                    f"{name.replace('_', '.')} must be positive, got {getattr(self, name)}"
                )
        for name in ("fetch_min_bytes", "fetch_max_wait_ms", "retry_backoff_ms", "metadata_max_age_ms"):
            if getattr(self, name) < 0:
                raise ConsumerConfigError(f"{name.replace('_', '.')} must be >= 0, got {getattr(self, name)}")
        if self.fetch_max_wait_ms >= self.request_timeout_ms:
            raise ConsumerConfigError(
                f"request.timeout.ms ({self.request_timeout_ms}) must be larger than "
                f"fetch.max.wait.ms ({self.fetch_max_wait_ms})"
            )

    @classmethod
    def from_properties(cls, properties: Mapping[str, object]) -> ConsumerConfig:
        """Kafka keys → config (``bootstrap.servers`` is accepted and left to the client node)."""
        try:
            values: dict[str, object] = {"security": security_properties(properties)}
        except ValueError as error:
            raise ConsumerConfigError(str(error)) from None
        known = {f.name.replace("_", "."): f for f in fields(cls) if f.name != "security"}
        for key, raw in properties.items():
            if key in SECURITY_KEYS:
                continue
            if key in _UNSUPPORTED:
                raise ConsumerConfigError(f"{key}: {_UNSUPPORTED[key]}")
            if key == "bootstrap.servers":
                continue
            if key == "isolation.level":
                if str(raw) != "read_uncommitted":
                    raise ConsumerConfigError(
                        f"isolation.level: only read_uncommitted exists here (no transactions), got {raw!r}"
                    )
                continue
            spec = known.get(key)
            if spec is None:
                close = difflib.get_close_matches(key, [*known, "bootstrap.servers", "isolation.level"], n=2)
                hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
                raise ConsumerConfigError(f"unknown consumer configuration key {key!r}{hint}")
            values[spec.name] = _parse(key, spec.name, raw)
        return cls(**values)  # type: ignore[arg-type]


def _parse(key: str, name: str, raw: object) -> object:
    text = str(raw).strip()
    if name == "auto_offset_reset":
        try:
            return OffsetResetStrategy(text)
        except ValueError:
            raise ConsumerConfigError(f"{key}: expected earliest, latest or none, got {raw!r}") from None
    if name == "check_crcs":
        if text.lower() not in ("true", "false"):
            raise ConsumerConfigError(f"{key}: expected true or false, got {raw!r}")
        return text.lower() == "true"
    if name in ("client_id", "internal_auth_secret"):
        return text
    try:
        return int(text)
    except ValueError:
        raise ConsumerConfigError(f"{key}: expected an integer, got {raw!r}") from None
