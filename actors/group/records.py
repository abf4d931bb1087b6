"""Kafka 2.4's ``__consumer_offsets`` records, byte for byte: offset commits and group metadata. Pure.

Every record of ``__consumer_offsets`` has a key and a value (a null value is a tombstone: it
deletes the key). Both start with an int16 schema version; the key's version says which kind of
record it is. The layouts are Kafka 2.4.1's ``GroupMetadataManager`` schemas, in Kafka's protocol
types: ``int16``/``int32``/``int64`` big-endian, ``string`` = int16 length + UTF-8,
``nullable string`` = the same with length -1 for null, ``bytes`` = int32 length + bytes,
``array`` = int32 count + elements.

==================== ===================================================================================
Key v0 and v1        ``version, group string, topic string, partition int32``: an offset commit
                     (Kafka writes v1; v0 is read, never written)
Key v2               ``version, group string``: group metadata
OffsetCommitValue v0 ``version, offset int64, metadata string, timestamp int64`` (the commit timestamp)
OffsetCommitValue v1 ``version, offset int64, metadata string, commit_timestamp int64,
                     expire_timestamp int64`` (-1: none)
OffsetCommitValue v2 ``version, offset int64, metadata string, commit_timestamp int64``
OffsetCommitValue v3 ``version, offset int64, leader_epoch int32`` (-1: none, KIP-320) ``,
                     metadata string, commit_timestamp int64``
GroupMetadataValue   ``version, protocol_type string, generation int32, protocol nullable string,
v0..v3               leader nullable string, [current_state_timestamp int64: v2+], members array``
MemberMetadata       ``member_id string, [group_instance_id nullable string: v3], client_id string,
(inside v0..v3)      client_host string, [rebalance_timeout int32: v1+], session_timeout int32,
                     subscription bytes, assignment bytes``
==================== ===================================================================================

What a 2.4 broker writes (inter.broker.protocol.version 2.4, as actorlog behaves): key v1 for
commits; OffsetCommitValue v1 when the commit carries an explicit expire timestamp (OffsetCommit
v1's per-partition timestamp, v2-v4's retention time), v3 otherwise (``offset_commit_value``);
GroupMetadataValue v3 with protocol_type "" for a group without one and current_state_timestamp -1
when unknown. Kafka 2.4.1's loader reads current_state_timestamp only from v2 values and ignores it in
v3 (fixed in later Kafka); this module decodes it from both and leaves the choice to the loader. A
v0 member has no rebalance timeout: decoding gives it the session timeout, as Kafka does.

Rules kept here:

* Decoding is strict and total: an unknown key or value version, bytes that end early, bytes left
  over, a negative length other than the null marker -1, a null where Kafka's schema has no null,
  invalid UTF-8 all raise ``GroupRecordError`` with what was wrong and where, never another
  exception. Kafka 2.4 is more lenient in three places, all of which it never writes: it ignores
  trailing bytes, reads any negative nullable-string length as null, and replaces invalid UTF-8.
* Encoding is exact: a field the chosen version cannot carry must hold its default (leader_epoch
  -1 below v3, expire_timestamp -1 except in v1, current_state_timestamp -1 below v2,
  group_instance_id None below v3, rebalance_timeout equal to session_timeout in v0), so that
  decoding what was encoded gives back the same value. Out-of-range numbers and strings longer
  than 32767 UTF-8 bytes raise ``GroupRecordError`` too.
* The records travel in ordinary v2 record batches (``build_group_batch``: CreateTime at the
  coordinator's clock, base offset 0, no producer id, what the leader's append path expects of a
  producer; ``iterate_group_records`` reads them back with their offsets, skipping control batches).
* ``partition_for(group, n)`` is Kafka's ``Utils.abs(group.hashCode) % n``: Java's String hash
  over UTF-16 code units, with abs(Integer.MIN_VALUE) = 0.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from actors.server.fetcher.fetcher_id import java_string_hash_code as java_string_hash
from actors.server.fetcher.fetcher_id import kafka_abs
from runtime.errors import StorageError
from runtime.storage.compression import CompressionType
from runtime.storage.record_builder import SimpleRecord, build_batch
from runtime.storage.records import iterate_batches

__all__ = [
    "GROUP_METADATA_KEY_VERSION",
    "GROUP_METADATA_VALUE_VERSION",
    "NO_EXPIRE_TIMESTAMP",
    "NO_LEADER_EPOCH",
    "NO_STATE_TIMESTAMP",
    "OFFSET_COMMIT_KEY_VERSION",
    "GroupMetadataKey",
    "GroupMetadataRecord",
    "GroupMetadataValue",
    "GroupRecord",
    "GroupRecordError",
    "GroupRecordKey",
    "LoadedGroupRecord",
    "MemberMetadata",
    "OffsetCommitKey",
    "OffsetCommitRecord",
    "OffsetCommitValue",
    "build_group_batch",
    "decode_group_metadata_value",
    "decode_key",
    "decode_offset_commit_value",
    "decode_record",
    "encode_group_metadata_value",
    "encode_key",
    "encode_offset_commit_value",
    "encode_record",
    "iterate_group_records",
    "java_string_hash",
    "offset_commit_value",
    "partition_for",
]

OFFSET_COMMIT_KEY_VERSION: Final = 1
"""The offset-commit key version Kafka writes (v0 has the same layout and is only read)."""
GROUP_METADATA_KEY_VERSION: Final = 2
GROUP_METADATA_VALUE_VERSION: Final = 3
"""The group-metadata value version a 2.4 broker writes."""
NO_LEADER_EPOCH: Final = -1
NO_EXPIRE_TIMESTAMP: Final = -1
"""Kafka's ``OffsetCommitRequest.DEFAULT_TIMESTAMP``: no explicit expiry."""
NO_STATE_TIMESTAMP: Final = -1

_OFFSET_COMMIT_VALUE_VERSIONS: Final = frozenset({0, 1, 2, 3})
_GROUP_METADATA_VALUE_VERSIONS: Final = frozenset({0, 1, 2, 3})
_MAX_STRING_BYTES: Final = 32_767  # Java's Short.MAX_VALUE
_INT16: Final = struct.Struct(">h")
_INT32: Final = struct.Struct(">i")
_INT64: Final = struct.Struct(">q")
_INT32_RANGE: Final = range(-(2**31), 2**31)
_INT64_RANGE: Final = range(-(2**63), 2**63)


class GroupRecordError(ValueError):
    """Bytes that are not one of Kafka's ``__consumer_offsets`` records, or a value that cannot be
    written as one. The message says which record part, which field and what was wrong."""


# -- values ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    """The key of a committed offset: (group, topic, partition). ``version`` is 0 or 1."""

    group: str
    topic: str
    partition: int
    version: int = OFFSET_COMMIT_KEY_VERSION


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    """The key of a group's metadata (key version 2)."""

    group: str


GroupRecordKey = OffsetCommitKey | GroupMetadataKey


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    """A committed offset. ``leader_epoch`` exists in v3 only, ``expire_timestamp`` in v1 only;
    elsewhere they hold -1. v0 calls ``commit_timestamp`` just "timestamp"."""

    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = NO_LEADER_EPOCH
    expire_timestamp: int = NO_EXPIRE_TIMESTAMP
    version: int = 3


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    """One member in a group-metadata value. ``group_instance_id`` (KIP-345) exists in v3 only;
    ``rebalance_timeout`` from v1 (a v0 member's is its session timeout). ``subscription`` is the
    member's metadata for the group's chosen protocol, ``assignment`` what the leader gave it."""

    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    """A group's metadata. ``protocol`` and ``leader`` are null for a group without a generation's
    choice; ``current_state_timestamp`` exists from v2 (-1: unknown)."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    members: tuple[MemberMetadata, ...] = ()
    current_state_timestamp: int = NO_STATE_TIMESTAMP
    version: int = GROUP_METADATA_VALUE_VERSION


@dataclass(frozen=True, slots=True)
class OffsetCommitRecord:
    """An offset-commit record; ``value`` None is a tombstone (the offset deleted or expired)."""

    key: OffsetCommitKey
    value: OffsetCommitValue | None


@dataclass(frozen=True, slots=True)
class GroupMetadataRecord:
    """A group-metadata record; ``value`` None is a tombstone (the group deleted)."""

    key: GroupMetadataKey
    value: GroupMetadataValue | None


GroupRecord = OffsetCommitRecord | GroupMetadataRecord


@dataclass(frozen=True, slots=True)
class LoadedGroupRecord:
    """A record read back from the log: its offset, its (CreateTime) timestamp and what it says."""

    offset: int
    timestamp: int
    record: GroupRecord


def offset_commit_value(
    offset: int,
    metadata: str,
    commit_timestamp: int,
    *,
    leader_epoch: int = NO_LEADER_EPOCH,
    expire_timestamp: int | None = None,
) -> OffsetCommitValue:
    """The value a 2.4 broker writes (``GroupMetadataManager.offsetCommitValue`` at IBP 2.4): v1
    with the expire timestamp when one is given (the leader epoch is then not stored), else v3."""
    if expire_timestamp is not None:
        return OffsetCommitValue(
            offset, metadata, commit_timestamp, expire_timestamp=expire_timestamp, version=1
        )
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch=leader_epoch, version=3)


# -- encoding --------------------------------------------------------------------------------------


class _Writer:
    __slots__ = ("out", "what")

    def __init__(self, what: str, version: int) -> None:
        self.what = what
        self.out = bytearray(_INT16.pack(version))

    def int32(self, name: str, value: int) -> None:
        if value not in _INT32_RANGE:
            raise GroupRecordError(f"{self.what}: {name} {value} is outside int32")
        self.out += _INT32.pack(value)

    def int64(self, name: str, value: int) -> None:
        if value not in _INT64_RANGE:
            raise GroupRecordError(f"{self.what}: {name} {value} is outside int64")
        self.out += _INT64.pack(value)

    def string(self, name: str, value: str | None, *, nullable: bool = False) -> None:
        if value is None:
            if not nullable:
                raise GroupRecordError(f"{self.what}: {name} cannot be null")
            self.out += _INT16.pack(-1)
            return
        try:
            data = value.encode("utf-8")
        except UnicodeEncodeError as error:
            raise GroupRecordError(
                f"{self.what}: {name} is not encodable as UTF-8 ({error.reason})"
            ) from None
        if len(data) > _MAX_STRING_BYTES:
            raise GroupRecordError(
                f"{self.what}: {name} is {len(data)} UTF-8 bytes, above the maximum {_MAX_STRING_BYTES}"
            )
        self.out += _INT16.pack(len(data))
        self.out += data

    def bytes_(self, name: str, value: bytes) -> None:
        if len(value) > _INT32_RANGE.stop - 1:
            raise GroupRecordError(f"{self.what}: {name} is {len(value)} bytes, above int32")
        self.out += _INT32.pack(len(value))
        self.out += value


def _require_default(what: str, version: int, name: str, value: object, default: object) -> None:
    if value != default:
        raise GroupRecordError(f"{what} v{version} cannot carry {name} {value!r} (only {default!r})")


def encode_key(key: GroupRecordKey) -> bytes:
    """The key bytes: offset-commit keys at their ``version`` (0 or 1), group-metadata keys at v2."""
    match key:
        case OffsetCommitKey(group, topic, partition, version):
            if version not in (0, 1):
                raise GroupRecordError(f"offset commit key: version {version} is not 0 or 1")
            writer = _Writer("offset commit key", version)
            writer.string("group", group)
            writer.string("topic", topic)
            writer.int32("partition", partition)
            return bytes(writer.out)
        case GroupMetadataKey(group):
            writer = _Writer("group metadata key", GROUP_METADATA_KEY_VERSION)
            writer.string("group", group)
            return bytes(writer.out)


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    version = value.version
    what = "offset commit value"
    if version not in _OFFSET_COMMIT_VALUE_VERSIONS:
        raise GroupRecordError(f"{what}: version {version} is not one of 0..3")
    if version != 3:
        _require_default(what, version, "leader_epoch", value.leader_epoch, NO_LEADER_EPOCH)
    if version != 1:
        _require_default(what, version, "expire_timestamp", value.expire_timestamp, NO_EXPIRE_TIMESTAMP)
    writer = _Writer(what, version)
    writer.int64("offset", value.offset)
    if version == 3:
        writer.int32("leader_epoch", value.leader_epoch)
    writer.string("metadata", value.metadata)
    writer.int64("commit_timestamp", value.commit_timestamp)
    if version == 1:
        writer.int64("expire_timestamp", value.expire_timestamp)
    return bytes(writer.out)


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    version = value.version
    what = "group metadata value"
    if version not in _GROUP_METADATA_VALUE_VERSIONS:
        raise GroupRecordError(f"{what}: version {version} is not one of 0..3")
    if version < 2:
        _require_default(
            what, version, "current_state_timestamp", value.current_state_timestamp, NO_STATE_TIMESTAMP
        )
    writer = _Writer(what, version)
    writer.string("protocol_type", value.protocol_type)
    writer.int32("generation", value.generation)
    writer.string("protocol", value.protocol, nullable=True)
    writer.string("leader", value.leader, nullable=True)
    if version >= 2:
        writer.int64("current_state_timestamp", value.current_state_timestamp)
    writer.int32("members count", len(value.members))
    for index, member in enumerate(value.members):
        writer.what = f"group metadata value member {index}"
        if version < 3:
            _require_default(writer.what, version, "group_instance_id", member.group_instance_id, None)
        if version == 0:
            _require_default(
                writer.what, version, "rebalance_timeout", member.rebalance_timeout, member.session_timeout
            )
        writer.string("member_id", member.member_id)
        if version >= 3:
            writer.string("group_instance_id", member.group_instance_id, nullable=True)
        writer.string("client_id", member.client_id)
        writer.string("client_host", member.client_host)
        if version >= 1:
            writer.int32("rebalance_timeout", member.rebalance_timeout)
        writer.int32("session_timeout", member.session_timeout)
        writer.bytes_("subscription", member.subscription)
        writer.bytes_("assignment", member.assignment)
    return bytes(writer.out)


def encode_record(record: GroupRecord) -> tuple[bytes, bytes | None]:
    """(key bytes, value bytes or None for a tombstone)."""
    match record:
        case OffsetCommitRecord(key, value):
            return encode_key(key), None if value is None else encode_offset_commit_value(value)
        case GroupMetadataRecord(key, value):
            return encode_key(key), None if value is None else encode_group_metadata_value(value)


# -- decoding --------------------------------------------------------------------------------------


class _Reader:
    """Reads Kafka's protocol types from ``data``; every failure is a ``GroupRecordError``."""

    __slots__ = ("data", "position", "what")

    def __init__(self, data: bytes | bytearray | memoryview, what: str) -> None:
        self.data = bytes(data)
        self.position = 0
        self.what = what

    def _take(self, name: str, size: int) -> bytes:
        end = self.position + size
        if end > len(self.data):
            raise GroupRecordError(
                f"{self.what}: {name} needs {size} bytes at byte {self.position}, "
                f"only {len(self.data) - self.position} left"
            )
        chunk = self.data[self.position : end]
        self.position = end
        return chunk

    def int16(self, name: str) -> int:
        value: int = _INT16.unpack(self._take(name, 2))[0]
        return value

    def int32(self, name: str) -> int:
        value: int = _INT32.unpack(self._take(name, 4))[0]
        return value

    def int64(self, name: str) -> int:
        value: int = _INT64.unpack(self._take(name, 8))[0]
        return value

    def nullable_string(self, name: str) -> str | None:
        at = self.position
        length = self.int16(f"{name} length")
        if length == -1:
            return None
        if length < 0:
            raise GroupRecordError(f"{self.what}: {name} at byte {at} has negative length {length}")
        data = self._take(name, length)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise GroupRecordError(
                f"{self.what}: {name} at byte {at} is not UTF-8 ({error.reason})"
            ) from None

    def string(self, name: str) -> str:
        at = self.position
        value = self.nullable_string(name)
        if value is None:
            raise GroupRecordError(
                f"{self.what}: {name} at byte {at} is null, which its schema does not allow"
            )
        return value

    def bytes_(self, name: str) -> bytes:
        at = self.position
        length = self.int32(f"{name} length")
        if length < 0:
            raise GroupRecordError(f"{self.what}: {name} at byte {at} has negative length {length}")
        return self._take(name, length)

    def end(self) -> None:
        left = len(self.data) - self.position
        if left:
            raise GroupRecordError(
                f"{self.what}: {left} bytes left over after the last field (byte {self.position})"
            )


def decode_key(data: bytes | bytearray | memoryview) -> GroupRecordKey:
    """An offset-commit key (v0, v1) or a group-metadata key (v2), told apart by the version."""
    reader = _Reader(data, "key")
    version = reader.int16("version")
    if version in (0, 1):
        reader.what = f"offset commit key v{version}"
        group = reader.string("group")
        topic = reader.string("topic")
        partition = reader.int32("partition")
        reader.end()
        return OffsetCommitKey(group, topic, partition, version)
    if version == GROUP_METADATA_KEY_VERSION:
        reader.what = f"group metadata key v{version}"
        group = reader.string("group")
        reader.end()
        return GroupMetadataKey(group)
    raise GroupRecordError(f"key: unknown key version {version} (0 and 1: offset commit, 2: group metadata)")


def decode_offset_commit_value(data: bytes | bytearray | memoryview) -> OffsetCommitValue:
    reader = _Reader(data, "offset commit value")
    version = reader.int16("version")
    if version not in _OFFSET_COMMIT_VALUE_VERSIONS:
        raise GroupRecordError(f"offset commit value: unknown version {version} (known: 0..3)")
    reader.what = f"offset commit value v{version}"
    offset = reader.int64("offset")
    leader_epoch = reader.int32("leader_epoch") if version == 3 else NO_LEADER_EPOCH
    metadata = reader.string("metadata")
    commit_timestamp = reader.int64("timestamp" if version == 0 else "commit_timestamp")
    expire_timestamp = reader.int64("expire_timestamp") if version == 1 else NO_EXPIRE_TIMESTAMP
    reader.end()
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp, version)


def decode_group_metadata_value(data: bytes | bytearray | memoryview) -> GroupMetadataValue:
    reader = _Reader(data, "group metadata value")
    version = reader.int16("version")
    if version not in _GROUP_METADATA_VALUE_VERSIONS:
        raise GroupRecordError(f"group metadata value: unknown version {version} (known: 0..3)")
    reader.what = f"group metadata value v{version}"
    protocol_type = reader.string("protocol_type")
    generation = reader.int32("generation")
    protocol = reader.nullable_string("protocol")
    leader = reader.nullable_string("leader")
    current_state_timestamp = reader.int64("current_state_timestamp") if version >= 2 else NO_STATE_TIMESTAMP
    at = reader.position
    count = reader.int32("members count")
    if count < 0:
        raise GroupRecordError(f"{reader.what}: members count at byte {at} is negative ({count})")
    if count > len(reader.data) - reader.position:
        # Every member takes at least one byte, so this many cannot fit (Kafka's own check).
        raise GroupRecordError(
            f"{reader.what}: members count {count} at byte {at} exceeds the "
            f"{len(reader.data) - reader.position} bytes left"
        )
    members: list[MemberMetadata] = []
    for index in range(count):
        reader.what = f"group metadata value v{version} member {index}"
        member_id = reader.string("member_id")
        group_instance_id = reader.nullable_string("group_instance_id") if version >= 3 else None
        client_id = reader.string("client_id")
        client_host = reader.string("client_host")
        rebalance_timeout = reader.int32("rebalance_timeout") if version >= 1 else None
        session_timeout = reader.int32("session_timeout")
        subscription = reader.bytes_("subscription")
        assignment = reader.bytes_("assignment")
        members.append(
            MemberMetadata(
                member_id,
                client_id,
                client_host,
                session_timeout if rebalance_timeout is None else rebalance_timeout,
                session_timeout,
                subscription,
                assignment,
                group_instance_id,
            )
        )
    reader.what = f"group metadata value v{version}"
    reader.end()
    return GroupMetadataValue(
        protocol_type, generation, protocol, leader, tuple(members), current_state_timestamp, version
    )


def decode_record(
    key: bytes | bytearray | memoryview | None, value: bytes | bytearray | memoryview | None
) -> GroupRecord:
    """One ``__consumer_offsets`` record from its key and value bytes (value None: a tombstone).
    A record without a key is an error, as in Kafka's loader."""
    if key is None:
        raise GroupRecordError("record: a __consumer_offsets record must have a key")
    decoded = decode_key(key)
    match decoded:
        case OffsetCommitKey():
            return OffsetCommitRecord(decoded, None if value is None else decode_offset_commit_value(value))
        case GroupMetadataKey():
            return GroupMetadataRecord(decoded, None if value is None else decode_group_metadata_value(value))


# -- batches ---------------------------------------------------------------------------------------


def build_group_batch(
    records: Sequence[GroupRecord],
    *,
    timestamp_ms: int,
    compression: CompressionType = CompressionType.NONE,
) -> bytes:
    """One v2 record batch carrying ``records``, as the coordinator appends them to its
    ``__consumer_offsets`` partition: CreateTime ``timestamp_ms`` on every record (Kafka uses its
    clock's now), base offset 0 (the leader assigns offsets), no producer id, ``compression``
    (``offsets.topic.compression.codec``, none by default). ``records`` must not be empty."""
    if not records:
        raise ValueError("a group record batch needs at least one record")
    simple = []
    for record in records:
        key, value = encode_record(record)
        simple.append(SimpleRecord(value=value, key=key, timestamp=timestamp_ms))
    return build_batch(simple, compression=compression)


def iterate_group_records(
    data: bytes | bytearray | memoryview, *, position: int = 0
) -> Iterator[LoadedGroupRecord]:
    """The records of the complete batches in ``data`` (a fetch's or a log read's bytes; a partial
    batch at the end is ignored), CRCs checked, control batches skipped. A corrupt batch or a record
    that is not a group record raises ``GroupRecordError`` naming the offset."""
    try:
        for batch in iterate_batches(data, position):
            batch.ensure_valid()
            if batch.header.is_control_batch:
                continue
            for record in batch.records():
                try:
                    decoded = decode_record(record.key, record.value)
                except GroupRecordError as error:
                    raise GroupRecordError(f"record at offset {record.offset}: {error}") from None
                yield LoadedGroupRecord(record.offset, record.timestamp, decoded)
    except StorageError as error:
        raise GroupRecordError(f"__consumer_offsets batch: {error}") from None


# -- placement -------------------------------------------------------------------------------------


def partition_for(group_id: str, num_partitions: int) -> int:
    """The ``__consumer_offsets`` partition of ``group_id`` (Kafka's ``partitionFor``:
    ``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions``, where abs(MIN_VALUE) is 0)."""
    if num_partitions <= 0:
        raise ValueError(f"num_partitions must be positive, not {num_partitions}")
    return kafka_abs(java_string_hash(group_id)) % num_partitions
