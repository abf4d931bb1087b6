"""``decode_record_rows``, the consumer's decoder: the same records and the same refusals as
``decode_records`` (the reference), for any batch and any damage to its record area."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.storage.compression import CompressionType
from runtime.storage.errors import CorruptRecordError, InvalidRecordError
from runtime.storage.record_builder import SimpleRecord, build_batch
from runtime.storage.records import (
    RECORD_BATCH_OVERHEAD,
    RecordBatch,
    RecordHeader,
    decode_record_rows,
    iterate_batches,
)

# Field sizes around the one-, two- and three-byte varint boundaries (63/64, 8191/8192 bytes).
_sizes = st.sampled_from([0, 1, 63, 64, 100, 8191, 8192, 9000])
_blob = st.one_of(st.none(), _sizes.map(lambda n: bytes(range(256)) * (n // 256) + bytes(n % 256)))
_header = st.builds(RecordHeader, st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=70)))
_record = st.builds(
    SimpleRecord,
    _blob,
    _blob,
    st.lists(_header, max_size=2).map(tuple),
    # Timestamps around the base: deltas of one, two and more bytes, negative ones too.
    st.sampled_from([1_000_000, 1_000_001, 999_990, 1_000_063, 1_000_064, 1_008_192, 2_000_000_000, -1]),
)


def _only_batch(data: bytes | bytearray) -> RecordBatch:
    (batch,) = list(iterate_batches(data))
    return batch


def _reference(batch: RecordBatch, from_offset: int) -> list[tuple[object, ...]]:
    return [
        (r.offset, r.timestamp, r.key, r.value, tuple((h.key, h.value) for h in r.headers))
        for r in batch.records()
        if r.offset >= from_offset
    ]


@settings(max_examples=150, deadline=None)
@given(
    records=st.lists(_record, min_size=1, max_size=6),
    base_offset=st.integers(0, 1 << 40),
    skip=st.integers(0, 6),
    compression=st.sampled_from([CompressionType.NONE, CompressionType.GZIP]),
)
def test_rows_are_the_records_of_the_reference_decoder(
    records: list[SimpleRecord], base_offset: int, skip: int, compression: CompressionType
) -> None:
    batch = _only_batch(build_batch(records, base_offset=base_offset, compression=compression))
    rows = decode_record_rows(batch.header, batch.data, batch.position, from_offset=base_offset + skip)
    assert rows == _reference(batch, base_offset + skip)
    assert len(rows) == max(len(records) - skip, 0)


def _outcome(decode: object) -> object:
    assert callable(decode)
    try:
        return decode()
    except (CorruptRecordError, InvalidRecordError) as error:
        return type(error)


@settings(max_examples=300, deadline=None)
@given(
    records=st.lists(_record, min_size=1, max_size=4),
    damage=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), min_size=1, max_size=3),
)
def test_damaged_records_are_refused_exactly_when_the_reference_refuses_them(
    records: list[SimpleRecord], damage: list[tuple[int, int]]
) -> None:
    data = bytearray(build_batch(records))
    for where, byte in damage:
        data[RECORD_BATCH_OVERHEAD + where % (len(data) - RECORD_BATCH_OVERHEAD)] = byte
    batch = _only_batch(data)  # the CRC is not checked: the record layout itself is damaged
    expected = _outcome(lambda: _reference(batch, 0))
    assert _outcome(lambda: decode_record_rows(batch.header, batch.data, batch.position)) == expected


def test_a_record_running_past_the_batch_is_named() -> None:
    data = bytearray(build_batch([SimpleRecord(b"v" * 100)]))
    # The record's length, a two-byte varint: 8191 bytes, more than the batch holds.
    data[RECORD_BATCH_OVERHEAD : RECORD_BATCH_OVERHEAD + 2] = b"\xfe\x7f"
    batch = _only_batch(data)
    with pytest.raises(
        CorruptRecordError, match=r"record 0 of the batch at byte 0 \(base offset 0\) declares 8191 bytes"
    ):
        decode_record_rows(batch.header, batch.data, batch.position)


def test_a_record_shorter_than_its_fields_is_refused_though_the_next_record_follows() -> None:
    data = bytearray(build_batch([SimpleRecord(b"v" * 10), SimpleRecord(b"w" * 10)]))
    data[RECORD_BATCH_OVERHEAD] -= 2  # the first record's length (one byte): one byte fewer
    batch = _only_batch(data)
    with pytest.raises(
        CorruptRecordError, match=r"the batch at byte 0 \(base offset 0\) ends inside a field"
    ):
        decode_record_rows(batch.header, batch.data, batch.position)
    with pytest.raises(CorruptRecordError):
        batch.records()
