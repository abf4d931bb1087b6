"""Zig-zag varints as Kafka's ``ByteUtils`` writes them (docs/record-batch.md §2), sans-I/O.

A signed value is zig-zag mapped (``(n << 1) ^ (n >> 63)``; for values in the int32 range this equals
the 32-bit ``(n << 1) ^ (n >> 31)``) and written as unsigned base-128, least-significant group first,
high bit meaning "more bytes follow". A varint takes at most 5 bytes and a varlong at most 10; longer
encodings are rejected as corrupt, as are encodings that run past the end of the buffer.
"""

from __future__ import annotations

from typing import Final

from runtime.storage.errors import CorruptRecordError

__all__ = ["MAX_VARINT_BYTES", "MAX_VARLONG_BYTES", "decode_varint", "encode_varint", "size_of_varint"]

MAX_VARINT_BYTES: Final = 5
MAX_VARLONG_BYTES: Final = 10


def encode_varint(value: int, out: bytearray) -> None:
    """Append the zig-zag varint (or varlong) encoding of ``value`` to ``out``."""
    unsigned = (value << 1) ^ (value >> 63)
    while unsigned > 0x7F:
        out.append((unsigned & 0x7F) | 0x80)
        unsigned >>= 7
    out.append(unsigned)


def size_of_varint(value: int) -> int:
    """Bytes ``encode_varint(value)`` takes."""
    unsigned = (value << 1) ^ (value >> 63)
    size = 1
    while unsigned > 0x7F:
        size += 1
        unsigned >>= 7
    return size


def decode_varint(
    data: bytes | bytearray, position: int, max_bytes: int = MAX_VARINT_BYTES
) -> tuple[int, int]:
    """Decode one varint at ``position``; return ``(value, position after it)``."""
    end = len(data)
    if position >= end:
        raise CorruptRecordError(f"varint at byte {position} runs past the end of the data ({end} bytes)")
    byte = data[position]
    if byte < 0x80:  # The common one-byte case, without the loop.
        return (byte >> 1) ^ -(byte & 1), position + 1
    unsigned = byte & 0x7F
    shift = 7
    index = position + 1
    while True:
        if index >= end:
            raise CorruptRecordError(f"varint at byte {position} runs past the end of the data ({end} bytes)")
        if index - position >= max_bytes:
            raise CorruptRecordError(f"varint at byte {position} is longer than {max_bytes} bytes")
        byte = data[index]
        unsigned |= (byte & 0x7F) << shift
        index += 1
        if byte < 0x80:
            return (unsigned >> 1) ^ -(unsigned & 1), index
        shift += 7
