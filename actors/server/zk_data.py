"""Kafka's ZooKeeper layout and znode payloads (Kafka's ``ZkData.scala``), as pure code.

What this module owns: every znode path actorlog writes, the list of persistent paths a broker
ensures at startup, and the JSON payloads, field for field and version for version, so that
anyone who knows Kafka's ZooKeeper data can read ours with ``zkCli.sh``:

=============================================== ================================================
``/brokers/ids/<id>`` (ephemeral)               ``{"version":4,"host","port","endpoints",
                                                "listener_security_protocol_map","jmx_port",
                                                "timestamp":"<ms>","rack"?}``; czxid = broker epoch
``/controller`` (ephemeral)                     ``{"version":1,"brokerid":N,"timestamp":"<ms>"}``
``/controller_epoch``                           ``"<epoch>"`` as decimal text
``/brokers/topics/<t>``                         ``{"version":2,"partitions":{"0":[1,2]},
                                                "adding_replicas":{},"removing_replicas":{}}``
``/brokers/topics/<t>/partitions/<p>/state``    ``{"version":1,"leader","leader_epoch",
                                                "controller_epoch","isr":[..]}``
``/isr_change_notification/isr_change_<seq>``   ``{"version":1,"partitions":[{"topic","partition"}]}``
``/admin/delete_topics/<t>``                    no data
``/admin/preferred_replica_election``           ``{"version":1,"partitions":[{"topic","partition"}]}``
``/admin/reassign_partitions``                  ``{"version":1,"partitions":[{"topic","partition",
                                                "replicas":[..]}]}`` (target replicas)
``/config/topics/<t>``                          ``{"version":1,"config":{"key":"value"}}``
``/config/brokers/<id>``, ``/config/brokers/     ``{"version":1,"config":{"key":"value"}}``: dynamic
<default>``                                     broker configs, per broker and cluster-wide
``/config/changes/config_change_<seq>``         ``{"version":2,"entity_path":"topics/<t>"}`` (or
                                                ``"brokers/<id>"``, ``"brokers/<default>"``)
``/cluster/id``                                 ``{"version":"1","id":"<22 characters>"}``
``/latest_producer_id_block``                   ``{"version":1,"broker":N,"block_start":"<id>",
                                                "block_end":"<id>"}``
=============================================== ================================================

Rules kept here:

* No I/O, no asyncio, no clock: timestamps are arguments (``timestamp_ms``), as in the rest of
  ``actors/``. orjson is the only dependency.
* Decoding is strict. A malformed znode raises ``ZkDataError`` naming the znode path, the field
  and what is wrong; it never escapes as a KeyError or TypeError.
* A broker's HTTP endpoint is its Kafka "listener": ``endpoints: ["HTTP://host:port"]`` with
  ``listener_security_protocol_map: {"HTTP": "PLAINTEXT"}``, and the legacy top-level
  ``host``/``port`` are the same host and port (Kafka fills them from the PLAINTEXT endpoint).
  An HTTPS listener is ``["HTTPS://host:port"]`` with ``{"HTTPS": "SSL"}`` and, as Kafka writes
  for a broker without a PLAINTEXT endpoint, ``"host": null, "port": -1``. A broker with a Kafka
  protocol listener lists it second: ``"KAFKA://host:port"`` with ``{"KAFKA": "SASL_PLAINTEXT"}``
  (``"SASL_SSL"`` when it speaks TLS).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Final

import orjson

__all__ = [
    "ADMIN_PATH",
    "BROKERS_PATH",
    "BROKER_IDS_PATH",
    "BROKER_SEQUENCE_ID_PATH",
    "CLUSTER_ID_PATH",
    "CONFIG_BROKERS_PATH",
    "CONFIG_CHANGES_PATH",
    "CONFIG_CHANGE_PREFIX",
    "CONFIG_PATH",
    "CONFIG_TOPICS_PATH",
    "CONTROLLER_EPOCH_PATH",
    "CONTROLLER_PATH",
    "DEFAULT_BROKER_ENTITY",
    "DELETE_TOPICS_PATH",
    "HTTPS_LISTENER_NAME",
    "HTTP_LISTENER_NAME",
    "ISR_CHANGE_NOTIFICATION_PATH",
    "ISR_CHANGE_NOTIFICATION_PREFIX",
    "KAFKA_LISTENER_NAME",
    "LATEST_PRODUCER_ID_BLOCK_PATH",
    "PERSISTENT_ZK_PATHS",
    "PREFERRED_REPLICA_ELECTION_PATH",
    "PRODUCER_ID_BLOCK_SIZE",
    "REASSIGN_PARTITIONS_PATH",
    "TOPICS_PATH",
    "BrokerRegistration",
    "ControllerRegistration",
    "EndPoint",
    "PartitionState",
    "ProducerIdBlock",
    "TopicAssignment",
    "TopicPartition",
    "ZkDataError",
    "broker_config_entity",
    "broker_config_path",
    "broker_id_path",
    "decode_broker_config",
    "decode_broker_registration",
    "decode_cluster_id",
    "decode_config_change_notification",
    "decode_controller",
    "decode_controller_epoch",
    "decode_isr_change_notification",
    "decode_partition_state",
    "decode_preferred_replica_election",
    "decode_producer_id_block",
    "decode_reassign_partitions",
    "decode_topic_assignment",
    "decode_topic_config",
    "delete_topic_path",
    "encode_broker_config",
    "encode_broker_config_change_notification",
    "encode_broker_registration",
    "encode_cluster_id",
    "encode_config_change_notification",
    "encode_controller",
    "encode_controller_epoch",
    "encode_isr_change_notification",
    "encode_partition_state",
    "encode_preferred_replica_election",
    "encode_producer_id_block",
    "encode_reassign_partitions",
    "encode_topic_assignment",
    "encode_topic_config",
    "http_broker_registration",
    "isr_change_notification_path",
    "isr_change_sequence_number",
    "parse_broker_id",
    "partition_state_path",
    "topic_config_path",
    "topic_partition_path",
    "topic_partitions_path",
    "topic_path",
]

# ------------------------------------------------------------------------------------- paths

CONTROLLER_PATH: Final = "/controller"
CONTROLLER_EPOCH_PATH: Final = "/controller_epoch"
BROKERS_PATH: Final = "/brokers"
BROKER_IDS_PATH: Final = "/brokers/ids"
BROKER_SEQUENCE_ID_PATH: Final = "/brokers/seqid"
TOPICS_PATH: Final = "/brokers/topics"
ISR_CHANGE_NOTIFICATION_PATH: Final = "/isr_change_notification"
ISR_CHANGE_NOTIFICATION_PREFIX: Final = "isr_change_"
ADMIN_PATH: Final = "/admin"
DELETE_TOPICS_PATH: Final = "/admin/delete_topics"
PREFERRED_REPLICA_ELECTION_PATH: Final = "/admin/preferred_replica_election"
REASSIGN_PARTITIONS_PATH: Final = "/admin/reassign_partitions"
CONFIG_PATH: Final = "/config"
CONFIG_TOPICS_PATH: Final = "/config/topics"
CONFIG_CHANGES_PATH: Final = "/config/changes"
CONFIG_BROKERS_PATH: Final = "/config/brokers"
DEFAULT_BROKER_ENTITY: Final = "<default>"  # Kafka's ConfigEntityName.Default: every broker
CONFIG_CHANGE_PREFIX: Final = "config_change_"
LATEST_PRODUCER_ID_BLOCK_PATH: Final = "/latest_producer_id_block"
CLUSTER_ID_PATH: Final = "/cluster/id"
PRODUCER_ID_BLOCK_SIZE: Final = 1000

PERSISTENT_ZK_PATHS: Final[tuple[str, ...]] = (
    "/consumers",
    BROKER_IDS_PATH,
    TOPICS_PATH,
    CONFIG_CHANGES_PATH,
    DELETE_TOPICS_PATH,
    BROKER_SEQUENCE_ID_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    "/latest_producer_id_block",
    "/log_dir_event_notification",
    CONFIG_TOPICS_PATH,
    "/config/clients",
    "/config/users",
    "/config/brokers",
)
"""Kafka's ``ZkData.PersistentZkPaths`` (2.4): created, with their parents, at broker startup."""

HTTP_LISTENER_NAME: Final = "HTTP"
HTTPS_LISTENER_NAME: Final = "HTTPS"
# Kafka's binary protocol for clients (SASL_PLAINTEXT or SASL_SSL), beside the HTTP listener (ops/kafka/).
KAFKA_LISTENER_NAME: Final = "KAFKA"
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")
_SEQUENCE = re.compile(r"[0-9]{10}")
_DECIMAL = re.compile(r"[0-9]+")
_ENDPOINT = re.compile(r"(?P<listener>[A-Za-z0-9_]+)://\[?(?P<host>[0-9a-zA-Z\-%._:]*)\]?:(?P<port>-?[0-9]+)")


def _checked_topic(topic: str) -> str:
    if not _LEGAL_TOPIC.fullmatch(topic) or topic in (".", ".."):
        raise ValueError(f"illegal Kafka topic name {topic!r} (legal: [a-zA-Z0-9._-], 1-249 chars)")
    return topic


def _checked_id(name: str, value: int) -> int:
    if value < 0:
        raise ValueError(f"{name} must be non-negative, not {value}")
    return value


def broker_id_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{_checked_id('broker_id', broker_id)}"


def topic_path(topic: str) -> str:
    return f"{TOPICS_PATH}/{_checked_topic(topic)}"


def topic_partitions_path(topic: str) -> str:
    return f"{topic_path(topic)}/partitions"


def topic_partition_path(topic: str, partition: int) -> str:
    return f"{topic_partitions_path(topic)}/{_checked_id('partition', partition)}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{topic_partition_path(topic, partition)}/state"


def isr_change_notification_path(sequence_number: str = "") -> str:
    """With no argument: the prefix to create sequentially (ZooKeeper appends ``%010d``)."""
    return f"{ISR_CHANGE_NOTIFICATION_PATH}/{ISR_CHANGE_NOTIFICATION_PREFIX}{sequence_number}"


def isr_change_sequence_number(name: str) -> str:
    """``isr_change_0000000042`` (a child name or a full path) -> ``0000000042``."""
    last = name.rsplit("/", 1)[-1]
    sequence = last.removeprefix(ISR_CHANGE_NOTIFICATION_PREFIX)
    if sequence == last or not _SEQUENCE.fullmatch(sequence):
        raise ValueError(f"not an ISR change notification znode: {name!r}")
    return sequence


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{_checked_topic(topic)}"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS_PATH}/{_checked_topic(topic)}"


def broker_config_entity(broker_id: int | None) -> str:
    """The entity name of a broker's dynamic config: its id, or ``<default>`` for None (all brokers)."""
    return DEFAULT_BROKER_ENTITY if broker_id is None else str(_checked_id("broker_id", broker_id))


def broker_config_path(broker_id: int | None) -> str:
    """``/config/brokers/<id>``, or ``/config/brokers/<default>`` for None."""
    return f"{CONFIG_BROKERS_PATH}/{broker_config_entity(broker_id)}"


# ------------------------------------------------------------------------------------ errors


class ZkDataError(ValueError):
    """A znode's payload does not have Kafka's shape. Names the znode and the field."""

    def __init__(self, path: str, field_name: str, reason: str) -> None:
        super().__init__(f"malformed znode {path}: field {field_name!r}: {reason}")
        self.path = path
        self.field = field_name
        self.reason = reason


class _Reader:
    """Typed access to one decoded JSON object, raising ZkDataError with path and field."""

    def __init__(self, path: str, data: bytes) -> None:
        self.path = path
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError as error:
            raise ZkDataError(path, "<json>", f"not JSON ({error})") from None
        if not isinstance(value, dict):
            raise ZkDataError(path, "<json>", f"expected a JSON object, got {type(value).__name__}")
        self.value: dict[str, Any] = value

    def error(self, field_name: str, reason: str) -> ZkDataError:
        return ZkDataError(self.path, field_name, reason)

    def get(self, key: str) -> Any:
        if key not in self.value:
            raise self.error(key, "missing")
        return self.value[key]

    def integer(self, key: str, value: Any = None, *, minimum: int | None = None) -> int:
        raw = self.get(key) if value is None else value
        if type(raw) is not int:
            raise self.error(key, f"expected an integer, got {raw!r}")
        if minimum is not None and raw < minimum:
            raise self.error(key, f"must be >= {minimum}, got {raw}")
        return raw

    def string(self, key: str) -> str:
        raw = self.get(key)
        if not isinstance(raw, str):
            raise self.error(key, f"expected a string, got {raw!r}")
        return raw

    def version(self, *accepted: int) -> int:
        version = self.integer("version")
        if version not in accepted:
            raise self.error("version", f"unsupported version {version} (accepted: {list(accepted)})")
        return version

    def int_list(self, key: str, value: Any = None) -> tuple[int, ...]:
        raw = self.get(key) if value is None else value
        if not isinstance(raw, list):
            raise self.error(key, f"expected a list of integers, got {raw!r}")
        return tuple(self.integer(key, item, minimum=0) for item in raw)

    def timestamp_ms(self, key: str = "timestamp") -> int:
        # Kafka writes timestamps as decimal strings.
        raw = self.string(key)
        if not _DECIMAL.fullmatch(raw):
            raise self.error(key, f"expected decimal milliseconds as a string, got {raw!r}")
        return int(raw)


def _dumps(value: Mapping[str, Any]) -> bytes:
    return orjson.dumps(value)


# ------------------------------------------------------------------------ broker registration


@dataclass(frozen=True, slots=True, kw_only=True)
class EndPoint:
    listener_name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    @property
    def connection_string(self) -> str:
        return f"{self.listener_name}://{self.host}:{self.port}"


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerRegistration:
    """The data of ``/brokers/ids/<broker_id>`` (Kafka's ``BrokerInfo``, version 4)."""

    broker_id: int
    endpoints: tuple[EndPoint, ...]
    timestamp_ms: int
    jmx_port: int = -1
    rack: str | None = None
    version: int = 4
    # Beyond Kafka: this process started on a used log dir after an unclean shutdown (or after a clean
    # one by a process that had such a start), and no controller has seen it yet: it may hold less
    # than an older ISR says (unflushed writes lost by a power loss). Written as
    # ``"unclean_start": true``, absent when false; a controller that finds it in an ISR older than
    # the registration treats it as bounced (docs/controller.md §2).
    unclean_start: bool = False

    def endpoint(self, listener_name: str = HTTP_LISTENER_NAME) -> EndPoint:
        for endpoint in self.endpoints:
            if endpoint.listener_name == listener_name:
                return endpoint
        raise KeyError(f"broker {self.broker_id} has no {listener_name} listener")

    def with_timestamp(self, timestamp_ms: int) -> BrokerRegistration:
        return replace(self, timestamp_ms=timestamp_ms)


def http_broker_registration(
    broker_id: int,
    host: str,
    port: int,
    *,
    timestamp_ms: int,
    rack: str | None = None,
    unclean_start: bool = False,
    tls: bool = False,
    extra_endpoints: tuple[EndPoint, ...] = (),
) -> BrokerRegistration:
    """A registration whose first listener is the broker's HTTP endpoint (HTTPS, SSL, with ``tls``),
    followed by ``extra_endpoints`` (the KAFKA listener, when the broker has one)."""
    endpoint = (
        EndPoint(listener_name=HTTPS_LISTENER_NAME, host=host, port=port, security_protocol="SSL")
        if tls
        else EndPoint(listener_name=HTTP_LISTENER_NAME, host=host, port=port)
    )
    return BrokerRegistration(
        broker_id=_checked_id("broker_id", broker_id),
        endpoints=(endpoint, *extra_endpoints),
        timestamp_ms=timestamp_ms,
        rack=rack,
        unclean_start=unclean_start,
    )


def encode_broker_registration(registration: BrokerRegistration) -> bytes:
    plaintext = next((e for e in registration.endpoints if e.security_protocol == "PLAINTEXT"), None)
    value: dict[str, Any] = {
        "version": 4,
        "host": None if plaintext is None else plaintext.host,
        "port": -1 if plaintext is None else plaintext.port,
        "endpoints": [endpoint.connection_string for endpoint in registration.endpoints],
        "listener_security_protocol_map": {
            e.listener_name: e.security_protocol for e in registration.endpoints
        },
        "jmx_port": registration.jmx_port,
        "timestamp": str(registration.timestamp_ms),
    }
    if registration.rack is not None:
        value["rack"] = registration.rack
    if registration.unclean_start:
        value["unclean_start"] = True
    return _dumps(value)


def parse_broker_id(name: str, *, path: str = BROKER_IDS_PATH) -> int:
    """A child name of ``/brokers/ids`` -> the broker id."""
    if not _DECIMAL.fullmatch(name):
        raise ZkDataError(f"{path}/{name}", "<name>", "a broker id must be a non-negative integer")
    return int(name)


def decode_broker_registration(broker_id: int, data: bytes, *, path: str | None = None) -> BrokerRegistration:
    """Versions 4 and 5 (5 adds ``features``, ignored here)."""
    reader = _Reader(path or broker_id_path(broker_id), data)
    version = reader.version(4, 5)
    protocols_raw = reader.get("listener_security_protocol_map")
    if not isinstance(protocols_raw, dict) or not all(isinstance(v, str) for v in protocols_raw.values()):
        raise reader.error("listener_security_protocol_map", "expected an object of strings")
    endpoints_raw = reader.get("endpoints")
    if not isinstance(endpoints_raw, list) or not endpoints_raw:
        raise reader.error("endpoints", f"expected a non-empty list, got {endpoints_raw!r}")
    endpoints: list[EndPoint] = []
    for raw in endpoints_raw:
        match = _ENDPOINT.fullmatch(raw) if isinstance(raw, str) else None
        if match is None:
            raise reader.error("endpoints", f"expected LISTENER://host:port, got {raw!r}")
        listener = match["listener"]
        if listener not in protocols_raw:
            raise reader.error("listener_security_protocol_map", f"no security protocol for {listener}")
        endpoints.append(
            EndPoint(
                listener_name=listener,
                host=match["host"],
                port=int(match["port"]),
                security_protocol=protocols_raw[listener],
            )
        )
    rack = reader.value.get("rack")
    if rack is not None and not isinstance(rack, str):
        raise reader.error("rack", f"expected a string or null, got {rack!r}")
    unclean_start = reader.value.get("unclean_start", False)
    if not isinstance(unclean_start, bool):
        raise reader.error("unclean_start", f"expected a boolean, got {unclean_start!r}")
    return BrokerRegistration(
        broker_id=broker_id,
        endpoints=tuple(endpoints),
        timestamp_ms=reader.timestamp_ms(),
        jmx_port=reader.integer("jmx_port"),
        rack=rack,
        version=version,
        unclean_start=unclean_start,
    )


# -------------------------------------------------------------------------------- controller


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerRegistration:
    """The data of ``/controller``."""

    broker_id: int
    timestamp_ms: int


def encode_controller(controller: ControllerRegistration) -> bytes:
    return _dumps({"version": 1, "brokerid": controller.broker_id, "timestamp": str(controller.timestamp_ms)})


def decode_controller(data: bytes, *, path: str = CONTROLLER_PATH) -> ControllerRegistration:
    reader = _Reader(path, data)
    reader.version(1)
    return ControllerRegistration(
        broker_id=reader.integer("brokerid", minimum=0), timestamp_ms=reader.timestamp_ms()
    )


def encode_controller_epoch(controller_epoch: int) -> bytes:
    return str(_checked_id("controller_epoch", controller_epoch)).encode()


def decode_controller_epoch(data: bytes, *, path: str = CONTROLLER_EPOCH_PATH) -> int:
    text = data.decode("utf-8", errors="replace")
    if not _DECIMAL.fullmatch(text):
        raise ZkDataError(path, "<data>", f"expected a decimal controller epoch, got {text!r}")
    return int(text)


# ---------------------------------------------------------------------------------- topics


def _frozen(value: Mapping[int, Iterable[int]]) -> Mapping[int, tuple[int, ...]]:
    return MappingProxyType({partition: tuple(replicas) for partition, replicas in sorted(value.items())})


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicAssignment:
    """The data of ``/brokers/topics/<topic>``: replicas per partition, in preference order.

    While a partition is being reassigned (KIP-455), ``partitions`` holds the full replica set
    (target replicas first, then the original ones being removed), ``adding_replicas`` the
    replicas that are not in the original set and ``removing_replicas`` those not in the target.
    A partition that is not reassigning has no entry in either map (an empty list is dropped)."""

    partitions: Mapping[int, tuple[int, ...]]
    adding_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing_replicas: Mapping[int, tuple[int, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Read-only views, so that a frozen assignment really cannot change.
        object.__setattr__(self, "partitions", _frozen(self.partitions))
        for name in ("adding_replicas", "removing_replicas"):
            object.__setattr__(self, name, _frozen({p: r for p, r in getattr(self, name).items() if r}))

    @property
    def reassigning(self) -> frozenset[int]:
        """The partitions with a reassignment in progress."""
        return frozenset(self.adding_replicas) | frozenset(self.removing_replicas)


def encode_topic_assignment(assignment: TopicAssignment) -> bytes:
    """Always version 2, as Kafka 2.4 writes it: the two maps are empty unless a partition of the
    topic is being reassigned."""

    def as_json(value: Mapping[int, tuple[int, ...]]) -> dict[str, list[int]]:
        return {str(partition): list(replicas) for partition, replicas in value.items()}

    return _dumps(
        {
            "version": 2,
            "partitions": as_json(assignment.partitions),
            "adding_replicas": as_json(assignment.adding_replicas),
            "removing_replicas": as_json(assignment.removing_replicas),
        }
    )


def decode_topic_assignment(topic: str, data: bytes, *, path: str | None = None) -> TopicAssignment:
    """Versions 1 (partitions only, before Kafka 2.4) and 2."""
    reader = _Reader(path or topic_path(topic), data)
    version = reader.version(1, 2)

    def replicas_by_partition(key: str) -> dict[int, tuple[int, ...]]:
        raw = reader.get(key)
        if not isinstance(raw, dict):
            raise reader.error(key, f"expected an object keyed by partition, got {raw!r}")
        result: dict[int, tuple[int, ...]] = {}
        for partition, replicas in raw.items():
            if not _DECIMAL.fullmatch(partition):
                raise reader.error(key, f"partition key {partition!r} is not a non-negative integer")
            result[int(partition)] = reader.int_list(f"{key}.{partition}", replicas)
        return result

    partitions = replicas_by_partition("partitions")
    if version == 1:
        return TopicAssignment(partitions=partitions)
    return TopicAssignment(
        partitions=partitions,
        adding_replicas=replicas_by_partition("adding_replicas"),
        removing_replicas=replicas_by_partition("removing_replicas"),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionState:
    """The data of ``.../partitions/<p>/state`` (Kafka's ``LeaderIsrAndControllerEpoch``).

    The znode's own version (its ``zk_version``) is not in the payload: it comes from the Stat.
    ``leader`` is -1 when the partition has no leader.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int


def encode_partition_state(state: PartitionState) -> bytes:
    return _dumps(
        {
            "version": 1,
            "leader": state.leader,
            "leader_epoch": state.leader_epoch,
            "controller_epoch": state.controller_epoch,
            "isr": list(state.isr),
        }
    )


def decode_partition_state(data: bytes, *, path: str) -> PartitionState:
    reader = _Reader(path, data)
    reader.version(1)
    return PartitionState(
        leader=reader.integer("leader", minimum=-1),
        leader_epoch=reader.integer("leader_epoch", minimum=0),
        isr=reader.int_list("isr"),
        controller_epoch=reader.integer("controller_epoch", minimum=0),
    )


# ---------------------------------------------------------------------------- notifications


@dataclass(frozen=True, slots=True, kw_only=True, order=True)
class TopicPartition:
    topic: str
    partition: int


def _encode_partition_list(partitions: Iterable[TopicPartition]) -> bytes:
    ordered = sorted(set(partitions))
    return _dumps(
        {"version": 1, "partitions": [{"topic": tp.topic, "partition": tp.partition} for tp in ordered]}
    )


def _decode_partition_list(path: str, data: bytes) -> frozenset[TopicPartition]:
    reader = _Reader(path, data)
    reader.version(1)
    raw = reader.get("partitions")
    if not isinstance(raw, list):
        raise reader.error("partitions", f"expected a list, got {raw!r}")
    result: set[TopicPartition] = set()
    for index, item in enumerate(raw):
        where = f"partitions[{index}]"
        if not isinstance(item, dict):
            raise reader.error(where, f"expected an object, got {item!r}")
        topic, partition = item.get("topic"), item.get("partition")
        if not isinstance(topic, str) or not _LEGAL_TOPIC.fullmatch(topic):
            raise reader.error(f"{where}.topic", f"expected a legal topic name, got {topic!r}")
        result.add(
            TopicPartition(topic=topic, partition=reader.integer(f"{where}.partition", partition, minimum=0))
        )
    return frozenset(result)


def encode_isr_change_notification(partitions: Iterable[TopicPartition]) -> bytes:
    """The data of one ``/isr_change_notification/isr_change_<seq>`` znode (sorted, deduplicated)."""
    return _encode_partition_list(partitions)


def decode_isr_change_notification(data: bytes, *, path: str) -> frozenset[TopicPartition]:
    return _decode_partition_list(path, data)


def encode_preferred_replica_election(partitions: Iterable[TopicPartition]) -> bytes:
    return _encode_partition_list(partitions)


def decode_preferred_replica_election(
    data: bytes, *, path: str = PREFERRED_REPLICA_ELECTION_PATH
) -> frozenset[TopicPartition]:
    return _decode_partition_list(path, data)


def encode_reassign_partitions(reassignments: Mapping[TopicPartition, Iterable[int]]) -> bytes:
    """``/admin/reassign_partitions``: the target replicas of each partition to reassign (Kafka's
    legacy, ZooKeeper-initiated way; sorted by partition)."""
    return _dumps(
        {
            "version": 1,
            "partitions": [
                {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
                for tp, replicas in sorted(reassignments.items())
            ],
        }
    )


def decode_reassign_partitions(
    data: bytes, *, path: str = REASSIGN_PARTITIONS_PATH
) -> dict[TopicPartition, tuple[int, ...]]:
    """Target replicas by partition. A replica list must be non-empty and without duplicates; a
    partition named twice keeps its last entry (Kafka builds a map too)."""
    reader = _Reader(path, data)
    reader.version(1)
    raw = reader.get("partitions")
    if not isinstance(raw, list):
        raise reader.error("partitions", f"expected a list, got {raw!r}")
    result: dict[TopicPartition, tuple[int, ...]] = {}
    for index, item in enumerate(raw):
        where = f"partitions[{index}]"
        if not isinstance(item, dict):
            raise reader.error(where, f"expected an object, got {item!r}")
        topic = item.get("topic")
        if not isinstance(topic, str) or not _LEGAL_TOPIC.fullmatch(topic):
            raise reader.error(f"{where}.topic", f"expected a legal topic name, got {topic!r}")
        partition = reader.integer(f"{where}.partition", item.get("partition"), minimum=0)
        replicas = reader.int_list(f"{where}.replicas", item.get("replicas"))
        if not replicas or len(set(replicas)) != len(replicas):
            raise reader.error(f"{where}.replicas", f"expected distinct broker ids, got {list(replicas)}")
        result[TopicPartition(topic=topic, partition=partition)] = replicas
    return result


# ----------------------------------------------------------------------------- topic config


def encode_topic_config(config: Mapping[str, str]) -> bytes:
    """The data of ``/config/topics/<topic>``: overrides of topic-level configs, all strings."""
    return _dumps({"version": 1, "config": dict(sorted(config.items()))})


def decode_topic_config(topic: str, data: bytes, *, path: str | None = None) -> Mapping[str, str]:
    return _decode_entity_config(path or topic_config_path(topic), data)


def _decode_entity_config(path: str, data: bytes) -> Mapping[str, str]:
    """An entity's config znode (a topic's, a broker's, the brokers' default): version 1, string
    values only."""
    reader = _Reader(path, data)
    reader.version(1)
    raw = reader.get("config")
    if not isinstance(raw, dict):
        raise reader.error("config", f"expected an object, got {raw!r}")
    for key, value in raw.items():
        if not isinstance(value, str):
            raise reader.error(f"config.{key}", f"expected a string value, got {value!r}")
    return MappingProxyType(dict(raw))


def encode_broker_config(config: Mapping[str, str]) -> bytes:
    """The data of ``/config/brokers/<id>`` or ``/config/brokers/<default>`` (same shape as a topic's)."""
    return encode_topic_config(config)


def decode_broker_config(entity: str, data: bytes, *, path: str | None = None) -> Mapping[str, str]:
    return _decode_entity_config(path or f"{CONFIG_BROKERS_PATH}/{entity}", data)


def encode_broker_config_change_notification(broker_id: int | None) -> bytes:
    """The notification after a change of ``/config/brokers/<id>`` (``<default>`` for None)."""
    return _dumps({"version": 2, "entity_path": f"brokers/{broker_config_entity(broker_id)}"})


def encode_config_change_notification(topic: str) -> bytes:
    """A ``/config/changes/config_change_<seq>`` znode: "the config of this entity changed"."""
    return _dumps({"version": 2, "entity_path": f"topics/{_checked_topic(topic)}"})


def decode_config_change_notification(data: bytes, *, path: str) -> tuple[str, str]:
    """(entity type, entity name), e.g. ("topics", "orders"); version 1 is Kafka's older shape."""
    reader = _Reader(path, data)
    version = reader.version(1, 2)
    if version == 1:
        return reader.string("entity_type"), reader.string("entity_name")
    entity_path = reader.string("entity_path")
    entity_type, _, name = entity_path.partition("/")
    if not name:
        raise reader.error("entity_path", f"expected <type>/<name>, got {entity_path!r}")
    return entity_type, name


# ------------------------------------------------------------------------ producer id blocks


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerIdBlock:
    """A range of producer ids one broker hands out (Kafka's ``ProducerIdManager``)."""

    broker_id: int
    block_start: int
    block_end: int


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    # Kafka writes the ids as decimal strings (they are longs).
    return _dumps(
        {
            "version": 1,
            "broker": block.broker_id,
            "block_start": str(block.block_start),
            "block_end": str(block.block_end),
        }
    )


def decode_producer_id_block(data: bytes, *, path: str = LATEST_PRODUCER_ID_BLOCK_PATH) -> ProducerIdBlock:
    reader = _Reader(path, data)
    reader.version(1)
    bounds = []
    for key in ("block_start", "block_end"):
        raw = reader.string(key)
        if not _DECIMAL.fullmatch(raw):
            raise reader.error(key, f"expected a decimal id as a string, got {raw!r}")
        bounds.append(int(raw))
    if bounds[1] < bounds[0]:
        raise reader.error("block_end", f"{bounds[1]} is below block_start {bounds[0]}")
    return ProducerIdBlock(
        broker_id=reader.integer("broker", minimum=0), block_start=bounds[0], block_end=bounds[1]
    )


# -------------------------------------------------------------------------------- cluster id


def encode_cluster_id(cluster_id: str) -> bytes:
    """``/cluster/id`` as Kafka writes it (its version is a string there)."""
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes, *, path: str = CLUSTER_ID_PATH) -> str:
    reader = _Reader(path, data)
    if reader.get("version") not in ("1", 1):
        raise reader.error("version", f"unsupported version {reader.get('version')!r}")
    cluster_id = reader.string("id")
    if not cluster_id:
        raise reader.error("id", "empty")
    return cluster_id
