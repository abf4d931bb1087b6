"""Record batch compression codecs, sans-I/O: bytes in, bytes out.

Kafka compresses the whole record area of a v2 batch as one blob (docs/record-batch.md §1):

* gzip: the standard library (RFC 1952 stream, as Java's ``GZIPOutputStream``);
* lz4: the LZ4 *frame* format with independent 64 KiB blocks and no content size or checksum, which is
  what Java's ``KafkaLZ4BlockOutputStream`` writes (FLG 0x60, BD 0x40); any valid frame is read;
* zstd: standard zstd frames (``zstandard``); frames without a content size and concatenated frames
  are read, as Java's ``ZstdInputStream`` does;
* snappy: not available in this build (no snappy package is a dependency); both directions raise
  ``UnsupportedCompressionError`` naming the codec, which the produce path reports as
  ``UNSUPPORTED_COMPRESSION_TYPE``.

Corrupt compressed data raises ``CorruptRecordError`` with the codec and the decoder's complaint.
"""

from __future__ import annotations

import enum
import gzip
import zlib

import lz4.frame
import zstandard

from runtime.storage.errors import CorruptRecordError, UnsupportedCompressionError

__all__ = ["CompressionType", "compress", "decompress"]


class CompressionType(enum.IntEnum):
    """Bits 0-2 of a v2 batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


_ZSTD_COMPRESSOR = zstandard.ZstdCompressor()
_ZSTD_DECOMPRESSOR = zstandard.ZstdDecompressor()


def compress(codec: CompressionType, data: bytes | bytearray | memoryview) -> bytes:
    """Compress a record area with ``codec`` (``NONE`` returns the bytes unchanged)."""
    if codec is CompressionType.NONE:
        return bytes(data)
    if codec is CompressionType.GZIP:
        return gzip.compress(bytes(data), compresslevel=6, mtime=0)
    if codec is CompressionType.LZ4:
        return bytes(
            lz4.frame.compress(
                bytes(data),
                block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                block_linked=False,
                content_checksum=False,
                store_size=False,
            )
        )
    if codec is CompressionType.ZSTD:
        return bytes(_ZSTD_COMPRESSOR.compress(bytes(data)))
    raise UnsupportedCompressionError(
        f"compression codec {codec.name.lower()} is not supported by this broker"
    )


def decompress(codec: CompressionType, data: bytes | bytearray | memoryview) -> bytes:
    """Decompress a record area written with ``codec``."""
    if codec is CompressionType.NONE:
        return bytes(data)
    try:
        if codec is CompressionType.GZIP:
            return gzip.decompress(bytes(data))
        if codec is CompressionType.LZ4:
            return bytes(lz4.frame.decompress(bytes(data)))
        if codec is CompressionType.ZSTD:
            return _zstd_decompress(bytes(data))
    except (OSError, EOFError, zlib.error, RuntimeError, zstandard.ZstdError) as error:
        raise CorruptRecordError(
            f"{codec.name.lower()} record data cannot be decompressed: {error}"
        ) from None
    raise UnsupportedCompressionError(
        f"compression codec {codec.name.lower()} is not supported by this broker"
    )


def _zstd_decompress(data: bytes) -> bytes:
    parts: list[bytes] = []
    remaining = data
    while remaining:
        decompressor = _ZSTD_DECOMPRESSOR.decompressobj()
        parts.append(decompressor.decompress(remaining))
        if not decompressor.eof:
            raise CorruptRecordError(f"zstd record data ends inside a frame ({len(remaining)} bytes left)")
        remaining = decompressor.unused_data
    return b"".join(parts)
