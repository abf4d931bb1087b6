"""``__consumer_offsets`` records (actors/group/records.py): Kafka 2.4.1's byte layouts.

The oracle is the hand-derived vectors below, each written field by field from the schemas in
Kafka 2.4.1's ``GroupMetadataManager.scala`` (int16 version prefix; STRING = int16 length + UTF-8;
NULLABLE_STRING with -1 for null; BYTES = int32 length; ARRAY = int32 count; big-endian ints).
Round trips over every version and a strict-decoding fuzz (only ``GroupRecordError`` may escape)
complete it; tests/interop/test_group_records_java.py checks the bytes against Kafka's own classes
when Kafka's jars are present.
"""

from __future__ import annotations

import contextlib
import os
import re
import struct
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.group.records import (
    GroupMetadataKey,
    GroupMetadataRecord,
    GroupMetadataValue,
    GroupRecord,
    GroupRecordError,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitRecord,
    OffsetCommitValue,
    build_group_batch,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    decode_record,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
    encode_record,
    iterate_group_records,
    java_string_hash,
    offset_commit_value,
    partition_for,
)
from runtime.storage.compression import CompressionType
from runtime.storage.record_builder import SimpleRecord, build_batch
from runtime.storage.records import CRC_OFFSET, RECORD_BATCH_OVERHEAD, compute_crc, iterate_batches

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "0"))


def fast(examples: int) -> settings:
    return settings(
        max_examples=EXAMPLES or examples,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )


def h(text: str) -> bytes:
    """Hex with spaces and ``|`` separators allowed, so vectors can show their fields."""
    return bytes.fromhex(text.replace("|", " "))


# ------------------------------------------------------------------------------ hand-derived vectors

MEMBER_M1 = MemberMetadata(
    member_id="m1",
    client_id="c",
    client_host="/h",
    rebalance_timeout=300_000,
    session_timeout=10_000,
    subscription=b"\x01",
    assignment=b"",
)

VECTORS: list[tuple[str, GroupRecord, bytes, bytes | None]] = [
    (
        "offset commit key v1 + value v3 (what 2.4 writes without an expiry)",
        OffsetCommitRecord(
            OffsetCommitKey("g", "t", 3),
            OffsetCommitValue(offset=100, metadata="", commit_timestamp=1000, leader_epoch=5, version=3),
        ),
        # version 1 | group "g" | topic "t" | partition 3
        h("0001 | 0001 67 | 0001 74 | 00000003"),
        # version 3 | offset 100 | leader_epoch 5 | metadata "" | commit_timestamp 1000
        h("0003 | 0000000000000064 | 00000005 | 0000 | 00000000000003e8"),
    ),
    (
        "offset commit value v1 (an explicit expire timestamp)",
        OffsetCommitRecord(
            OffsetCommitKey("g", "t", 3),
            OffsetCommitValue(
                offset=100, metadata="m", commit_timestamp=1000, expire_timestamp=2000, version=1
            ),
        ),
        h("0001 | 0001 67 | 0001 74 | 00000003"),
        # version 1 | offset 100 | metadata "m" | commit_timestamp 1000 | expire_timestamp 2000
        h("0001 | 0000000000000064 | 0001 6d | 00000000000003e8 | 00000000000007d0"),
    ),
    (
        "offset commit key v0 + value v0",
        OffsetCommitRecord(
            OffsetCommitKey("ab", "", -1, version=0),
            OffsetCommitValue(offset=7, metadata="", commit_timestamp=9, version=0),
        ),
        # version 0 | group "ab" | topic "" | partition -1
        h("0000 | 0002 6162 | 0000 | ffffffff"),
        # version 0 | offset 7 | metadata "" | timestamp 9
        h("0000 | 0000000000000007 | 0000 | 0000000000000009"),
    ),
    (
        "offset commit value v2",
        OffsetCommitRecord(
            OffsetCommitKey("g", "t", 0),
            OffsetCommitValue(offset=-1, metadata="ab", commit_timestamp=9, version=2),
        ),
        h("0001 | 0001 67 | 0001 74 | 00000000"),
        # version 2 | offset -1 | metadata "ab" | commit_timestamp 9
        h("0002 | ffffffffffffffff | 0002 6162 | 0000000000000009"),
    ),
    (
        "offset commit tombstone",
        OffsetCommitRecord(OffsetCommitKey("g", "t", 3), None),
        h("0001 | 0001 67 | 0001 74 | 00000003"),
        None,
    ),
    (
        "group metadata key v2 + value v3 (what 2.4 writes), one member",
        GroupMetadataRecord(
            GroupMetadataKey("grp"),
            GroupMetadataValue(
                protocol_type="consumer",
                generation=1,
                protocol="range",
                leader="m1",
                current_state_timestamp=1000,
                members=(MEMBER_M1,),
            ),
        ),
        # version 2 | group "grp"
        h("0002 | 0003 677270"),
        h(
            "0003"  # version 3
            "| 0008 636f6e73756d6572"  # protocol_type "consumer"
            "| 00000001"  # generation 1
            "| 0005 72616e6765"  # protocol "range"
            "| 0002 6d31"  # leader "m1"
            "| 00000000000003e8"  # current_state_timestamp 1000
            "| 00000001"  # members: 1
            "| 0002 6d31"  # member_id "m1"
            "| ffff"  # group_instance_id null
            "| 0001 63"  # client_id "c"
            "| 0002 2f68"  # client_host "/h"
            "| 000493e0"  # rebalance_timeout 300000
            "| 00002710"  # session_timeout 10000
            "| 00000001 01"  # subscription 01
            "| 00000000"  # assignment (empty)
        ),
    ),
    (
        "group metadata value v0, an empty group",
        GroupMetadataRecord(
            GroupMetadataKey("grp"),
            GroupMetadataValue(protocol_type="", generation=0, protocol=None, leader=None, version=0),
        ),
        h("0002 | 0003 677270"),
        # version 0 | protocol_type "" | generation 0 | protocol null | leader null | members: 0
        h("0000 | 0000 | 00000000 | ffff | ffff | 00000000"),
    ),
    (
        "group metadata value v1 with a member (rebalance timeout, no instance id)",
        GroupMetadataRecord(
            GroupMetadataKey("grp"),
            GroupMetadataValue(
                protocol_type="consumer",
                generation=2,
                protocol="range",
                leader="m1",
                members=(MEMBER_M1,),
                version=1,
            ),
        ),
        h("0002 | 0003 677270"),
        h(
            "0001 | 0008 636f6e73756d6572 | 00000002 | 0005 72616e6765 | 0002 6d31"
            "| 00000001"  # members: 1 (no current_state_timestamp below v2)
            "| 0002 6d31 | 0001 63 | 0002 2f68"  # member_id, client_id, client_host
            "| 000493e0 | 00002710"  # rebalance_timeout, session_timeout
            "| 00000001 01 | 00000000"  # subscription, assignment
        ),
    ),
    (
        "group metadata value v3, a static member (group_instance_id)",
        GroupMetadataRecord(
            GroupMetadataKey(""),
            GroupMetadataValue(
                protocol_type="c",
                generation=-1,
                protocol=None,
                leader="",
                current_state_timestamp=-1,
                members=(MemberMetadata("", "", "", 0, 0, b"", b"\xff", group_instance_id="i"),),
            ),
        ),
        # version 2 | group ""
        h("0002 | 0000"),
        h(
            "0003 | 0001 63 | ffffffff | ffff | 0000 | ffffffffffffffff | 00000001"
            "| 0000 | 0001 69 | 0000 | 0000 | 00000000 | 00000000 | 00000000 | 00000001 ff"
        ),
    ),
    (
        "group metadata tombstone",
        GroupMetadataRecord(GroupMetadataKey("grp"), None),
        h("0002 | 0003 677270"),
        None,
    ),
]


@pytest.mark.parametrize(("record", "key", "value"), [v[1:] for v in VECTORS], ids=[v[0] for v in VECTORS])
def test_hand_derived_vectors(record: GroupRecord, key: bytes, value: bytes | None) -> None:
    assert encode_record(record) == (key, value)
    assert decode_record(key, value) == record


def test_utf8_strings_count_bytes_not_characters() -> None:
    # "é" is 2 UTF-8 bytes, "日" 3: the int16 length is 5.
    assert encode_key(GroupMetadataKey("é日")) == h("0002 | 0005 c3a9 e697a5")
    assert decode_key(h("0002 | 0005 c3a9 e697a5")) == GroupMetadataKey("é日")


def test_v0_member_rebalance_timeout_is_its_session_timeout() -> None:
    # MEMBER_METADATA_V0 has no rebalance_timeout; Kafka's reader uses the session timeout.
    v0 = h(
        "0000 | 0000 | 00000001 | 0001 72 | 0001 6c | 00000001"  # header, leader "l", members: 1
        "| 0001 6c | 0000 | 0000 | 00002710 | 00000000 | 00000000"  # member "l", session_timeout 10000
    )
    member = decode_group_metadata_value(v0).members[0]
    assert (member.rebalance_timeout, member.session_timeout) == (10_000, 10_000)
    assert encode_group_metadata_value(decode_group_metadata_value(v0)) == v0


# ------------------------------------------------------------------------------ what 2.4 writes


def test_offset_commit_value_follows_ibp_2_4() -> None:
    # GroupMetadataManager.offsetCommitValue: v1 when an expire timestamp is set, else v3 (IBP >= 2.1-IV1).
    plain = offset_commit_value(5, "md", 1000, leader_epoch=3)
    assert plain == OffsetCommitValue(5, "md", 1000, leader_epoch=3, version=3)
    expiring = offset_commit_value(5, "md", 1000, leader_epoch=3, expire_timestamp=9000)
    assert expiring == OffsetCommitValue(5, "md", 1000, expire_timestamp=9000, version=1)
    assert encode_offset_commit_value(expiring)[:2] == b"\x00\x01"
    assert encode_offset_commit_value(plain)[:2] == b"\x00\x03"
    assert encode_key(OffsetCommitKey("g", "t", 0))[:2] == b"\x00\x01"
    assert encode_group_metadata_value(GroupMetadataValue("", 0, None, None))[:2] == b"\x00\x03"


@pytest.mark.parametrize(
    "value",
    [
        OffsetCommitValue(1, "", 0, leader_epoch=2, version=2),
        OffsetCommitValue(1, "", 0, expire_timestamp=2, version=3),
        OffsetCommitValue(1, "", 0, expire_timestamp=2, version=0),
        OffsetCommitValue(1, "", 0, version=4),
        OffsetCommitValue(2**63, "", 0),
        OffsetCommitValue(1, "x" * 32_768, 0),
        OffsetCommitValue(1, "\ud800", 0),
    ],
)
def test_offset_commit_values_that_cannot_be_written(value: OffsetCommitValue) -> None:
    with pytest.raises(GroupRecordError):
        encode_offset_commit_value(value)


@pytest.mark.parametrize(
    "value",
    [
        GroupMetadataValue("", 0, None, None, current_state_timestamp=5, version=1),
        GroupMetadataValue(
            "", 0, None, None, members=(MemberMetadata("m", "", "", 1, 2, b"", b""),), version=0
        ),
        GroupMetadataValue(
            "", 0, None, None, members=(MemberMetadata("m", "", "", 1, 1, b"", b"", "i"),), version=2
        ),
        GroupMetadataValue("", 2**31, None, None),
        GroupMetadataValue("", 0, None, None, version=-1),
    ],
)
def test_group_metadata_values_that_cannot_be_written(value: GroupMetadataValue) -> None:
    with pytest.raises(GroupRecordError):
        encode_group_metadata_value(value)


def test_offset_commit_key_versions() -> None:
    with pytest.raises(GroupRecordError):
        encode_key(OffsetCommitKey("g", "t", 0, version=2))
    assert decode_key(encode_key(OffsetCommitKey("g", "t", 0, version=0))) == OffsetCommitKey("g", "t", 0, 0)


# ------------------------------------------------------------------------------ strict decoding


@pytest.mark.parametrize(
    ("decode", "data", "message"),
    [
        (decode_key, h("0003 | 0001 67"), "unknown key version 3"),
        (decode_key, h("ffff | 0001 67"), "unknown key version -1"),
        (decode_key, h("00"), "needs 2 bytes"),
        (decode_key, b"", "needs 2 bytes"),
        (decode_key, h("0002 | 0003 6772"), "group needs 3 bytes"),
        (decode_key, h("0002 | 0001 67 | 00"), "1 bytes left over"),
        (decode_key, h("0002 | ffff"), "null"),
        (decode_key, h("0002 | fffe"), "negative length -2"),
        (decode_key, h("0002 | 0001 ff"), "not UTF-8"),
        (decode_key, h("0001 | 0001 67 | 0001 74 | 000000"), "partition needs 4 bytes"),
        (decode_offset_commit_value, h("0004 | 0000000000000001"), "unknown version 4"),
        (
            decode_offset_commit_value,
            h("0003 | 0000000000000064 | 00000005 | 0000 | 00000000000003"),
            "commit_timestamp",
        ),
        (
            decode_offset_commit_value,
            h("0002 | 0000000000000007 | 0000 | 0000000000000009 | 00"),
            "left over",
        ),
        (decode_group_metadata_value, h("0004"), "unknown version 4"),
        (decode_group_metadata_value, h("0000 | 0000 | 00000000 | ffff | ffff | ffffffff"), "negative (-1)"),
        (decode_group_metadata_value, h("0000 | 0000 | 00000000 | ffff | ffff | 7fffffff"), "exceeds"),
        (decode_group_metadata_value, h("0000 | ffff | 00000000 | ffff | ffff | 00000000"), "protocol_type"),
        (
            decode_group_metadata_value,
            h("0000 | 0000 | 00000000 | ffff | ffff | 00000001| 0001 6d | 0000 | 0000 | 00000001 | ffffffff"),
            "subscription at byte",
        ),
    ],
)
def test_strict_decoding_errors(decode: Callable[[bytes], object], data: bytes, message: str) -> None:
    with pytest.raises(GroupRecordError, match=re.escape(message)):
        decode(data)


def test_a_record_needs_a_key() -> None:
    with pytest.raises(GroupRecordError, match="must have a key"):
        decode_record(None, b"")


# ------------------------------------------------------------------------------ round trips

names = st.text(max_size=12)
int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(-(2**63), 2**63 - 1)
blobs = st.binary(max_size=16)


@st.composite
def offset_commit_values(draw: st.DrawFn) -> OffsetCommitValue:
    version = draw(st.integers(0, 3))
    return OffsetCommitValue(
        offset=draw(int64s),
        metadata=draw(names),
        commit_timestamp=draw(int64s),
        leader_epoch=draw(int32s) if version == 3 else -1,
        expire_timestamp=draw(int64s) if version == 1 else -1,
        version=version,
    )


@st.composite
def group_metadata_values(draw: st.DrawFn) -> GroupMetadataValue:
    version = draw(st.integers(0, 3))
    members = []
    for _ in range(draw(st.integers(0, 3))):
        session_timeout = draw(int32s)
        members.append(
            MemberMetadata(
                member_id=draw(names),
                client_id=draw(names),
                client_host=draw(names),
                rebalance_timeout=draw(int32s) if version >= 1 else session_timeout,
                session_timeout=session_timeout,
                subscription=draw(blobs),
                assignment=draw(blobs),
                group_instance_id=draw(st.none() | names) if version >= 3 else None,
            )
        )
    return GroupMetadataValue(
        protocol_type=draw(names),
        generation=draw(int32s),
        protocol=draw(st.none() | names),
        leader=draw(st.none() | names),
        members=tuple(members),
        current_state_timestamp=draw(int64s) if version >= 2 else -1,
        version=version,
    )


group_records: st.SearchStrategy[GroupRecord] = st.one_of(
    st.builds(
        OffsetCommitRecord,
        st.builds(OffsetCommitKey, names, names, int32s, st.sampled_from([0, 1])),
        st.none() | offset_commit_values(),
    ),
    st.builds(GroupMetadataRecord, st.builds(GroupMetadataKey, names), st.none() | group_metadata_values()),
)


@given(group_records)
@fast(300)
def test_round_trip_every_version(record: GroupRecord) -> None:
    key, value = encode_record(record)
    assert decode_record(key, value) == record
    # Encoding is canonical: a decoded record encodes to the same bytes.
    assert encode_record(decode_record(key, value)) == (key, value)


# ------------------------------------------------------------------------------ fuzz


def _decode_any(data: bytes) -> None:
    for decode in (decode_key, decode_offset_commit_value, decode_group_metadata_value):
        with contextlib.suppress(GroupRecordError):
            decode(data)


@given(st.binary(max_size=64))
@fast(400)
def test_random_bytes_raise_only_group_record_errors(data: bytes) -> None:
    _decode_any(data)


@st.composite
def mutants(draw: st.DrawFn) -> bytes:
    record = draw(group_records)
    key, value = encode_record(record)
    data = bytearray(draw(st.sampled_from([key, value if value is not None else key])))
    for _ in range(draw(st.integers(1, 3))):
        match draw(st.sampled_from(["flip", "cut", "extend"])):
            case "flip" if data:
                data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
            case "cut" if data:
                del data[draw(st.integers(0, len(data) - 1)) :]
            case _:
                data += draw(st.binary(min_size=1, max_size=4))
    return bytes(data)


@given(mutants())
@fast(400)
def test_mutated_records_raise_only_group_record_errors(data: bytes) -> None:
    _decode_any(data)


# ------------------------------------------------------------------------------ batches

COMMITS: list[GroupRecord] = [
    OffsetCommitRecord(OffsetCommitKey("g", "t", 0), offset_commit_value(10, "", 5000, leader_epoch=1)),
    OffsetCommitRecord(OffsetCommitKey("g", "t", 1), offset_commit_value(20, "x", 5000)),
]


@pytest.mark.parametrize("compression", [CompressionType.NONE, CompressionType.GZIP])
def test_batch_round_trip(compression: CompressionType) -> None:
    group = GroupMetadataRecord(
        GroupMetadataKey("g"), GroupMetadataValue("consumer", 1, "range", "m1", (MEMBER_M1,), 4000)
    )
    first = build_group_batch([group], timestamp_ms=4000, compression=compression)
    second = build_group_batch(COMMITS, timestamp_ms=5000, compression=compression)
    (header,) = [b.header for b in iterate_batches(first)]
    # What the leader's append path expects of a producer: base offset 0, CreateTime, no producer id.
    assert (header.base_offset, header.producer_id, header.timestamp_type.name) == (0, -1, "CREATE_TIME")
    assert header.compression is compression
    # Place the second batch after the first, as the log would, and read both back with offsets.
    log = first + _rebase(second, 1)
    loaded = list(iterate_group_records(log))
    assert [(r.offset, r.timestamp, r.record) for r in loaded] == [
        (0, 4000, group),
        (1, 5000, COMMITS[0]),
        (2, 5000, COMMITS[1]),
    ]
    # A partial batch at the end (a fetch's tail) is left for the next read.
    assert [r.offset for r in iterate_group_records(log + second[:30])] == [0, 1, 2]


def _rebase(batch: bytes, base_offset: int) -> bytes:
    return base_offset.to_bytes(8, "big", signed=True) + batch[8:]


def test_batches_with_foreign_or_corrupt_records_raise_group_record_errors() -> None:
    foreign = build_batch([SimpleRecord(value=b"v", key=b"\x00\x09")])
    with pytest.raises(GroupRecordError, match="record at offset 0: key: unknown key version 9"):
        list(iterate_group_records(foreign))
    keyless = build_batch([SimpleRecord(value=b"v")])
    with pytest.raises(GroupRecordError, match="must have a key"):
        list(iterate_group_records(keyless))
    corrupt = bytearray(build_group_batch(COMMITS, timestamp_ms=1))
    corrupt[-1] ^= 0xFF
    with pytest.raises(GroupRecordError, match="CRC"):
        list(iterate_group_records(bytes(corrupt)))
    with pytest.raises(ValueError, match="at least one record"):
        build_group_batch([], timestamp_ms=1)


@given(st.lists(group_records, min_size=1, max_size=3), st.data())
@fast(200)
def test_mutated_batches_with_a_valid_crc_raise_only_group_record_errors(
    records: list[GroupRecord], data: st.DataObject
) -> None:
    # A batch whose record area is damaged but whose CRC still matches (recomputed): the framing and
    # record decoding below the group codec must not leak another exception either.
    batch = bytearray(build_group_batch(records, timestamp_ms=1))
    for _ in range(data.draw(st.integers(1, 3))):
        batch[data.draw(st.integers(RECORD_BATCH_OVERHEAD, len(batch) - 1))] = data.draw(st.integers(0, 255))
    struct.pack_into(">I", batch, CRC_OFFSET, compute_crc(batch, 0, len(batch)))
    with contextlib.suppress(GroupRecordError):
        list(iterate_group_records(bytes(batch)))


# ------------------------------------------------------------------------------ partition_for

# Java's String.hashCode, worked by hand: s[0]*31^(n-1) + ... + s[n-1] (mod 2^32, signed) over
# UTF-16 code units.
HASHES = [
    ("", 0),
    ("a", 97),
    ("ab", 97 * 31 + 98),  # 3105
    ("é", 0xE9),  # one BMP code unit: 233
    ("日本", 0x65E5 * 31 + 0x672C),  # 835047
    ("😀", 0xD83D * 31 + 0xDE00),  # U+1F600 is the surrogate pair D83D DE00: 1772899
    ("hello", 99162322),
    ("polygenelubricants", -(2**31)),  # famously Integer.MIN_VALUE
]


@pytest.mark.parametrize(("text", "expected"), HASHES)
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_partition_for() -> None:
    assert partition_for("ab", 50) == 3105 % 50
    assert partition_for("😀", 50) == 1772899 % 50
    # Utils.abs(Integer.MIN_VALUE) is 0, not MIN_VALUE (nor 2^31, which Python's abs would give).
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("polygenelubricants", 7) == 0
    # A negative hash: "hellohello" hashes negative in Java; abs, then modulo.
    negative = java_string_hash("hellohello")
    assert negative < 0
    assert partition_for("hellohello", 50) == (-negative) % 50
    with pytest.raises(ValueError, match="positive"):
        partition_for("g", 0)


@given(st.text(max_size=20), st.integers(1, 200))
@fast(200)
def test_partition_for_is_in_range(group: str, partitions: int) -> None:
    assert 0 <= partition_for(group, partitions) < partitions
