"""The batch builder's table fast path writes exactly what ``encode_record`` writes.

``RecordBatchBuilder.append_fields`` looks small varints up instead of encoding them; any record it
cannot take that way (headers, a number of 2^14 or more, a negative timestamp delta) goes through
``encode_record``. Both must give the same bytes at every edge of the table.
"""

from __future__ import annotations

import random

import pytest

from runtime.storage.record_builder import RecordBatchBuilder, SimpleRecord, build_batch, encode_record
from runtime.storage.records import RecordHeader, iterate_batches

EDGE_SIZES = (0, 1, 63, 64, 127, 128, 8191, 8192, 16383, 16384, 20_000)
BASE_TIMESTAMP = 1_700_000_000_000


def reference_area(records: list[SimpleRecord]) -> bytes:
    """The record area as ``encode_record`` lays it out, one record after another."""
    out = bytearray()
    for delta, record in enumerate(records):
        encode_record(
            out, delta, record.timestamp - records[0].timestamp, record.key, record.value, record.headers
        )
    return bytes(out)


def random_record(rng: random.Random) -> SimpleRecord:
    def data() -> bytes | None:
        size = rng.choice((None, *EDGE_SIZES))
        return None if size is None else rng.randbytes(size)

    timestamp = BASE_TIMESTAMP + rng.choice((0, 1, -1, 8191, 8192, 16383, 16384, -20_000, 10**6))
    headers = rng.choice(((), (RecordHeader("h", b"v"),), (RecordHeader("n", None),)))
    return SimpleRecord(data(), data(), headers, timestamp)


@pytest.mark.parametrize("seed", range(40))
def test_the_fast_path_writes_what_encode_record_writes(seed: int) -> None:
    rng = random.Random(seed)
    records = [random_record(rng) for _ in range(rng.randint(1, 40))]
    builder = RecordBatchBuilder(write_limit=2**31 - 1)
    for expected_delta, record in enumerate(records):
        assert (
            builder.append_fields(record.timestamp, record.key, record.value, record.headers)
            == expected_delta
        )
    assert bytes(builder._area) == reference_area(records)


def test_offset_deltas_past_the_table_and_the_batch_reads_back() -> None:
    records = [SimpleRecord(b"v%d" % n, None, (), BASE_TIMESTAMP + n % 3) for n in range(16_390)]
    data = build_batch(records, base_offset=100)
    (batch,) = iterate_batches(data)
    read = list(batch.records())
    assert [(r.offset, r.value, r.timestamp) for r in read] == [
        (100 + n, record.value, record.timestamp) for n, record in enumerate(records)
    ]
