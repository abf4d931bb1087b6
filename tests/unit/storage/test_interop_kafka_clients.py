"""Interoperability with real Kafka client code, used as an oracle only.

kafka-python's ``DefaultRecordBatchBuilder`` / ``DefaultRecordBatch`` and aiokafka's pure-Python
``_DefaultRecordBatchBuilderPy`` / ``_DefaultRecordBatchPy`` (and its Cython ``DefaultRecordBatch``)
implement record batch v2 independently of us. Batches they build must decode with ours, and batches
we build must decode with theirs, for every codec both sides support.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from aiokafka import codec as aiokafka_codec
from aiokafka.record import default_records as aiokafka_records

with warnings.catch_warnings():
    # kafka-python 3.0 loads its protocol schemas with the deprecated importlib.resources.read_text.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch as KafkaPythonBatch
    from kafka.record.default_records import DefaultRecordBatchBuilder as KafkaPythonBuilder

from runtime.storage.compression import CompressionType
from runtime.storage.record_builder import SimpleRecord, build_batch
from runtime.storage.records import RecordHeader, iterate_batches

CODECS = [CompressionType.NONE, CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD]
_AIOKAFKA_CODECS = {
    CompressionType.NONE: True,
    CompressionType.GZIP: aiokafka_codec.has_gzip(),
    CompressionType.LZ4: aiokafka_codec.has_lz4(),
    CompressionType.ZSTD: aiokafka_codec.has_zstd(),
}

# Compressible values (kafka-python sends uncompressed when compression does not pay).
RECORDS = [
    SimpleRecord(
        b"value-" * 40,
        b"key-1",
        (RecordHeader("trace", b"abc"), RecordHeader("empty", None)),
        1_600_000_000_000,
    ),
    SimpleRecord(None, b"key-2", (), 1_600_000_000_500),
    SimpleRecord(b"value-" * 40, None, (), 1_599_999_999_000),
    SimpleRecord(b"\x00\xff" * 100, b"", (RecordHeader("h", b""),), 1_600_000_000_100),
]

BUILDERS: dict[str, Any] = {
    "kafka-python": KafkaPythonBuilder,
    "aiokafka-py": aiokafka_records._DefaultRecordBatchBuilderPy,
    "aiokafka": aiokafka_records.DefaultRecordBatchBuilder,
}
# What each client writes as partitionLeaderEpoch in a producer batch.
PRODUCER_LEADER_EPOCH = {"kafka-python": 0, "aiokafka-py": -1, "aiokafka": -1}
READERS: dict[str, Any] = {
    "kafka-python": KafkaPythonBatch,
    "aiokafka-py": aiokafka_records._DefaultRecordBatchPy,
    "aiokafka": aiokafka_records.DefaultRecordBatch,
}


def _skip_unless_supported(client: str, codec: CompressionType) -> None:
    if client.startswith("aiokafka") and not _AIOKAFKA_CODECS[codec]:
        pytest.skip(f"aiokafka has no {codec.name.lower()} library in this environment (it wants cramjam)")


def _their_batch(name: str, codec: CompressionType) -> bytes:
    builder = BUILDERS[name](2, int(codec), 0, 1234, 5, 77, 1 << 20)
    for offset, record in enumerate(RECORDS):
        builder.append(
            offset, record.timestamp, record.key, record.value, [(h.key, h.value) for h in record.headers]
        )
    return bytes(builder.build())


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
@pytest.mark.parametrize("client", sorted(BUILDERS))
def test_batches_built_by_kafka_clients_decode_with_ours(client: str, codec: CompressionType) -> None:
    _skip_unless_supported(client, codec)
    data = _their_batch(client, codec)
    (batch,) = list(iterate_batches(data))
    batch.ensure_valid()
    header = batch.header
    assert header.compression == codec
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (1234, 5, 77)
    assert header.records_count == len(RECORDS)
    assert header.last_offset_delta == len(RECORDS) - 1
    assert header.base_timestamp == RECORDS[0].timestamp
    assert header.max_timestamp == max(r.timestamp for r in RECORDS)
    decoded = batch.records(check_offset_deltas=True)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decoded] == [
        (i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(RECORDS)
    ]


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
@pytest.mark.parametrize("client", sorted(READERS))
def test_batches_built_by_us_decode_with_kafka_clients(client: str, codec: CompressionType) -> None:
    _skip_unless_supported(client, codec)
    data = build_batch(
        RECORDS,
        base_offset=1000,
        compression=codec,
        producer_id=9,
        producer_epoch=1,
        base_sequence=3,
        partition_leader_epoch=4,
    )
    theirs = READERS[client](data)
    assert theirs.validate_crc()
    assert theirs.base_offset == 1000
    assert theirs.compression_type == int(codec)
    assert (theirs.producer_id, theirs.producer_epoch, theirs.base_sequence) == (9, 1, 3)
    records = list(theirs)
    assert [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in records] == [
        (1000 + i, r.timestamp, r.key, r.value, [(h.key, h.value) for h in r.headers])
        for i, r in enumerate(RECORDS)
    ]


@pytest.mark.parametrize("client", sorted(BUILDERS))
def test_uncompressed_batches_are_byte_identical_to_kafka_clients(client: str) -> None:
    # Base offset 0, as a producer writes it; the clients differ on the leader epoch placeholder.
    theirs = _their_batch(client, CompressionType.NONE)
    ours = build_batch(
        RECORDS,
        producer_id=1234,
        producer_epoch=5,
        base_sequence=77,
        partition_leader_epoch=PRODUCER_LEADER_EPOCH[client],
    )
    assert ours == theirs
