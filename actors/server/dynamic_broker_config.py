"""Dynamic broker configs (Kafka's ``DynamicBrokerConfig`` / ``DynamicConfig.Broker``), pure.

Kafka keeps broker settings that may change without a restart in ZooKeeper:
``/config/brokers/<id>`` for one broker and ``/config/brokers/<default>`` for all of them, a
per-broker value winning over the cluster default, which wins over the static properties file.
What this module owns:

* ``DYNAMIC_BROKER_KEYS`` — the keys actorlog lets change at run time: the two replication
  throttle rates (``leader.replication.throttled.rate``, ``follower.replication.throttled.rate``,
  bytes/s, Long.MAX by default = unthrottled). Every other key is refused with Kafka's message
  ``Cannot update these configs dynamically: Set(...)``;
* ``validate(changes)`` — the check an alter request gets before anything is written;
* ``DynamicBrokerConfigs`` — a broker's view of its two znodes and the ``DynamicBrokerSettings``
  they make. A value that does not parse (written by hand into ZooKeeper) is logged and ignored,
  as Kafka ignores invalid dynamic configs.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from actors.server import zk_data
from actors.server.replication_quota import UNBOUNDED_RATE
from runtime.coordination.base import Stat

__all__ = [
    "DYNAMIC_BROKER_KEYS",
    "FOLLOWER_REPLICATION_THROTTLED_RATE",
    "LEADER_REPLICATION_THROTTLED_RATE",
    "DynamicBrokerConfigs",
    "DynamicBrokerSettings",
    "DynamicConfigError",
    "validate",
]

LEADER_REPLICATION_THROTTLED_RATE: Final = "leader.replication.throttled.rate"
FOLLOWER_REPLICATION_THROTTLED_RATE: Final = "follower.replication.throttled.rate"
DYNAMIC_BROKER_KEYS: Final = frozenset(
    {LEADER_REPLICATION_THROTTLED_RATE, FOLLOWER_REPLICATION_THROTTLED_RATE}
)
_LONG_MAX: Final = 9_223_372_036_854_775_807

_log = logging.getLogger("actorlog.broker")


class DynamicConfigError(ValueError):
    """A dynamic broker config change that is refused; the text is Kafka's."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DynamicBrokerSettings:
    leader_replication_throttled_rate: int = UNBOUNDED_RATE
    follower_replication_throttled_rate: int = UNBOUNDED_RATE


def _rate(key: str, raw: str) -> int:
    try:
        value = int(raw.strip(), 10)
    except ValueError:
        raise DynamicConfigError(
            f"Invalid value {raw} for configuration {key}: Not a number of type LONG"
        ) from None
    if not -_LONG_MAX - 1 <= value <= _LONG_MAX:
        raise DynamicConfigError(f"Invalid value {raw} for configuration {key}: Not a number of type LONG")
    if value < 0:
        raise DynamicConfigError(f"Invalid value {raw} for configuration {key}: Value must be at least 0")
    return value


def validate(config: Mapping[str, str]) -> None:
    """Raise ``DynamicConfigError`` unless every key may change dynamically and every value parses."""
    refused = sorted(set(config) - DYNAMIC_BROKER_KEYS)
    if refused:
        raise DynamicConfigError(f"Cannot update these configs dynamically: Set({', '.join(refused)})")
    for key, raw in config.items():
        _rate(key, raw)


class DynamicBrokerConfigs:
    """One broker's dynamic configs: its own znode's and the cluster default's."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self.per_broker: dict[str, str] = {}
        self.default: dict[str, str] = {}

    def paths(self) -> tuple[str, str]:
        """(``/config/brokers/<id>``, ``/config/brokers/<default>``)."""
        return zk_data.broker_config_path(self.broker_id), zk_data.broker_config_path(None)

    def concerns(self, entity_name: str) -> bool:
        """Whether a ``brokers/<name>`` change notification is about this broker."""
        return entity_name in (str(self.broker_id), zk_data.DEFAULT_BROKER_ENTITY)

    def load(self, found: Mapping[str, tuple[bytes, Stat] | None]) -> None:
        """The two znodes as read (a missing path or None: no overrides there)."""
        own, default = self.paths()
        self.per_broker = self._decode(str(self.broker_id), found.get(own))
        self.default = self._decode(zk_data.DEFAULT_BROKER_ENTITY, found.get(default))

    def _decode(self, entity: str, found: tuple[bytes, Stat] | None) -> dict[str, str]:
        if found is None:
            return {}
        try:
            return dict(zk_data.decode_broker_config(entity, found[0]))
        except zk_data.ZkDataError as error:
            _log.error("unreadable dynamic config of broker %s, ignored: %s", entity, error)
            return {}

    def settings(self) -> DynamicBrokerSettings:
        values: dict[str, int] = {}
        for key in sorted(DYNAMIC_BROKER_KEYS):
            for source, overrides in (("broker", self.per_broker), ("default", self.default)):
                if key not in overrides:
                    continue
                try:
                    values[key] = _rate(key, overrides[key])
                except DynamicConfigError as error:
                    _log.warning("ignoring the %s dynamic config %s: %s", source, key, error)
                    continue
                break
        return DynamicBrokerSettings(
            leader_replication_throttled_rate=values.get(LEADER_REPLICATION_THROTTLED_RATE, UNBOUNDED_RATE),
            follower_replication_throttled_rate=values.get(
                FOLLOWER_REPLICATION_THROTTLED_RATE, UNBOUNDED_RATE
            ),
        )
