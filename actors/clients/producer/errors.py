"""The producer's typed errors: what a failed ``send`` raises, one class per Kafka error family.

Kafka's Java client turns each protocol error into an exception class; an application catches the
family it can act on (a timeout, a record that is too large, a fenced producer). These classes do
the same. Every instance carries the ``ErrorCode`` it stands for and a message saying what happened
to which records; ``retriable`` tells whether sending the same record again may succeed (the
producer has already retried it as far as ``retries`` and ``delivery.timeout.ms`` allow).

    ProducerError                         any failure of a send; error_code, retriable
    ├── ProducerTimeoutError              REQUEST_TIMED_OUT  delivery.timeout.ms or max.block.ms passed
    │   └── BufferExhaustedError          (same)   no buffer.memory within max.block.ms
    ├── NetworkError                      NETWORK_EXCEPTION  the broker could not be reached / no reply
    ├── InvalidMetadataError              stale leadership: NOT_LEADER_OR_FOLLOWER,
    │                                     LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION,
    │                                     KAFKA_STORAGE_ERROR, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH
    ├── NotEnoughReplicasError            NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND
    ├── RecordTooLargeError               MESSAGE_TOO_LARGE  (a single record above max.request.size,
    │                                     buffer.memory or the topic's max.message.bytes)
    ├── RecordBatchTooLargeError          RECORD_LIST_TOO_LARGE
    ├── CorruptRecordError                CORRUPT_MESSAGE
    ├── InvalidRecordError                INVALID_RECORD, INVALID_TIMESTAMP
    ├── InvalidRequiredAcksError          INVALID_REQUIRED_ACKS
    ├── OutOfOrderSequenceError           OUT_OF_ORDER_SEQUENCE_NUMBER  (idempotence: a gap, or a retry
    │                                     whose producer id changed meanwhile)
    ├── UnknownProducerIdError            UNKNOWN_PRODUCER_ID
    ├── ProducerFencedError               INVALID_PRODUCER_EPOCH
    └── ProducerClosedError               (no code)  a send after close, or records aborted by a forced close

``error_for(code, message)`` builds the right class for a code from a response; codes without a
family of their own become a plain ``ProducerError``. These are values the producer actor hands to
the client library (which sets them on futures); nothing in the actor raises them.
"""

from __future__ import annotations

from typing import Final

from actors.common.errors import ErrorCode, KafkaError

__all__ = [
    "BufferExhaustedError",
    "CorruptRecordError",
    "InvalidMetadataError",
    "InvalidRecordError",
    "InvalidRequiredAcksError",
    "MetadataTimeoutError",
    "NetworkError",
    "NotEnoughReplicasError",
    "OutOfOrderSequenceError",
    "ProducerClosedError",
    "ProducerError",
    "ProducerFencedError",
    "ProducerTimeoutError",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "UnknownProducerIdError",
    "error_for",
]


class ProducerError(KafkaError):
    """A send failed. ``error_code`` is Kafka's code for it (UNKNOWN_SERVER_ERROR when none applies).
    A ``KafkaError``, as every client's failures are, so ``except KafkaError`` catches them all."""

    default_code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str, error_code: ErrorCode | None = None) -> None:
        super().__init__(self.default_code if error_code is None else error_code, message)
        # The message alone, as before (KafkaError's str would prefix the code name).
        self.args = (message,)

    def __repr__(self) -> str:
        if type(self) is ProducerClosedError:
            return f"{type(self).__name__}({self.message})"  # a client-side state, no Kafka code
        return f"{type(self).__name__}({self.error_code.name}: {self.message})"


class ProducerTimeoutError(ProducerError):
    """Kafka's ``TimeoutException``: a deadline passed (delivery.timeout.ms for a batch, max.block.ms
    for metadata or buffer memory). A record that timed out after it was sent may still have been
    written."""

    default_code = ErrorCode.REQUEST_TIMED_OUT

    @property
    def retriable(self) -> bool:
        return True


class MetadataTimeoutError(ProducerTimeoutError):
    """The record's topic (or its partition) was not in the metadata within max.block.ms: the same
    condition that makes a blocked send raise, met by a record already handed over."""


class BufferExhaustedError(ProducerTimeoutError):
    """No buffer.memory became free within max.block.ms."""


class NetworkError(ProducerError):
    default_code = ErrorCode.NETWORK_EXCEPTION


class InvalidMetadataError(ProducerError):
    default_code = ErrorCode.NOT_LEADER_OR_FOLLOWER


class NotEnoughReplicasError(ProducerError):
    default_code = ErrorCode.NOT_ENOUGH_REPLICAS


class RecordTooLargeError(ProducerError):
    default_code = ErrorCode.MESSAGE_TOO_LARGE


class RecordBatchTooLargeError(ProducerError):
    default_code = ErrorCode.RECORD_LIST_TOO_LARGE


class CorruptRecordError(ProducerError):
    default_code = ErrorCode.CORRUPT_MESSAGE


class InvalidRecordError(ProducerError):
    default_code = ErrorCode.INVALID_RECORD


class InvalidRequiredAcksError(ProducerError):
    default_code = ErrorCode.INVALID_REQUIRED_ACKS


class OutOfOrderSequenceError(ProducerError):
    default_code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


class UnknownProducerIdError(ProducerError):
    default_code = ErrorCode.UNKNOWN_PRODUCER_ID


class ProducerFencedError(ProducerError):
    default_code = ErrorCode.INVALID_PRODUCER_EPOCH


class ProducerClosedError(ProducerError):
    """The producer is closed (or was closed forcefully while these records were pending)."""

    @property
    def retriable(self) -> bool:
        return False


_FAMILIES: Final[dict[ErrorCode, type[ProducerError]]] = {
    ErrorCode.REQUEST_TIMED_OUT: ProducerTimeoutError,
    ErrorCode.NETWORK_EXCEPTION: NetworkError,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: InvalidMetadataError,
    ErrorCode.LEADER_NOT_AVAILABLE: InvalidMetadataError,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: InvalidMetadataError,
    ErrorCode.KAFKA_STORAGE_ERROR: InvalidMetadataError,
    ErrorCode.FENCED_LEADER_EPOCH: InvalidMetadataError,
    ErrorCode.UNKNOWN_LEADER_EPOCH: InvalidMetadataError,
    ErrorCode.NOT_ENOUGH_REPLICAS: NotEnoughReplicasError,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: NotEnoughReplicasError,
    ErrorCode.MESSAGE_TOO_LARGE: RecordTooLargeError,
    ErrorCode.RECORD_LIST_TOO_LARGE: RecordBatchTooLargeError,
    ErrorCode.CORRUPT_MESSAGE: CorruptRecordError,
    ErrorCode.INVALID_RECORD: InvalidRecordError,
    ErrorCode.INVALID_TIMESTAMP: InvalidRecordError,
    ErrorCode.INVALID_REQUIRED_ACKS: InvalidRequiredAcksError,
    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER: OutOfOrderSequenceError,
    ErrorCode.UNKNOWN_PRODUCER_ID: UnknownProducerIdError,
    ErrorCode.INVALID_PRODUCER_EPOCH: ProducerFencedError,
}


def error_for(code: ErrorCode, message: str | None = None) -> ProducerError:
    """The typed error for a response's error code (``message`` from the response when it has one)."""
    family = _FAMILIES.get(code, ProducerError)
    return family(message or f"the broker answered {code.name}", code)
