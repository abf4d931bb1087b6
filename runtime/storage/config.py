"""LogConfig: the per-topic storage settings, with Kafka's key names and defaults.

Field names are Kafka's topic keys with dots turned into underscores (``segment.bytes`` ->
``segment_bytes``); defaults are Kafka 2.4's (docs/defaults.md §1). ``from_properties`` parses
topic keys (``segment.ms``), ``from_broker_properties`` the broker-wide defaults (``log.roll.hours``,
``message.max.bytes``, ...). Bad values raise ``ValueError`` naming the key, the value and the rule.

Two actorlog extensions: ``records.validation`` (see ``RecordsValidation``) and ``flush.policy``
(``replicated``, Kafka's behaviour: fsync only by the ``flush.*`` rules, on roll and on shutdown; or
``per_batch``: every append asks for a flush before it is acknowledged). The log never fsyncs appended
data on its own; it says when a flush is due (see log.py).
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from runtime.storage.records import CompressionType, TimestampType

__all__ = [
    "BROKER_KEYS_FOR_TOPIC_KEY",
    "BROKER_LOG_CONFIG_KEYS",
    "LONG_MAX",
    "TOPIC_CONFIG_KEYS",
    "CompressionConfig",
    "FlushPolicy",
    "LogConfig",
    "RecordsValidation",
    "topic_config_values",
]

LONG_MAX: Final = 9_223_372_036_854_775_807
INT_MAX: Final = 2_147_483_647


class FlushPolicy(enum.Enum):
    REPLICATED = "replicated"
    PER_BATCH = "per_batch"


class RecordsValidation(enum.Enum):
    """How much of a producer's uncompressed batch the leader checks (actorlog extension).

    ``batch``: header fields, sizes, CRC and counts; the producer's maxTimestamp stands. Records are
    walked anyway when ``message.timestamp.difference.max.ms`` needs their timestamps.
    ``full``: additionally walk every record (lengths, offset deltas 0, 1, 2, ..., max timestamp), as
    Kafka's LogValidator does; about five times slower on the leader's append path in CPython.
    Compressed batches are always decompressed and walked (docs/record-batch.md §3).
    """

    BATCH = "batch"
    FULL = "full"


class CompressionConfig(enum.Enum):
    """Topic ``compression.type``: a codec, or ``producer`` (keep whatever the producer used)."""

    PRODUCER = "producer"
    UNCOMPRESSED = "uncompressed"
    GZIP = "gzip"
    SNAPPY = "snappy"
    LZ4 = "lz4"
    ZSTD = "zstd"

    def target_codec(self, source: CompressionType) -> CompressionType:
        """The codec the leader stores a batch with, given the codec the producer used."""
        if self is CompressionConfig.PRODUCER:
            return source
        return _CODEC_OF[self]


_CODEC_OF: Final = {
    CompressionConfig.UNCOMPRESSED: CompressionType.NONE,
    CompressionConfig.GZIP: CompressionType.GZIP,
    CompressionConfig.SNAPPY: CompressionType.SNAPPY,
    CompressionConfig.LZ4: CompressionType.LZ4,
    CompressionConfig.ZSTD: CompressionType.ZSTD,
}

_TIMESTAMP_TYPES: Final = {
    "CreateTime": TimestampType.CREATE_TIME,
    "LogAppendTime": TimestampType.LOG_APPEND_TIME,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class LogConfig:
    segment_bytes: int = 1_073_741_824
    segment_ms: int = 604_800_000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10_485_760
    index_interval_bytes: int = 4096
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    retention_ms: int = 604_800_000
    retention_bytes: int = -1
    max_message_bytes: int = 1_000_012
    message_timestamp_type: TimestampType = TimestampType.CREATE_TIME
    message_timestamp_difference_max_ms: int = LONG_MAX
    compression_type: CompressionConfig = CompressionConfig.PRODUCER
    file_delete_delay_ms: int = 60_000
    cleanup_policy: str = "delete"
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    flush_policy: FlushPolicy = FlushPolicy.REPLICATED
    records_validation: RecordsValidation = RecordsValidation.BATCH
    leader_replication_throttled_replicas: str = ""
    follower_replication_throttled_replicas: str = ""

    def __post_init__(self) -> None:
        for spec in _TOPIC_KEYS.values():
            if spec.field is not None:
                spec.check(getattr(self, spec.field))

    @property
    def delete_retention_enabled(self) -> bool:
        """Time and size retention apply only when ``cleanup.policy`` contains ``delete``."""
        return "delete" in self.cleanup_policy.split(",")

    @classmethod
    def from_properties(cls, properties: Mapping[str, str], base: LogConfig | None = None) -> LogConfig:
        """Parse topic-level keys (``segment.bytes``...) over ``base`` (Kafka's defaults if None)."""
        changes: dict[str, Any] = {}
        for key, raw in properties.items():
            spec = _TOPIC_KEYS.get(key)
            if spec is None:
                raise ValueError(f"unknown topic config {key!r} (known: {', '.join(sorted(_TOPIC_KEYS))})")
            value = spec.parse(key, raw)  # checked even when unused, as Kafka checks it
            if spec.field is None:
                continue  # A Kafka key this engine accepts but has no use for (e.g. preallocate).
            changes[spec.field] = value
        return dataclasses.replace(base if base is not None else cls(), **changes)

    @classmethod
    def from_broker_properties(cls, properties: Mapping[str, str]) -> LogConfig:
        """Broker-wide defaults (``log.segment.bytes``, ``log.roll.hours``, ...); other keys are ignored.

        As in Kafka, the ``.ms`` form wins over ``.minutes``/``.hours`` when both are present.
        """
        changes: dict[str, Any] = {}
        for field_name, keys in _BROKER_KEYS.items():
            for key, scale in keys:
                if key in properties:
                    spec = _TOPIC_KEYS[_FIELD_TO_TOPIC_KEY[field_name]]
                    value = spec.parse(key, properties[key])
                    if isinstance(value, int) and scale != 1:
                        # Kafka's .hours and .minutes keys are INTs (so the product fits a long).
                        if not -INT_MAX - 1 <= value <= INT_MAX:
                            raise ValueError(
                                f"{key}: {properties[key]!r} is invalid (an int, at most {INT_MAX})"
                            )
                        value = value * scale
                    if field_name == "retention_ms" and value < 0:
                        value = -1  # Kafka: any negative retention (e.g. -1 hours) means unlimited.
                    changes[field_name] = value
                    break
        return cls(**changes)


@dataclass(frozen=True, slots=True)
class _Key:
    field: str | None
    parse_value: Callable[[str], Any]
    valid: Callable[[Any], bool]
    rule: str

    def parse(self, key: str, raw: str) -> Any:
        try:
            value = self.parse_value(raw.strip())
        except ValueError:
            raise ValueError(f"{key}: cannot parse {raw!r} ({self.rule})") from None
        if not self.valid(value):
            raise ValueError(f"{key}: {raw!r} is invalid ({self.rule})")
        return value

    def check(self, value: Any) -> None:
        if not self.valid(value):
            raise ValueError(f"{self.field}: {value!r} is invalid ({self.rule})")


def _long(raw: str) -> int:
    value = int(raw, 10)
    if not -LONG_MAX - 1 <= value <= LONG_MAX:
        raise ValueError(raw)
    return value


def _bool(raw: str) -> bool:
    if raw.lower() not in ("true", "false"):
        raise ValueError(raw)
    return raw.lower() == "true"


def _timestamp_type(raw: str) -> TimestampType:
    if raw not in _TIMESTAMP_TYPES:
        raise ValueError(raw)
    return _TIMESTAMP_TYPES[raw]


def _cleanup_policy(raw: str) -> str:
    # Log compaction is not implemented: accepting "compact" would silently keep every record
    # forever (or delete what a compacted topic must keep), so it is refused.
    parts = [part.strip() for part in raw.split(",")]
    if parts != ["delete"]:
        raise ValueError(raw)
    return "delete"


_REPLICA_ENTRY: Final = re.compile(r"([0-9]+:[0-9]+)?")


def _replica_list(raw: str) -> str:
    """A throttled-replica list with the blanks around its items removed (``"0:1, 1:2"`` ->
    ``"0:1,1:2"``); checked by ``_valid_replica_list``."""
    return ",".join(item.strip() for item in raw.split(","))


def _valid_replica_list(value: Any) -> bool:
    """Kafka's rule: ``*`` first, or every item ``partition:broker`` (empty items allowed)."""
    if not isinstance(value, str):
        return False
    items = value.split(",")
    return items[0] == "*" or all(_REPLICA_ENTRY.fullmatch(item) for item in items)


def _replica_list_rule(key: str) -> str:
    return (
        f"{key} must be the literal '*' or a list of replicas in the following format: "
        "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
    )


def _at_least(minimum: int, maximum: int = LONG_MAX) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, int) and minimum <= value <= maximum


def _any_long(value: Any) -> bool:
    return isinstance(value, int)


_TOPIC_KEYS: Final[dict[str, _Key]] = {
    "segment.bytes": _Key("segment_bytes", _long, _at_least(14, INT_MAX), "an int >= 14"),
    "segment.ms": _Key("segment_ms", _long, _at_least(1), "a long >= 1"),
    "segment.jitter.ms": _Key("segment_jitter_ms", _long, _at_least(0), "a long >= 0"),
    "segment.index.bytes": _Key("segment_index_bytes", _long, _at_least(12, INT_MAX), "an int >= 12"),
    "index.interval.bytes": _Key("index_interval_bytes", _long, _at_least(0, INT_MAX), "an int >= 0"),
    "flush.messages": _Key("flush_messages", _long, _at_least(1), "a long >= 1"),
    "flush.ms": _Key("flush_ms", _long, _at_least(0), "a long >= 0"),
    "retention.ms": _Key("retention_ms", _long, _at_least(-1), "a long >= -1 (-1: unlimited)"),
    "retention.bytes": _Key("retention_bytes", _long, _any_long, "a long (-1: unlimited)"),
    "max.message.bytes": _Key("max_message_bytes", _long, _at_least(0, INT_MAX), "an int >= 0"),
    "message.timestamp.type": _Key(
        "message_timestamp_type",
        _timestamp_type,
        lambda value: isinstance(value, TimestampType),
        "CreateTime or LogAppendTime",
    ),
    "message.timestamp.difference.max.ms": _Key(
        "message_timestamp_difference_max_ms", _long, _at_least(0), "a long >= 0"
    ),
    "compression.type": _Key(
        "compression_type",
        CompressionConfig,
        lambda value: isinstance(value, CompressionConfig),
        "one of " + ", ".join(member.value for member in CompressionConfig),
    ),
    "file.delete.delay.ms": _Key("file_delete_delay_ms", _long, _at_least(0), "a long >= 0"),
    "cleanup.policy": _Key(
        "cleanup_policy",
        _cleanup_policy,
        lambda value: isinstance(value, str) and bool(value),
        "delete (log compaction is not supported)",
    ),
    "min.insync.replicas": _Key("min_insync_replicas", _long, _at_least(1, INT_MAX), "an int >= 1"),
    "unclean.leader.election.enable": _Key(
        "unclean_leader_election_enable", _bool, lambda value: isinstance(value, bool), "true or false"
    ),
    "flush.policy": _Key(
        "flush_policy",
        FlushPolicy,
        lambda value: isinstance(value, FlushPolicy),
        "replicated or per_batch",
    ),
    "records.validation": _Key(
        "records_validation",
        RecordsValidation,
        lambda value: isinstance(value, RecordsValidation),
        "batch or full",
    ),
    # Kafka keys accepted and ignored: this engine has no preallocation, down-conversion or compaction.
    "preallocate": _Key(None, _bool, lambda _value: True, "true or false"),
    "message.format.version": _Key(None, str, lambda _value: True, "a version"),
    "message.downconversion.enable": _Key(None, _bool, lambda _value: True, "true or false"),
    # Unused, but refused out of Kafka's range as Kafka refuses them.
    "delete.retention.ms": _Key(None, _long, _at_least(0), "a long >= 0"),
    "min.compaction.lag.ms": _Key(None, _long, _at_least(0), "a long >= 0"),
    "max.compaction.lag.ms": _Key(None, _long, _at_least(1), "a long >= 1"),
    "min.cleanable.dirty.ratio": _Key(
        None, float, lambda value: 0.0 <= value <= 1.0, "a ratio between 0 and 1"
    ),
    # Replication quotas (docs/replication-quotas.md): which replicas the broker's leader and
    # follower throttles apply to; validated as Kafka's ThrottledReplicaListValidator does.
    "leader.replication.throttled.replicas": _Key(
        "leader_replication_throttled_replicas",
        _replica_list,
        _valid_replica_list,
        _replica_list_rule("leader.replication.throttled.replicas"),
    ),
    "follower.replication.throttled.replicas": _Key(
        "follower_replication_throttled_replicas",
        _replica_list,
        _valid_replica_list,
        _replica_list_rule("follower.replication.throttled.replicas"),
    ),
}

_FIELD_TO_TOPIC_KEY: Final = {spec.field: key for key, spec in _TOPIC_KEYS.items() if spec.field}

_HOUR_MS: Final = 3_600_000
_MINUTE_MS: Final = 60_000

# Broker key -> (field, scale), in precedence order per field.
_BROKER_KEYS: Final[dict[str, tuple[tuple[str, int], ...]]] = {
    "segment_bytes": (("log.segment.bytes", 1),),
    "segment_ms": (("log.roll.ms", 1), ("log.roll.hours", _HOUR_MS)),
    "segment_jitter_ms": (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", _HOUR_MS)),
    "segment_index_bytes": (("log.index.size.max.bytes", 1),),
    "index_interval_bytes": (("log.index.interval.bytes", 1),),
    "flush_messages": (("log.flush.interval.messages", 1),),
    "flush_ms": (("log.flush.interval.ms", 1),),
    "retention_ms": (
        ("log.retention.ms", 1),
        ("log.retention.minutes", _MINUTE_MS),
        ("log.retention.hours", _HOUR_MS),
    ),
    "retention_bytes": (("log.retention.bytes", 1),),
    "max_message_bytes": (("message.max.bytes", 1),),
    "message_timestamp_type": (("log.message.timestamp.type", 1),),
    "message_timestamp_difference_max_ms": (("log.message.timestamp.difference.max.ms", 1),),
    "compression_type": (("compression.type", 1),),
    "file_delete_delay_ms": (("log.segment.delete.delay.ms", 1),),
    "cleanup_policy": (("log.cleanup.policy", 1),),
    "min_insync_replicas": (("min.insync.replicas", 1),),
    "unclean_leader_election_enable": (("unclean.leader.election.enable", 1),),
    "flush_policy": (("log.flush.policy", 1),),
    "records_validation": (("log.records.validation", 1),),
}

TOPIC_CONFIG_KEYS: Final[frozenset[str]] = frozenset(_TOPIC_KEYS)
"""Every topic-level key LogConfig.from_properties accepts (``segment.bytes``, ``retention.ms``...)."""

BROKER_LOG_CONFIG_KEYS: Final[frozenset[str]] = frozenset(
    key for keys in _BROKER_KEYS.values() for key, _ in keys
)
"""Every broker-level log default LogConfig.from_broker_properties reads (``log.segment.bytes``...)."""

BROKER_KEYS_FOR_TOPIC_KEY: Final[dict[str, tuple[str, ...]]] = {
    _FIELD_TO_TOPIC_KEY[field_name]: tuple(key for key, _ in keys)
    for field_name, keys in _BROKER_KEYS.items()
}
"""Topic key -> the broker keys that set its default (``retention.ms`` -> ``log.retention.ms``...)."""


def topic_config_values(config: LogConfig) -> dict[str, str]:
    """Every topic-level key this engine uses, with its value in ``config`` written as Kafka
    prints it (``kafka-configs.sh --describe``): enums by name, booleans in lower case."""
    values: dict[str, str] = {}
    for key, spec in _TOPIC_KEYS.items():
        if spec.field is None:
            continue
        value = getattr(config, spec.field)
        if isinstance(value, bool):
            values[key] = "true" if value else "false"
        elif isinstance(value, TimestampType):
            values[key] = "LogAppendTime" if value is TimestampType.LOG_APPEND_TIME else "CreateTime"
        elif isinstance(value, enum.Enum):
            values[key] = str(value.value)
        else:
            values[key] = str(value)
    return values
