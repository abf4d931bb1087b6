"""Kafka's error codes, as data.

Protocol failures travel in responses as an ``ErrorCode`` (Kafka's numbers and names), never as
exceptions. Each code knows whether a client may retry it (``retriable``) and whether it means the
client's metadata is stale (``invalid_metadata``: refresh before retrying), as Kafka's ``Errors``
enum and the Java client's exception hierarchy define them (docs/producer.md §3, docs/replication.md §7).

Kafka 2.7 renamed NOT_LEADER_FOR_PARTITION (6) to NOT_LEADER_OR_FOLLOWER; the new name is used.
"""

from __future__ import annotations

import enum

__all__ = ["ErrorCode", "KafkaError"]


class ErrorCode(enum.IntEnum):
    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    INVALID_TIMESTAMP = 32
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    KAFKA_STORAGE_ERROR = 56
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    TOPIC_DELETION_DISABLED = 73
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    INVALID_RECORD = 87

    @property
    def retriable(self) -> bool:
        return self in _RETRIABLE

    @property
    def invalid_metadata(self) -> bool:
        return self in _INVALID_METADATA

    @classmethod
    def of(cls, name_or_code: str | int) -> ErrorCode:
        """Look a code up by Kafka name or number (unknown numbers become UNKNOWN_SERVER_ERROR)."""
        if isinstance(name_or_code, str):
            return cls[name_or_code]
        try:
            return cls(name_or_code)
        except ValueError:
            return cls.UNKNOWN_SERVER_ERROR


_INVALID_METADATA = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
    }
)

_RETRIABLE = _INVALID_METADATA | frozenset(
    {
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.OFFSET_NOT_AVAILABLE,
        ErrorCode.NOT_CONTROLLER,
        # The coordinator errors are Kafka's RetriableException subclasses: find the coordinator
        # again (or wait for it to load) and retry.
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    }
)


class KafkaError(Exception):
    """A failure a client reports to its caller: Kafka's error code and the broker's message.

    Clients (producer, consumer, admin) raise it, or a subclass, so callers can branch on
    ``error_code`` (and ``retriable``) as Java clients branch on exception types.
    """

    def __init__(self, error_code: ErrorCode, message: str | None = None) -> None:
        self.error_code = error_code
        self.message = message or error_code.name
        super().__init__(f"{error_code.name}: {self.message}" if message else error_code.name)

    @property
    def retriable(self) -> bool:
        return self.error_code.retriable
