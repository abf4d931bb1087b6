"""The storage engine: Kafka's log, byte for byte, over a FileSystem port.

Module map (each module's docstring states its rules):

* ``records`` / ``record_builder`` / ``varint`` / ``compression``: record batch v2, sans-I/O;
* ``fs`` (port + MemoryFileSystem) and ``os_fs`` (the only module touching real files);
* ``index`` / ``segment``: ``.index``, ``.timeindex`` and ``.log`` of one segment;
* ``log`` (+ ``log_loader``, ``log_validator``): one partition's log;
* ``leader_epoch``, ``producer_state``, ``checkpoint``: the state kept beside a log;
* ``log_manager``: one log dir, its checkpoint files and the clean-shutdown marker;
* ``config``: ``LogConfig`` with Kafka's topic keys and defaults; ``errors``: the exception tree.

The storage knows offsets, batches, leader epochs and producer ids only: never replication roles,
the ISR or the controller. Nothing here imports ``actors`` or ``ops``.
"""

from runtime.storage.checkpoint import CheckpointWrite, EpochEntry
from runtime.storage.compression import CompressionType
from runtime.storage.config import CompressionConfig, FlushPolicy, LogConfig
from runtime.storage.errors import (
    CorruptCheckpointError,
    CorruptIndexError,
    CorruptRecordError,
    InvalidOffsetError,
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    OffsetOutOfRangeError,
    OffsetsOutOfOrderError,
    OutOfOrderSequenceError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
    UnknownProducerIdError,
    UnsupportedCompressionError,
)
from runtime.storage.fs import FileHandle, FileSystem, MemoryFileSystem
from runtime.storage.leader_epoch import LeaderEpochCache
from runtime.storage.log import (
    FlushJob,
    Log,
    LogAppendInfo,
    LogOffsetMetadata,
    LogReadInfo,
    LogStatistics,
    TimestampAndOffset,
)
from runtime.storage.log_manager import CLEAN_SHUTDOWN_FILE, LogManager
from runtime.storage.producer_state import ProducerStateManager
from runtime.storage.record_builder import RecordBatchBuilder, SimpleRecord, build_batch
from runtime.storage.records import (
    BatchHeader,
    Record,
    RecordBatch,
    RecordHeader,
    TimestampType,
    iterate_batches,
)
from runtime.storage.topic_partition import TopicPartition

__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "BatchHeader",
    "CheckpointWrite",
    "CompressionConfig",
    "CompressionType",
    "CorruptCheckpointError",
    "CorruptIndexError",
    "CorruptRecordError",
    "EpochEntry",
    "FileHandle",
    "FileSystem",
    "FlushJob",
    "FlushPolicy",
    "InvalidOffsetError",
    "InvalidProducerEpochError",
    "InvalidRecordError",
    "InvalidTimestampError",
    "LeaderEpochCache",
    "Log",
    "LogAppendInfo",
    "LogConfig",
    "LogManager",
    "LogOffsetMetadata",
    "LogReadInfo",
    "LogStatistics",
    "MemoryFileSystem",
    "OffsetOutOfRangeError",
    "OffsetsOutOfOrderError",
    "OutOfOrderSequenceError",
    "ProducerStateManager",
    "Record",
    "RecordBatch",
    "RecordBatchBuilder",
    "RecordBatchTooLargeError",
    "RecordHeader",
    "RecordTooLargeError",
    "SimpleRecord",
    "TimestampAndOffset",
    "TimestampType",
    "TopicPartition",
    "UnexpectedAppendOffsetError",
    "UnknownProducerIdError",
    "UnsupportedCompressionError",
    "build_batch",
    "iterate_batches",
]
