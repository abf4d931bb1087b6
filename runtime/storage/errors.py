"""The storage engine's exceptions, each naming the Kafka error it maps to.

    runtime.errors.StorageError
    ├── CorruptRecordError             CORRUPT_MESSAGE            bad CRC, bad magic, bad framing or lengths
    ├── RecordTooLargeError            MESSAGE_TOO_LARGE          a batch larger than max.message.bytes
    ├── RecordBatchTooLargeError       RECORD_LIST_TOO_LARGE      an append larger than segment.bytes
    ├── InvalidRecordError             INVALID_RECORD             framed, but not acceptable (offsets, counts)
    ├── InvalidTimestampError          INVALID_TIMESTAMP          CreateTime out of bounds or from a client
    ├── UnsupportedCompressionError    UNSUPPORTED_COMPRESSION_TYPE  a codec this build cannot (de)compress
    ├── OffsetOutOfRangeError          OFFSET_OUT_OF_RANGE        read below log start or above log end
    ├── UnexpectedAppendOffsetError    UNKNOWN_SERVER_ERROR       follower append below the log end offset
    ├── OffsetsOutOfOrderError         UNKNOWN_SERVER_ERROR       follower append with non-monotonic offsets
    ├── OutOfOrderSequenceError        OUT_OF_ORDER_SEQUENCE_NUMBER  idempotent producer gap
    ├── InvalidProducerEpochError      INVALID_PRODUCER_EPOCH     fenced (older) producer epoch
    ├── UnknownProducerIdError         UNKNOWN_PRODUCER_ID        no state for the producer and sequence != 0
    ├── InvalidOffsetError             UNKNOWN_SERVER_ERROR       index entry out of order or not relative
    ├── CorruptIndexError              KAFKA_STORAGE_ERROR        an index file that fails its sanity check
    └── CorruptCheckpointError         KAFKA_STORAGE_ERROR        a checkpoint file that cannot be parsed

Rules kept here: every message says exactly what was wrong (offsets, sizes, expected versus actual),
so the partition layer can put ``error_name`` in a response and the text in a log line without
adding context. Programmer errors (calling the API wrongly) are ``ValueError``/``AssertionError``,
not storage errors.
"""

from __future__ import annotations

from typing import ClassVar

from runtime.errors import StorageError

__all__ = [
    "CorruptCheckpointError",
    "CorruptIndexError",
    "CorruptRecordError",
    "InvalidOffsetError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "OffsetOutOfRangeError",
    "OffsetsOutOfOrderError",
    "OutOfOrderSequenceError",
    "RecordBatchTooLargeError",
    "RecordTooLargeError",
    "StorageError",
    "UnexpectedAppendOffsetError",
    "UnknownProducerIdError",
    "UnsupportedCompressionError",
]


class _KafkaStorageError(StorageError):
    """A storage failure with the Kafka error name it is reported as."""

    error_name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"


class CorruptRecordError(_KafkaStorageError):
    error_name = "CORRUPT_MESSAGE"


class RecordTooLargeError(_KafkaStorageError):
    error_name = "MESSAGE_TOO_LARGE"


class RecordBatchTooLargeError(_KafkaStorageError):
    error_name = "RECORD_LIST_TOO_LARGE"


class InvalidRecordError(_KafkaStorageError):
    error_name = "INVALID_RECORD"


class InvalidTimestampError(_KafkaStorageError):
    error_name = "INVALID_TIMESTAMP"


class UnsupportedCompressionError(_KafkaStorageError):
    error_name = "UNSUPPORTED_COMPRESSION_TYPE"


class OffsetOutOfRangeError(_KafkaStorageError):
    error_name = "OFFSET_OUT_OF_RANGE"


class UnexpectedAppendOffsetError(_KafkaStorageError):
    """A follower append whose first offset is below the log end offset (Kafka reports it as unknown)."""

    error_name = "UNKNOWN_SERVER_ERROR"


class OffsetsOutOfOrderError(_KafkaStorageError):
    error_name = "UNKNOWN_SERVER_ERROR"


class OutOfOrderSequenceError(_KafkaStorageError):
    error_name = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class InvalidProducerEpochError(_KafkaStorageError):
    error_name = "INVALID_PRODUCER_EPOCH"


class UnknownProducerIdError(_KafkaStorageError):
    error_name = "UNKNOWN_PRODUCER_ID"


class InvalidOffsetError(_KafkaStorageError):
    """An index entry that would break the index's ordering, or an offset not expressible relative to a
    segment's base offset (Kafka's ``InvalidOffsetException``)."""

    error_name = "UNKNOWN_SERVER_ERROR"


class CorruptIndexError(_KafkaStorageError):
    """An index file whose entries are out of order or out of bounds; the segment is then rebuilt."""

    error_name = "KAFKA_STORAGE_ERROR"


class CorruptCheckpointError(_KafkaStorageError):
    """A checkpoint file with a wrong version, count or line (Kafka marks the log dir offline)."""

    error_name = "KAFKA_STORAGE_ERROR"
