"""Codecs round-trip, read what Kafka's Java codecs write, and fail with named errors."""

from __future__ import annotations

import gzip

import lz4.frame
import pytest
import zstandard

from runtime.storage.compression import CompressionType, compress, decompress
from runtime.storage.errors import CorruptRecordError, UnsupportedCompressionError

DATA = b"the quick brown fox " * 500


@pytest.mark.parametrize(
    "codec", [CompressionType.NONE, CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD]
)
def test_round_trip(codec: CompressionType) -> None:
    packed = compress(codec, DATA)
    assert decompress(codec, packed) == DATA
    if codec != CompressionType.NONE:
        assert len(packed) < len(DATA)


def test_lz4_frames_use_kafkas_flags_independent_64k_blocks_without_checksums() -> None:
    packed = compress(CompressionType.LZ4, DATA)
    assert packed[:4] == b"\x04\x22\x4d\x18"  # frame magic
    assert packed[4] == 0x60  # version 01, independent blocks, no block/content checksum, no size
    assert packed[5] == 0x40  # 64 KiB maximum block size


def test_lz4_reads_frames_with_content_size_and_checksums_too() -> None:
    assert (
        decompress(CompressionType.LZ4, lz4.frame.compress(DATA, store_size=True, content_checksum=True))
        == DATA
    )


def test_zstd_reads_streamed_frames_without_content_size_and_concatenated_frames() -> None:
    streamed = zstandard.ZstdCompressor().compressobj()
    frame = streamed.compress(DATA) + streamed.flush()
    assert decompress(CompressionType.ZSTD, frame + frame) == DATA + DATA


def test_gzip_reads_any_gzip_stream() -> None:
    assert decompress(CompressionType.GZIP, gzip.compress(DATA, compresslevel=9)) == DATA


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.LZ4, CompressionType.ZSTD])
def test_corrupt_compressed_data_is_a_corrupt_record(codec: CompressionType) -> None:
    with pytest.raises(CorruptRecordError, match=f"{codec.name.lower()} record data cannot be decompressed"):
        decompress(codec, b"\x01\x02\x03 definitely not compressed")


def test_truncated_zstd_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError, match="zstd"):
        decompress(CompressionType.ZSTD, compress(CompressionType.ZSTD, DATA)[:-5])


def test_snappy_is_reported_as_unsupported() -> None:
    with pytest.raises(UnsupportedCompressionError, match="snappy is not supported") as raised:
        compress(CompressionType.SNAPPY, DATA)
    assert raised.value.error_name == "UNSUPPORTED_COMPRESSION_TYPE"
    with pytest.raises(UnsupportedCompressionError):
        decompress(CompressionType.SNAPPY, b"xx")
