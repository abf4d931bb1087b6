"""Public wire messages: Kafka's requests and responses, as frozen dataclasses.

Names follow Kafka's APIs (``ProduceRequest``/``ProduceResponse``, ``FetchRequest``, ``LeaderAndIsr
Request``...) and their fields follow Kafka's schemas, spelled out in snake case. Record batches
are ``bytes`` (they travel in the frame payload, never in JSON). Errors are ``ErrorCode`` values.

Who sends what:
* clients (producer, consumer, admin, replica fetchers) → a broker's ``broker`` actor:
  Produce, Fetch, ListOffsets, OffsetsForLeaderEpoch, Metadata;
* the controller → brokers: LeaderAndIsr, UpdateMetadata, StopReplica (each carrying the
  controller epoch, which brokers use to fence a deposed controller);
* brokers → the controller: ControlledShutdown;
* a broker's admin actor → the controller: AlterPartitionReassignments, ListPartitionReassignments,
  ElectLeaders.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from actors.common.errors import ErrorCode
from actors.common.types import TopicPartition
from runtime.codec import wire

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "NO_PARTITION_LEADER_EPOCH",
    "AlterPartitionReassignmentsRequest",
    "AlterPartitionReassignmentsResponse",
    "BrokerEndpoint",
    "ControlledShutdownRequest",
    "ControlledShutdownResponse",
    "ElectLeadersRequest",
    "ElectLeadersResponse",
    "FetchPartition",
    "FetchPartitionResponse",
    "FetchRequest",
    "FetchResponse",
    "LeaderAndIsrPartitionState",
    "LeaderAndIsrRequest",
    "LeaderAndIsrResponse",
    "ListOffsetsPartition",
    "ListOffsetsPartitionResponse",
    "ListOffsetsRequest",
    "ListOffsetsResponse",
    "ListPartitionReassignmentsRequest",
    "ListPartitionReassignmentsResponse",
    "ListenerEndpoint",
    "MetadataRequest",
    "MetadataResponse",
    "OffsetForLeaderEpochPartition",
    "OffsetForLeaderEpochResult",
    "OffsetsForLeaderEpochRequest",
    "OffsetsForLeaderEpochResponse",
    "OngoingPartitionReassignment",
    "PartitionError",
    "PartitionMetadata",
    "PartitionResult",
    "ProducePartitionData",
    "ProducePartitionResponse",
    "ProduceRequest",
    "ProduceResponse",
    "ReassignablePartition",
    "StopReplicaRequest",
    "StopReplicaResponse",
    "TopicMetadata",
    "UpdateMetadataPartitionState",
    "UpdateMetadataRequest",
    "UpdateMetadataResponse",
]

CONSUMER_REPLICA_ID = -1
# ListOffsets special timestamps.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
# A current leader epoch of -1 in a request means "do not check" (KIP-320 opt-out).
NO_PARTITION_LEADER_EPOCH = -1


@dataclass(frozen=True, slots=True, kw_only=True)
class ListenerEndpoint:
    """One listener of a broker as its registration names it (Kafka's UpdateMetadata endpoint)."""

    listener_name: str
    host: str
    port: int
    security_protocol: str


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerEndpoint:
    broker_id: int
    host: str
    port: int
    rack: str | None = None
    # Kafka's security protocol of the broker's listener (its registration's): SSL and SASL_SSL
    # are reached with https://. It travels with the address so peers and clients that learn a
    # broker from metadata reach it as it listens; absent (an older sender), PLAINTEXT.
    security_protocol: str = "PLAINTEXT"
    # Every listener of the broker's registration (the HTTP one above among them), as Kafka's
    # UpdateMetadata carries them: a broker answers a Kafka-protocol Metadata request with the
    # other brokers' KAFKA listeners. Absent (an older sender, a test): none beyond host:port.
    endpoints: tuple[ListenerEndpoint, ...] = ()

    @property
    def url(self) -> str:
        scheme = "https" if self.security_protocol in ("SSL", "SASL_SSL") else "http"
        return f"{scheme}://{self.host}:{self.port}"

    def endpoint(self, listener_name: str) -> ListenerEndpoint | None:
        """The broker's listener of that name, None when it has none."""
        return next((e for e in self.endpoints if e.listener_name == listener_name), None)


# ------------------------------------------------------------------------------------ Produce


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducePartitionData:
    topic: str
    partition: int
    records: bytes

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class ProduceRequest:
    acks: int
    timeout_ms: int
    partitions: tuple[ProducePartitionData, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProducePartitionResponse:
    topic: str
    partition: int
    error_code: ErrorCode
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class ProduceResponse:
    partitions: tuple[ProducePartitionResponse, ...]


# -------------------------------------------------------------------------------------- Fetch


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchPartition:
    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    log_start_offset: int = -1
    current_leader_epoch: int = NO_PARTITION_LEADER_EPOCH

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class FetchRequest:
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    partitions: tuple[FetchPartition, ...]

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchPartitionResponse:
    topic: str
    partition: int
    error_code: ErrorCode
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: bytes = b""
    error_message: str | None = None

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class FetchResponse:
    error_code: ErrorCode
    partitions: tuple[FetchPartitionResponse, ...]


# ----------------------------------------------------------------------- OffsetsForLeaderEpoch


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetForLeaderEpochPartition:
    topic: str
    partition: int
    current_leader_epoch: int
    leader_epoch: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetsForLeaderEpochRequest:
    replica_id: int
    partitions: tuple[OffsetForLeaderEpochPartition, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetForLeaderEpochResult:
    topic: str
    partition: int
    error_code: ErrorCode
    leader_epoch: int = -1
    end_offset: int = -1

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetsForLeaderEpochResponse:
    partitions: tuple[OffsetForLeaderEpochResult, ...]


# -------------------------------------------------------------------------------- ListOffsets


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsPartition:
    topic: str
    partition: int
    timestamp: int
    current_leader_epoch: int = NO_PARTITION_LEADER_EPOCH

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsRequest:
    replica_id: int
    partitions: tuple[ListOffsetsPartition, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsPartitionResponse:
    topic: str
    partition: int
    error_code: ErrorCode
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class ListOffsetsResponse:
    partitions: tuple[ListOffsetsPartitionResponse, ...]


# ----------------------------------------------------------------------------------- Metadata


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataRequest:
    """``topics=None`` asks for every topic. With ``allow_auto_topic_creation`` (Kafka's field,
    true by default) a broker with ``auto.create.topics.enable`` creates the named topics it does
    not know; tools that only look (admin, describe) send false."""

    topics: tuple[str, ...] | None = None
    allow_auto_topic_creation: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionMetadata:
    partition: int
    error_code: ErrorCode
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicMetadata:
    name: str
    error_code: ErrorCode
    partitions: tuple[PartitionMetadata, ...]


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataResponse:
    brokers: tuple[BrokerEndpoint, ...]
    controller_id: int
    topics: tuple[TopicMetadata, ...]
    cluster_id: str | None = None


# ------------------------------------------------------------------ controller → broker requests


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrPartitionState:
    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    is_new: bool = False

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: tuple[LeaderAndIsrPartitionState, ...]
    live_leaders: tuple[BrokerEndpoint, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionError:
    topic: str
    partition: int
    error_code: ErrorCode

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderAndIsrResponse:
    error_code: ErrorCode
    partitions: tuple[PartitionError, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataPartitionState:
    topic: str
    partition: int
    controller_epoch: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    partition_states: tuple[UpdateMetadataPartitionState, ...]
    live_brokers: tuple[BrokerEndpoint, ...]
    # Topics deleted since the last request: their partitions leave the metadata cache.
    deleted_topics: tuple[str, ...] = ()


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateMetadataResponse:
    error_code: ErrorCode


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaRequest:
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    delete_partitions: bool
    partitions: tuple[TopicPartition, ...]


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class StopReplicaResponse:
    error_code: ErrorCode
    partitions: tuple[PartitionError, ...] = ()


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdownRequest:
    broker_id: int
    broker_epoch: int


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class ControlledShutdownResponse:
    error_code: ErrorCode
    remaining_partitions: tuple[TopicPartition, ...] = field(default=())


# ---------------------------------------------------------------- admin → the controller
# Asked of the active controller's actor by a broker's admin actor (which answers NOT_CONTROLLER
# itself when no controller runs on its node). Kafka 2.4 routes these APIs to the controller too.


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class ReassignablePartition:
    """One partition's target replica list; ``replicas=None`` cancels its ongoing reassignment
    (KIP-455)."""

    topic: str
    partition: int
    replicas: tuple[int, ...] | None


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionReassignmentsRequest:
    partitions: tuple[ReassignablePartition, ...]


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionResult:
    """One partition's outcome in an admin → controller answer (reassignment, election)."""

    topic: str
    partition: int
    error_code: ErrorCode
    error_message: str | None = None


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionReassignmentsResponse:
    """``error_code`` is request-wide (NOT_CONTROLLER...); otherwise per partition."""

    error_code: ErrorCode
    error_message: str | None = None
    results: tuple[PartitionResult, ...] = ()


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class ListPartitionReassignmentsRequest:
    """``partitions=None`` lists every ongoing reassignment."""

    partitions: tuple[TopicPartition, ...] | None = None


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class OngoingPartitionReassignment:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class ListPartitionReassignmentsResponse:
    error_code: ErrorCode
    error_message: str | None = None
    reassignments: tuple[OngoingPartitionReassignment, ...] = ()


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class ElectLeadersRequest:
    """Kafka's ElectLeaders (KIP-460): ``election_type`` 0 = preferred, 1 = unclean;
    ``partitions=None`` means every partition."""

    election_type: int
    partitions: tuple[TopicPartition, ...] | None = None


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class ElectLeadersResponse:
    error_code: ErrorCode
    error_message: str | None = None
    results: tuple[PartitionResult, ...] = ()
