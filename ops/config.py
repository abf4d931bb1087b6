"""Broker configuration: Kafka's keys, from a properties file, the environment and overrides.

Sources, later ones winning: the ``--config`` properties file (Java ``.properties`` syntax:
``key=value`` or ``key: value``, ``#``/``!`` comments, ``\\`` line continuations), environment
variables ``ACTORLOG_CFG_<KEY>`` (the key upper-cased with dots as underscores, e.g.
``ACTORLOG_CFG_BROKER_ID=2`` — Kafka's keys contain no underscores, so the mapping is exact; this is
how Kubernetes manifests set per-pod values), and ``--override key=value`` flags.

``request.body.timeout.ms`` (default 30000, an actorlog key: Kafka's nearest is
``connections.max.idle.ms``) bounds how long a request's body may take to arrive after its
headers; then the server answers 408 REQUEST_TIMED_OUT and closes the connection.

Every key is validated once, here: an unknown key is an error that names the closest known keys
(a typo must not silently fall back to a default), and a bad value names the key, the value and
what was expected. Secrets (``internal.auth.secret``) are redacted wherever the config is printed.

Keys beyond ``actors.server.config.BrokerConfig`` and the storage's log defaults:
``listeners`` (``HTTP://host:port``), ``advertised.listeners``, ``log.dirs`` (one directory),
``zookeeper.connect`` (``host:port[,host:port...][/chroot]``), ``internal.auth.secret``,
``broker.rack``, ``socket.request.max.bytes``, ``metrics.snapshot.dir``,
``metrics.snapshot.interval.ms``, ``cluster.id``.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from actors.common.client_protocol import ConfigSource, DescribeConfigsEntry
from actors.server.config import BrokerConfig
from ops.properties import ConfigError, parse_properties
from runtime.storage.config import BROKER_LOG_CONFIG_KEYS, LogConfig
from runtime.transport.http import DEFAULT_BODY_TIMEOUT_MS

__all__ = [
    "ENV_PREFIX",
    "BrokerSettings",
    "Listener",
    "load_broker_settings",
    "redacted",
]

ENV_PREFIX: Final = "ACTORLOG_CFG_"
SECRET_KEYS: Final = frozenset({"internal.auth.secret"})


@dataclass(frozen=True, slots=True)
class Listener:
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


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
    properties: Mapping[str, str]

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
        "log.dirs",
        "log.dir",
        "zookeeper.connect",
        "internal.auth.secret",
        "broker.rack",
        "socket.request.max.bytes",
        "request.body.timeout.ms",
        "metrics.snapshot.dir",
        "metrics.snapshot.interval.ms",
        "cluster.id",
    }
)
KNOWN_KEYS: Final = frozenset(_BROKER_CONFIG_KEYS) | BROKER_LOG_CONFIG_KEYS | _OTHER_KEYS
_LISTENER = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)://(?P<host>\[[^\]]*\]|[^:]*):(?P<port>\d{1,5})$")
_CONNECT = re.compile(r"^[^,/\s]+:\d{1,5}(,[^,/\s]+:\d{1,5})*(/[^\s]*)?$")


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
    listener = _listener(properties.get("listeners", "HTTP://127.0.0.1:9092"), "listeners")
    advertised = (
        _listener(properties["advertised.listeners"], "advertised.listeners")
        if "advertised.listeners" in properties
        else listener
    )
    if advertised.host in ("", "0.0.0.0", "::"):
        raise ConfigError(
            f"advertised.listeners must name a reachable host, not {advertised.host!r} "
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
        properties=dict(properties),
    )


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
            values[field.name] = _parse_int(key, raw)
    try:
        return BrokerConfig(**values)  # type: ignore[arg-type]
    except (TypeError, ValueError) as error:
        raise ConfigError(str(error)) from None


def _listener(raw: str, key: str) -> Listener:
    first = raw.split(",")[0].strip()
    match = _LISTENER.match(first)
    if match is None:
        raise ConfigError(f"{key} must look like HTTP://host:port, got {raw!r}")
    if match.group("name").upper() != "HTTP":
        raise ConfigError(f"{key}: only the HTTP listener is supported, got {match.group('name')!r}")
    port = int(match.group("port"))
    if not 0 <= port <= 65535:
        raise ConfigError(f"{key}: port {port} is out of range")
    return Listener(match.group("host").strip("[]"), port)


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


def _int(properties: Mapping[str, str], key: str, default: int, *, minimum: int) -> int:
    if key not in properties:
        return default
    value = _parse_int(key, properties[key])
    if value < minimum:
        raise ConfigError(f"{key}: must be at least {minimum}, got {value}")
    return value


def _bool(properties: Mapping[str, str], key: str, default: bool) -> bool:
    return _parse_bool(key, properties[key]) if key in properties else default
