"""Broker configuration: Kafka's keys, from a properties file, the environment and overrides.

Sources, later ones winning: the ``--config`` properties file (Java ``.properties`` syntax:
``key=value`` or ``key: value``, ``#``/``!`` comments, ``\\`` line continuations), environment
variables ``ACTORLOG_CFG_<KEY>`` (the key upper-cased with dots as underscores, e.g.
``ACTORLOG_CFG_BROKER_ID=2`` — Kafka's keys contain no underscores, so the mapping is exact; this is
how Kubernetes manifests set per-pod values), and ``--override key=value`` flags.

``request.body.timeout.ms`` (default 30000, an actorlog key: Kafka's nearest is
``connections.max.idle.ms``) bounds how long a request's body may take to arrive after its
headers; then the server answers 408 REQUEST_TIMED_OUT and closes the connection.

Numbers are range-checked as Kafka 2.4's ConfigDef checks them (``BROKER_KEY_RANGES`` for the keys
of BrokerConfig; LogConfig for the ``log.*`` defaults): within their Java type (INT or LONG) and
within the validator Kafka defines for the key (``num.partitions`` at least 1, ...). Where Kafka has
no validator but a zero or negative value cannot work (a timeout, a scheduling period, a count of
fetchers) the lower bound is actorlog's, and the table says so.

Every key is validated once, here: an unknown key is an error that names the closest known keys
(a typo must not silently fall back to a default), and a bad value names the key, the value and
what was expected. Secrets (``internal.auth.secret``, ``zookeeper.digest.password``,
``ssl.keystore.password``) are redacted
wherever the config is printed.

Keys beyond ``actors.server.config.BrokerConfig`` and the storage's log defaults:
``listeners`` (``HTTP://host:port`` or ``HTTPS://host:port``, optionally followed by one
``KAFKA://host:port``, Kafka's binary protocol for clients: ``ops.kafka``), ``advertised.listeners``
(the same names and scheme; a listener it leaves out is advertised as ``listeners`` gives it),
``listener.security.protocol.map`` (Kafka's key: ``HTTP:PLAINTEXT`` and ``HTTPS:SSL`` as the
scheme says, and ``KAFKA:SASL_PLAINTEXT``, the default, or ``KAFKA:SASL_SSL``, TLS on the Kafka
listener with the same keystore; PLAINTEXT and SSL are refused for KAFKA: a Kafka listener always
authenticates its clients with SASL), the TLS keys of an HTTPS or SASL_SSL listener
(``ssl.keystore.location``, ``ssl.keystore.password``, ``ssl.truststore.location``,
``ssl.endpoint.identification.algorithm``: ``ops.tls``),
``log.dirs`` (one directory), ``zookeeper.connect`` (``host:port[,host:port...][/chroot]``),
``internal.auth.secret``, ``broker.rack``, ``socket.request.max.bytes``, ``metrics.snapshot.dir``,
``metrics.snapshot.interval.ms``, ``metrics.partition.level`` (``partition``, the default, ``topic``
or ``none``: how the per-partition metric families are exported, ``ops/broker_metrics.py``),
``cluster.id``, and the ZooKeeper security keys
``zookeeper.set.acl``, ``zookeeper.digest.username``, ``zookeeper.digest.password`` (read by
``ops.zk_security``).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import ssl
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from actors.common.client_protocol import ConfigSource, DescribeConfigsEntry
from actors.server.config import BrokerConfig
from actors.server.zk_data import KAFKA_LISTENER_NAME
from ops.metric_catalog import PartitionLevel
from ops.properties import ConfigError, parse_properties
from ops.tls import BROKER_SSL_KEYS, SSL_KEYSTORE_PASSWORD, client_context, server_context
from ops.zk_security import ZK_DIGEST_PASSWORD, ZK_SECURITY_KEYS, zk_security
from runtime.coordination.zk_auth import ZkSecurity
from runtime.storage.config import BROKER_LOG_CONFIG_KEYS, LogConfig
from runtime.transport.http import DEFAULT_BODY_TIMEOUT_MS

__all__ = [
    "BROKER_KEY_RANGES",
    "ENV_PREFIX",
    "BrokerSettings",
    "KafkaListener",
    "Listener",
    "load_broker_settings",
    "redacted",
]

ENV_PREFIX: Final = "ACTORLOG_CFG_"
SECRET_KEYS: Final = frozenset({"internal.auth.secret", ZK_DIGEST_PASSWORD, SSL_KEYSTORE_PASSWORD})


@dataclass(frozen=True, slots=True)
class Listener:
    host: str
    port: int
    tls: bool = False

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    @property
    def security_protocol(self) -> str:
        """Kafka's name for what the listener speaks, as registrations carry it."""
        return "SSL" if self.tls else "PLAINTEXT"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class KafkaListener:
    """A ``KAFKA://host:port`` listener: Kafka's binary protocol, SASL-authenticated clients, over TLS
    when ``listener.security.protocol.map`` says ``KAFKA:SASL_SSL``."""

    host: str
    port: int
    security_protocol: str = "SASL_PLAINTEXT"

    @property
    def tls(self) -> bool:
        return self.security_protocol == "SASL_SSL"

    @property
    def connection_string(self) -> str:
        return f"KAFKA://{self.host}:{self.port}"


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerSettings:
    broker: BrokerConfig
    listener: Listener
    advertised_listener: Listener
    log_dir: str
    zookeeper_connect: str
    internal_auth_secret: str
    rack: str | None
    log_config: LogConfig
    socket_request_max_bytes: int
    request_body_timeout_ms: int = DEFAULT_BODY_TIMEOUT_MS
    metrics_snapshot_dir: str | None
    metrics_snapshot_interval_ms: int
    cluster_id: str | None
    metrics_partition_level: PartitionLevel = PartitionLevel.PARTITION
    properties: Mapping[str, str]
    zookeeper_security: ZkSecurity
    # An HTTPS listener's: the server's (keystore) and the one this broker verifies peers with.
    server_ssl_context: ssl.SSLContext | None = None
    client_ssl_context: ssl.SSLContext | None = None
    # The Kafka protocol listener (``KAFKA://`` in ``listeners``), None when there is none.
    kafka_listener: KafkaListener | None = None
    advertised_kafka_listener: KafkaListener | None = None
    # The KAFKA listener's server context when it is SASL_SSL (the same keystore), else None.
    kafka_ssl_context: ssl.SSLContext | None = None

    def describe(self) -> list[str]:
        """The effective configuration as ``key = value`` lines, secrets redacted (start-up banner)."""
        return [f"{key} = {value}" for key, value in sorted(redacted(self.properties).items())]

    def config_entries(self) -> tuple[DescribeConfigsEntry, ...]:
        """What DescribeConfigs shows for this broker: every key that was set (static), and
        BrokerConfig's defaults for the rest; secrets flagged sensitive and never shown."""
        entries: dict[str, DescribeConfigsEntry] = {}
        for key, value in self.properties.items():
            entries[key] = DescribeConfigsEntry(
                name=key,
                value=None if key in SECRET_KEYS else value,
                read_only=True,
                is_default=False,
                source=ConfigSource.STATIC_BROKER_CONFIG,
                is_sensitive=key in SECRET_KEYS,
            )
        for key, field in _BROKER_CONFIG_KEYS.items():
            if key in entries:
                continue
            value = getattr(self.broker, field.name)
            entries[key] = DescribeConfigsEntry(
                name=key,
                value=str(value).lower() if isinstance(value, bool) else str(value),
                read_only=True,
                is_default=True,
                source=ConfigSource.DEFAULT_CONFIG,
            )
        return tuple(entries[key] for key in sorted(entries))


# Keys of BrokerConfig: its fields with underscores turned into dots. ``protocol_faults`` (the
# simulation's negative controls) is not a key: no configuration can break the protocol.
_NOT_CONFIGURABLE: Final = frozenset({"protocol_faults"})
_BROKER_CONFIG_KEYS: Final[dict[str, dataclasses.Field[object]]] = {
    field.name.replace("_", "."): field
    for field in dataclasses.fields(BrokerConfig)
    if field.name not in _NOT_CONFIGURABLE
}
_OTHER_KEYS: Final = frozenset(
    {
        "listeners",
        "advertised.listeners",
        "listener.security.protocol.map",
        "log.dirs",
        "log.dir",
        "zookeeper.connect",
        "internal.auth.secret",
        "broker.rack",
        "socket.request.max.bytes",
        "request.body.timeout.ms",
        "metrics.snapshot.dir",
        "metrics.snapshot.interval.ms",
        "metrics.partition.level",
        "cluster.id",
        *ZK_SECURITY_KEYS,
        *BROKER_SSL_KEYS,
    }
)
KNOWN_KEYS: Final = frozenset(_BROKER_CONFIG_KEYS) | BROKER_LOG_CONFIG_KEYS | _OTHER_KEYS
_LISTENER = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)://(?P<host>\[[^\]]*\]|[^:]*):(?P<port>\d{1,5})$")
_CONNECT = re.compile(r"^[^,/\s]+:\d{1,5}(,[^,/\s]+:\d{1,5})*(/[^\s]*)?$")

_INT_MAX: Final = 2**31 - 1
_LONG_MAX: Final = 2**63 - 1
BROKER_KEY_RANGES: Final[Mapping[str, tuple[int, int]]] = {
    # key: (least, most). Kafka 2.4's KafkaConfig type (INT/LONG) and validator; "actorlog" marks a
    # lower bound Kafka does not declare (its value would stall, spin or never act here).
    "broker.id": (0, _INT_MAX),  # actorlog: Kafka's -1 (a generated id) is not supported
    "replica.lag.time.max.ms": (1, _LONG_MAX),  # actorlog
    "replica.high.watermark.checkpoint.interval.ms": (1, _LONG_MAX),  # actorlog: a task period
    "num.replica.fetchers": (1, _INT_MAX),  # actorlog
    "replica.fetch.max.bytes": (1, _INT_MAX),  # Kafka: atLeast(0); 0 would fetch nothing
    "replica.fetch.response.max.bytes": (0, _INT_MAX),  # Kafka: atLeast(0)
    "replica.fetch.wait.max.ms": (0, _INT_MAX),  # actorlog
    "replica.fetch.min.bytes": (0, _INT_MAX),  # actorlog
    "replica.fetch.backoff.ms": (0, _INT_MAX),  # Kafka: atLeast(0)
    "replica.socket.timeout.ms": (1, _INT_MAX),  # actorlog
    "default.replication.factor": (1, 32_767),  # actorlog: a replication factor is Kafka's INT16
    "num.partitions": (1, _INT_MAX),  # Kafka: atLeast(1)
    "min.insync.replicas": (1, _INT_MAX),  # Kafka: atLeast(1)
    "message.max.bytes": (0, _INT_MAX),  # Kafka: atLeast(0)
    "request.timeout.ms": (1, _INT_MAX),  # actorlog
    "zookeeper.session.timeout.ms": (1, _INT_MAX),  # actorlog
    "zookeeper.connection.timeout.ms": (1, _INT_MAX),  # actorlog
    "controller.socket.timeout.ms": (1, _INT_MAX),  # actorlog
    "controlled.shutdown.max.retries": (0, _INT_MAX),  # actorlog: 0 skips the controlled shutdown
    "controlled.shutdown.retry.backoff.ms": (0, _LONG_MAX),  # actorlog
    "leader.imbalance.per.broker.percentage": (0, 100),  # actorlog: a percentage
    "leader.imbalance.check.interval.seconds": (1, _LONG_MAX),  # actorlog: a task period
    # Kafka: atLeast(0), but a period of 0 makes its scheduler refuse the task at start.
    "log.flush.offset.checkpoint.interval.ms": (1, _INT_MAX),
    "log.flush.start.offset.checkpoint.interval.ms": (1, _INT_MAX),
    "log.retention.check.interval.ms": (1, _LONG_MAX),  # Kafka: atLeast(1)
    "log.flush.scheduler.interval.ms": (1, _LONG_MAX),  # actorlog: a task period
    "offsets.topic.num.partitions": (1, _INT_MAX),  # Kafka: atLeast(1)
    "offsets.topic.replication.factor": (1, 32_767),  # Kafka: SHORT, atLeast(1)
    "group.initial.rebalance.delay.ms": (0, _INT_MAX),  # actorlog
    "group.min.session.timeout.ms": (0, _INT_MAX),  # actorlog
    "group.max.session.timeout.ms": (0, _INT_MAX),  # actorlog
    "group.max.size": (1, _INT_MAX),  # Kafka: atLeast(1)
    "offsets.retention.minutes": (1, _INT_MAX),  # Kafka: atLeast(1)
    "offsets.retention.check.interval.ms": (1, _LONG_MAX),  # Kafka: atLeast(1)
    "offset.metadata.max.bytes": (0, _INT_MAX),  # actorlog
    "offsets.commit.timeout.ms": (1, _INT_MAX),  # Kafka: atLeast(1)
}


def properties_from_environment(environ: Mapping[str, str]) -> dict[str, str]:
    return {
        name.removeprefix(ENV_PREFIX).lower().replace("_", "."): value
        for name, value in environ.items()
        if name.startswith(ENV_PREFIX)
    }


def parse_overrides(overrides: Iterable[str]) -> dict[str, str]:
    parsed: dict[str, str] = {}
    for override in overrides:
        key, separator, value = override.partition("=")
        if not separator or not key.strip():
            raise ConfigError(f"--override expects key=value, got {override!r}")
        parsed[key.strip()] = value.strip()
    return parsed


def redacted(properties: Mapping[str, str]) -> dict[str, str]:
    return {key: ("[redacted]" if key in SECRET_KEYS else value) for key, value in properties.items()}


def load_broker_settings(
    *,
    config_file: str | None = None,
    overrides: Iterable[str] = (),
    environ: Mapping[str, str] | None = None,
) -> BrokerSettings:
    """Read, merge and validate a broker's configuration (ConfigError on any problem)."""
    properties: dict[str, str] = {}
    if config_file is not None:
        path = Path(config_file)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise ConfigError(f"cannot read the config file {config_file}: {error.strerror}") from None
        properties.update(parse_properties(text, source=config_file))
    properties.update(properties_from_environment(os.environ if environ is None else environ))
    properties.update(parse_overrides(overrides))
    return settings_from_properties(properties)


def settings_from_properties(properties: Mapping[str, str]) -> BrokerSettings:
    _reject_unknown_keys(properties)
    broker = _broker_config(properties)
    kafka_protocol = _kafka_security_protocol(properties.get("listener.security.protocol.map"))
    listener, kafka_listener = _listeners(
        properties.get("listeners", "HTTP://127.0.0.1:9092"), "listeners", kafka_protocol=kafka_protocol
    )
    advertised, advertised_kafka = listener, kafka_listener
    if "advertised.listeners" in properties:
        named, named_kafka = _listeners(
            properties["advertised.listeners"],
            "advertised.listeners",
            http_required=False,
            kafka_protocol=kafka_protocol,
        )
        if named is not None:
            if named.tls != listener.tls:
                raise ConfigError(
                    f"advertised.listeners must use the scheme of listeners ({listener.scheme.upper()}), "
                    f"got {properties['advertised.listeners']!r}"
                )
            advertised = named
        if named_kafka is not None:
            if kafka_listener is None:
                raise ConfigError("advertised.listeners names a KAFKA listener that listeners does not have")
            advertised_kafka = named_kafka
    for host in (advertised.host, *([advertised_kafka.host] if advertised_kafka else [])):
        if host in ("", "0.0.0.0", "::"):
            raise ConfigError(
                f"advertised.listeners must name a reachable host, not {host!r} "
                "(set advertised.listeners when listeners binds a wildcard address)"
            )
    log_dirs = properties.get("log.dirs", properties.get("log.dir"))
    if not log_dirs:
        raise ConfigError("log.dirs is required (the directory where partition logs live)")
    if "," in log_dirs:
        raise ConfigError(f"log.dirs: one directory is supported, got {log_dirs!r}")
    zookeeper_connect = properties.get("zookeeper.connect", "")
    if not _CONNECT.match(zookeeper_connect):
        raise ConfigError(
            f"zookeeper.connect must be host:port[,host:port...][/chroot], got {zookeeper_connect!r}"
        )
    secret = properties.get("internal.auth.secret", "")
    if len(secret) < 16:
        raise ConfigError(
            "internal.auth.secret must be set to a shared secret of at least 16 characters "
            "(brokers authenticate each other's internal requests with it)"
        )
    zookeeper_security = zk_security(properties)
    server_ssl, client_ssl, kafka_ssl = _ssl_contexts(properties, listener, kafka_listener)
    try:
        log_config = LogConfig.from_broker_properties(properties)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    return BrokerSettings(
        broker=broker,
        listener=listener,
        advertised_listener=advertised,
        log_dir=log_dirs,
        zookeeper_connect=zookeeper_connect,
        internal_auth_secret=secret,
        rack=properties.get("broker.rack") or None,
        log_config=log_config,
        socket_request_max_bytes=_int(properties, "socket.request.max.bytes", 104_857_600, minimum=1024),
        request_body_timeout_ms=_int(
            properties, "request.body.timeout.ms", DEFAULT_BODY_TIMEOUT_MS, minimum=1
        ),
        metrics_snapshot_dir=properties.get("metrics.snapshot.dir") or None,
        metrics_snapshot_interval_ms=_int(properties, "metrics.snapshot.interval.ms", 60_000, minimum=1000),
        cluster_id=properties.get("cluster.id") or None,
        metrics_partition_level=_partition_level(properties),
        properties=dict(properties),
        zookeeper_security=zookeeper_security,
        server_ssl_context=server_ssl,
        client_ssl_context=client_ssl,
        kafka_listener=kafka_listener,
        advertised_kafka_listener=advertised_kafka,
        kafka_ssl_context=kafka_ssl,
    )


def _ssl_contexts(
    properties: Mapping[str, str], listener: Listener, kafka: KafkaListener | None
) -> tuple[ssl.SSLContext | None, ssl.SSLContext | None, ssl.SSLContext | None]:
    """The contexts of the TLS listeners (the HTTPS listener's server and peer contexts, the SASL_SSL
    KAFKA listener's server context), read now so a bad file stops the broker at start."""
    kafka_tls = kafka is not None and kafka.tls
    if not listener.tls and not kafka_tls:
        stray = sorted(BROKER_SSL_KEYS & set(properties))
        if stray:
            # Set for a reason: serving plain text while the operator believes in TLS is worse.
            raise ConfigError(
                f"{', '.join(stray)} set, but listeners is not HTTPS://host:port and has no KAFKA listener "
                "that listener.security.protocol.map makes SASL_SSL"
            )
        return None, None, None
    kafka_context = (
        server_context(
            properties, needed_by="the KAFKA listener, which listener.security.protocol.map makes SASL_SSL"
        )
        if kafka_tls
        else None
    )
    if not listener.tls:
        client_context(properties)  # unused without HTTPS peers, but a bad truststore is still named
        return None, None, kafka_context
    return server_context(properties), client_context(properties), kafka_context


def _partition_level(properties: Mapping[str, str]) -> PartitionLevel:
    raw = properties.get("metrics.partition.level", PartitionLevel.PARTITION.value)
    try:
        return PartitionLevel(raw.strip().lower())
    except ValueError:
        choices = ", ".join(level.value for level in PartitionLevel)
        raise ConfigError(f"metrics.partition.level must be one of {choices}, got {raw!r}") from None


def _reject_unknown_keys(properties: Mapping[str, str]) -> None:
    unknown = sorted(set(properties) - KNOWN_KEYS)
    if not unknown:
        return
    hints = []
    for key in unknown:
        close = difflib.get_close_matches(key, KNOWN_KEYS, n=2)
        hints.append(f"{key!r}" + (f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""))
    raise ConfigError(f"unknown configuration key(s): {', '.join(hints)}")


def _broker_config(properties: Mapping[str, str]) -> BrokerConfig:
    if "broker.id" not in properties:
        raise ConfigError("broker.id is required (a non-negative integer, unique in the cluster)")
    values: dict[str, object] = {}
    for key, field in _BROKER_CONFIG_KEYS.items():
        if key not in properties:
            continue
        raw = properties[key]
        if field.type in ("bool", bool):
            values[field.name] = _parse_bool(key, raw)
        else:
            least, most = BROKER_KEY_RANGES[key]
            values[field.name] = _in_range(key, _parse_int(key, raw), least, most)
    try:
        return BrokerConfig(**values)  # type: ignore[arg-type]
    except (TypeError, ValueError) as error:
        raise ConfigError(str(error)) from None


@typing.overload
def _listeners(raw: str, key: str, *, kafka_protocol: str) -> tuple[Listener, KafkaListener | None]: ...
@typing.overload
def _listeners(
    raw: str, key: str, *, http_required: bool, kafka_protocol: str
) -> tuple[Listener | None, KafkaListener | None]: ...
def _listeners(
    raw: str, key: str, *, http_required: bool = True, kafka_protocol: str
) -> tuple[Listener | None, KafkaListener | None]:
    """``HTTP://h:p`` or ``HTTPS://h:p``, and at most one ``KAFKA://h:p`` (speaking
    ``kafka_protocol``), comma-separated."""
    http: Listener | None = None
    kafka: KafkaListener | None = None
    for part in raw.split(","):
        match = _LISTENER.match(part.strip())
        if match is None:
            raise ConfigError(
                f"{key} must look like HTTP://host:port or HTTPS://host:port "
                f"(and optionally KAFKA://host:port), got {raw!r}"
            )
        name = match.group("name").upper()
        port = int(match.group("port"))
        if not 0 <= port <= 65535:
            raise ConfigError(f"{key}: port {port} is out of range")
        host = match.group("host").strip("[]")
        if name in ("HTTP", "HTTPS"):
            if http is not None:
                raise ConfigError(f"{key}: one HTTP or HTTPS listener, got {raw!r}")
            http = Listener(host, port, tls=name == "HTTPS")
        elif name == KAFKA_LISTENER_NAME:
            if kafka is not None:
                raise ConfigError(f"{key}: one KAFKA listener, got {raw!r}")
            kafka = KafkaListener(host, port, kafka_protocol)
        else:
            raise ConfigError(
                f"{key}: only the HTTP and HTTPS listeners (and one KAFKA listener) are supported, "
                f"got {match.group('name')!r}"
            )
    if http is None and http_required:
        raise ConfigError(
            f"{key} needs an HTTP or HTTPS listener (brokers talk to each other there), got {raw!r}"
        )
    if http is not None and kafka is not None and http.port == kafka.port != 0 and http.host == kafka.host:
        raise ConfigError(f"{key}: the HTTP and KAFKA listeners need different ports, got {raw!r}")
    return http, kafka


# Kafka's listener.security.protocol.map, restricted to what each listener here can speak (the first
# is the default). HTTP and HTTPS say their scheme; the KAFKA listener always authenticates with
# SASL, over TLS (SASL_SSL) or not.
_SECURITY_PROTOCOLS: Final[Mapping[str, tuple[str, ...]]] = {
    "HTTP": ("PLAINTEXT",),
    "HTTPS": ("SSL",),
    KAFKA_LISTENER_NAME: ("SASL_PLAINTEXT", "SASL_SSL"),
}


def _kafka_security_protocol(raw: str | None) -> str:
    """``listener.security.protocol.map``: checked entry by entry, and what the KAFKA listener speaks
    (SASL_PLAINTEXT unless the map says SASL_SSL). PLAINTEXT and SSL (no authentication) are refused
    for KAFKA, as the HTTP client endpoint refuses an unauthenticated client."""
    kafka = _SECURITY_PROTOCOLS[KAFKA_LISTENER_NAME][0]
    if raw is None or not raw.strip():
        return kafka
    for entry in raw.split(","):
        name, separator, protocol = entry.strip().partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not separator or name not in _SECURITY_PROTOCOLS:
            raise ConfigError(
                f"listener.security.protocol.map: expected NAME:PROTOCOL entries for HTTP, HTTPS or KAFKA, "
                f"got {entry.strip()!r}"
            )
        allowed = _SECURITY_PROTOCOLS[name]
        if protocol not in allowed:
            raise ConfigError(
                f"listener.security.protocol.map: {name} can only be {' or '.join(allowed)}, got {protocol!r}"
                + (
                    " (the Kafka listener always authenticates its clients with SASL)"
                    if name == KAFKA_LISTENER_NAME
                    else ""
                )
            )
        if name == KAFKA_LISTENER_NAME:
            kafka = protocol
    return kafka


def _parse_int(key: str, raw: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise ConfigError(f"{key}: expected an integer, got {raw!r}") from None


def _parse_bool(key: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(f"{key}: expected true or false, got {raw!r}")
    return value == "true"


def _in_range(key: str, value: int, least: int, most: int) -> int:
    if value < least:
        raise ConfigError(f"{key}: must be at least {least}, got {value}")
    if value > most:
        raise ConfigError(f"{key}: must be at most {most}, got {value}")
    return value


def _int(
    properties: Mapping[str, str], key: str, default: int, *, minimum: int, maximum: int = _INT_MAX
) -> int:
    if key not in properties:
        return default
    return _in_range(key, _parse_int(key, properties[key]), minimum, maximum)


def _bool(properties: Mapping[str, str], key: str, default: bool) -> bool:
    return _parse_bool(key, properties[key]) if key in properties else default
