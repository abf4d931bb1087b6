"""LogConfig: Kafka's defaults, topic and broker keys, clear errors."""

from __future__ import annotations

import pytest

from runtime.storage.compression import CompressionType
from runtime.storage.config import LONG_MAX, CompressionConfig, FlushPolicy, LogConfig, RecordsValidation
from runtime.storage.records import TimestampType


def test_defaults_are_kafkas() -> None:
    config = LogConfig()
    assert config.segment_bytes == 1_073_741_824
    assert config.segment_ms == 604_800_000
    assert config.segment_jitter_ms == 0
    assert config.segment_index_bytes == 10_485_760
    assert config.index_interval_bytes == 4096
    assert config.flush_messages == LONG_MAX
    assert config.flush_ms == LONG_MAX
    assert config.retention_ms == 604_800_000
    assert config.retention_bytes == -1
    assert config.max_message_bytes == 1_000_012
    assert config.message_timestamp_type == TimestampType.CREATE_TIME
    assert config.message_timestamp_difference_max_ms == LONG_MAX
    assert config.compression_type is CompressionConfig.PRODUCER
    assert config.file_delete_delay_ms == 60_000
    assert config.flush_policy is FlushPolicy.REPLICATED
    assert config.records_validation is RecordsValidation.BATCH


def test_topic_keys_parse_over_a_base() -> None:
    base = LogConfig(retention_ms=5)
    config = LogConfig.from_properties(
        {
            "segment.bytes": "1024",
            "segment.ms": "3600000",
            "message.timestamp.type": "LogAppendTime",
            "compression.type": "zstd",
            "cleanup.policy": "delete",
            "unclean.leader.election.enable": "TRUE",
            "flush.policy": "per_batch",
            "preallocate": "true",
        },
        base,
    )
    assert config.segment_bytes == 1024
    assert config.segment_ms == 3_600_000
    assert config.retention_ms == 5
    assert config.message_timestamp_type == TimestampType.LOG_APPEND_TIME
    assert config.compression_type.target_codec(CompressionType.GZIP) == CompressionType.ZSTD
    assert config.delete_retention_enabled
    assert config.unclean_leader_election_enable
    assert config.flush_policy is FlushPolicy.PER_BATCH


def test_producer_compression_keeps_the_source_codec() -> None:
    assert CompressionConfig.PRODUCER.target_codec(CompressionType.LZ4) == CompressionType.LZ4
    assert CompressionConfig.UNCOMPRESSED.target_codec(CompressionType.LZ4) == CompressionType.NONE


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("segment.bytes", "abc", "segment.bytes: cannot parse 'abc'"),
        ("segment.bytes", "10", "segment.bytes: '10' is invalid \\(an int >= 14\\)"),
        ("segment.ms", "0", "segment.ms: '0' is invalid"),
        ("message.timestamp.type", "WallClock", "CreateTime or LogAppendTime"),
        ("compression.type", "brotli", "one of producer, uncompressed"),
        ("cleanup.policy", "keep", "log compaction is not supported"),
        ("cleanup.policy", "compact", "log compaction is not supported"),
        ("cleanup.policy", "compact,delete", "log compaction is not supported"),
        ("retention.ms", "99999999999999999999", "cannot parse"),
        ("unclean.leader.election.enable", "yes", "true or false"),
        ("no.such.key", "1", "unknown topic config 'no.such.key'"),
    ],
)
def test_bad_values_are_named(key: str, value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LogConfig.from_properties({key: value})


def test_direct_construction_is_validated() -> None:
    with pytest.raises(ValueError, match="index_interval_bytes: -1 is invalid"):
        LogConfig(index_interval_bytes=-1)


def test_broker_keys_with_ms_taking_precedence_over_hours() -> None:
    config = LogConfig.from_broker_properties(
        {
            "log.roll.hours": "2",
            "log.retention.hours": "1",
            "log.retention.ms": "1234",
            "message.max.bytes": "2000",
            "log.segment.bytes": "100000",
            "broker.id": "3",
        }
    )
    assert config.segment_ms == 7_200_000
    assert config.retention_ms == 1234
    assert config.max_message_bytes == 2000
    assert config.segment_bytes == 100_000
    assert LogConfig.from_broker_properties({"log.retention.hours": "-1"}).retention_ms == -1
