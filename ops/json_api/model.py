"""The JSON API's pure half: request parsing and validation, partition choice, record batches, and
response shaping. No I/O: ``ops/json_api/routes.py`` reads the HTTP request, calls these, asks the actor
system, and calls these again to shape the answer.

Rules kept here
---------------
* Validation is strict and happens before anything is sent: unknown fields, missing fields, wrong
  types (a JSON ``true`` is never an integer), bad encodings, out-of-range numbers and unknown
  partitions reject the whole request with an ``ApiError`` (HTTP status, Kafka error code, message
  naming the field), so a rejected request has written nothing.
* Keys and values are JSON values written as their JSON bytes (``json``, the default), JSON strings
  written as UTF-8 (``string``), or base64 strings written as the decoded bytes (``binary``). A JSON
  ``null`` is Kafka's null in every format (a null value is a tombstone).
* Reads show them the same three ways. With ``format=json`` a key, value or header value that is
  not JSON (a header: not UTF-8) — say a line from a console producer — comes as base64 of its
  bytes, and its record (header) says so with ``"key_format"``/``"value_format": "binary"``, so one
  foreign record never blocks a partition. With ``format=string`` a field that is not UTF-8 is a
  422 naming the offset (the caller asked for text; base64 is what ``format=binary`` is for).
* Partitions: a record's explicit ``partition``; else, with a key, Kafka's default partitioner
  (``to_positive(murmur2(key bytes)) % partitions``, every partition counting, so a key's partition
  never moves); else one partition per request, rotating over the partitions that have a leader.
* With acks=1 and acks=0, records for one partition become one v2 record batch, in request order;
  each record's offset is the batch's base offset plus its position in the batch. With acks=all the
  broker's idempotent producer batches them (``routes.py``); each record's outcome is its own
  ``RecordMetadata`` or ``ProducerError`` (``outcome_of_delivery``), and one not acknowledged when
  the answer is due is REQUEST_TIMED_OUT, "may or may not have been written".
* Errors use Kafka's names and numbers; the HTTP status says what kind of failure it is (4xx: fix
  the request; 503: retriable, try again; 500: the server failed).
"""

from __future__ import annotations

import base64
import binascii
import enum
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from actors.clients.producer.errors import (
    BufferExhaustedError,
    NetworkError,
    ProducerClosedError,
    ProducerError,
    ProducerTimeoutError,
)
from actors.clients.producer.partitioner import keyed_partition
from actors.clients.producer.protocol import RecordMetadata
from actors.common.errors import ErrorCode
from actors.common.protocol import (
    ListOffsetsPartitionResponse,
    MetadataResponse,
    PartitionMetadata,
    ProducePartitionResponse,
    TopicMetadata,
)
from runtime.storage.record_builder import SimpleRecord, build_batch
from runtime.storage.records import RecordHeader, TimestampType, iterate_batches

__all__ = [
    "DEFAULT_READ_MAX_BYTES",
    "DEFAULT_READ_MAX_RECORDS",
    "MAX_PRODUCE_TIMEOUT_MS",
    "MAX_READ_MAX_BYTES",
    "MAX_READ_MAX_RECORDS",
    "MAX_READ_TIMEOUT_MS",
    "MAX_RECORDS_PER_REQUEST",
    "ApiError",
    "FetchedRecord",
    "Format",
    "PartitionBatch",
    "ProduceInput",
    "ReadQuery",
    "RecordInput",
    "RecordOutcome",
    "assign_partitions",
    "build_partition_batches",
    "cluster_body",
    "decode_fetched_records",
    "error_body",
    "offsets_body",
    "outcome_of_delivery",
    "outcomes_of_batch",
    "parse_offsets_query",
    "parse_partition",
    "parse_produce_body",
    "parse_read_query",
    "parse_topic",
    "partition_of",
    "produce_response",
    "read_body",
    "reject_query",
    "status_of",
    "topic_body",
    "topics_body",
]

# Bounds: every number a caller chooses has a ceiling.
MAX_RECORDS_PER_REQUEST: Final = 10_000
DEFAULT_PRODUCE_TIMEOUT_MS: Final = 30_000  # Kafka's request.timeout.ms
MAX_PRODUCE_TIMEOUT_MS: Final = 300_000
DEFAULT_READ_MAX_RECORDS: Final = 500  # Kafka's max.poll.records
MAX_READ_MAX_RECORDS: Final = 10_000
DEFAULT_READ_MAX_BYTES: Final = 1_048_576  # Kafka's max.partition.fetch.bytes
MAX_READ_MAX_BYTES: Final = 52_428_800  # Kafka's fetch.max.bytes
MAX_READ_TIMEOUT_MS: Final = 30_000
_MAX_INT64: Final = 2**63 - 1
_MAX_INT32: Final = 2**31 - 1

# orjson reads an integer literal beyond 64 bits as a float (2**70 -> 1.1805916207174113e+21), which
# would silently store a different value, or fail a range check as "not an integer". Such a literal
# has at least 19 digits (2**63 has 19), so only a body holding a run of 19 digits is read again by
# the stdlib parser, whose integers are exact; the field checks then see the number that was sent.
_MAYBE_BEYOND_64_BITS: Final = re.compile(rb"\d{19}")

# Kafka's Topic.validate: legal characters, at most 249 of them, not "." or "..".
_TOPIC_PATTERN: Final = re.compile(r"[a-zA-Z0-9._-]{1,249}")


class ApiError(Exception):
    """A request the API refuses or cannot serve: HTTP status, Kafka error code, message."""

    def __init__(self, status: int, error: ErrorCode, message: str) -> None:
        super().__init__(f"{status} {error.name}: {message}")
        self.status = status
        self.error = error
        self.message = message

    @classmethod
    def invalid(cls, message: str) -> ApiError:
        return cls(400, ErrorCode.INVALID_REQUEST, message)

    @classmethod
    def of(cls, error: ErrorCode, message: str) -> ApiError:
        return cls(status_of(error), error, message)


_STATUS_BY_ERROR: Final[Mapping[ErrorCode, int]] = {
    ErrorCode.INVALID_REQUEST: 400,
    ErrorCode.INVALID_TOPIC_EXCEPTION: 400,
    ErrorCode.INVALID_REQUIRED_ACKS: 400,
    ErrorCode.INVALID_TIMESTAMP: 400,
    ErrorCode.INVALID_RECORD: 400,
    ErrorCode.CORRUPT_MESSAGE: 400,
    ErrorCode.SASL_AUTHENTICATION_FAILED: 401,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: 404,
    ErrorCode.MESSAGE_TOO_LARGE: 413,
    ErrorCode.RECORD_LIST_TOO_LARGE: 413,
    ErrorCode.OFFSET_OUT_OF_RANGE: 416,
}


def status_of(error: ErrorCode) -> int:
    """The HTTP status for a Kafka error: 4xx for the caller's mistakes, 503 for anything Kafka
    calls retriable (leader moves, timeouts, too few in-sync replicas), 500 otherwise."""
    status = _STATUS_BY_ERROR.get(error)
    if status is not None:
        return status
    if error.retriable or error in (ErrorCode.BROKER_NOT_AVAILABLE, ErrorCode.REPLICA_NOT_AVAILABLE):
        return 503
    return 500


def error_body(error: ErrorCode, message: str) -> dict[str, Any]:
    """The error shape every actorlog HTTP endpoint answers with (``runtime/transport/http.py``)."""
    return {"error_code": int(error), "error": error.name, "message": message}


# ------------------------------------------------------------------------------- path and query


def parse_topic(raw: str) -> str:
    if not _TOPIC_PATTERN.fullmatch(raw) or raw in (".", ".."):
        raise ApiError(
            400,
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"topic name {raw!r} is not legal: 1-249 of [a-zA-Z0-9._-], and not '.' or '..'",
        )
    return raw


def parse_partition(raw: str) -> int:
    if not raw.isascii() or not raw.isdecimal() or len(raw) > 10 or int(raw) > _MAX_INT32:
        raise ApiError.invalid(f"partition must be a non-negative 32-bit integer, not {raw!r}")
    return int(raw)


def reject_query(query: Mapping[str, str], allowed: Sequence[str] = ()) -> None:
    """Unknown query parameters are refused, as unknown body fields are; so are repeated ones."""
    unknown = sorted(set(query) - set(allowed))
    if unknown:
        expected = ", ".join(allowed) if allowed else "none"
        raise ApiError.invalid(f"unknown query parameter(s) {', '.join(unknown)} (expected: {expected})")
    for name in query:
        if len(_getall(query, name)) > 1:
            raise ApiError.invalid(f"query parameter {name} is given more than once")


def _getall(query: Mapping[str, str], name: str) -> list[str]:
    getall = getattr(query, "getall", None)
    return list(getall(name)) if getall is not None else [query[name]]


class Format(enum.Enum):
    JSON = "json"
    STRING = "string"
    BINARY = "binary"

    @classmethod
    def parse(cls, raw: object, where: str) -> Format:
        for candidate in cls:
            if raw == candidate.value:
                return candidate
        raise ApiError.invalid(f"{where} must be one of json, string, binary, not {_show(raw)}")


@dataclass(frozen=True, slots=True)
class ReadQuery:
    offset: int
    max_records: int
    max_bytes: int
    timeout_ms: int
    format: Format


_READ_PARAMETERS: Final = ("offset", "max_records", "max_bytes", "timeout_ms", "format")


def parse_read_query(query: Mapping[str, str]) -> ReadQuery:
    reject_query(query, _READ_PARAMETERS)
    if "offset" not in query:
        raise ApiError.invalid("query parameter offset is required (the first offset to read)")
    return ReadQuery(
        offset=_query_int(query, "offset", None, 0, _MAX_INT64),
        max_records=_query_int(query, "max_records", DEFAULT_READ_MAX_RECORDS, 1, MAX_READ_MAX_RECORDS),
        max_bytes=_query_int(query, "max_bytes", DEFAULT_READ_MAX_BYTES, 1, MAX_READ_MAX_BYTES),
        timeout_ms=_query_int(query, "timeout_ms", 0, 0, MAX_READ_TIMEOUT_MS),
        format=Format.parse(query.get("format", "json"), "query parameter format"),
    )


_OFFSETS_PARAMETERS: Final = ("timestamp",)


def parse_offsets_query(query: Mapping[str, str]) -> int | None:
    """``GET .../offsets``: the optional ``timestamp`` (ms since the epoch, >= 0) to find the first
    offset of (Kafka's ``offsetsForTimes``, docs/log.md §11); None when not asked."""
    reject_query(query, _OFFSETS_PARAMETERS)
    return _query_int(query, "timestamp", None, 0, _MAX_INT64) if "timestamp" in query else None


def offsets_body(
    topic: str,
    partition: int,
    log_start_offset: int,
    high_watermark: int,
    for_timestamp: ListOffsetsPartitionResponse | None = None,
) -> dict[str, Any]:
    """The offsets endpoint's answer; with ``for_timestamp`` (the leader's answer to a timestamp)
    ``offset_for_timestamp`` too: the found record's offset, timestamp and leader epoch, or null
    when no record below the high watermark has a timestamp at or after the one asked for."""
    body: dict[str, Any] = {
        "topic": topic,
        "partition": partition,
        "log_start_offset": log_start_offset,
        "high_watermark": high_watermark,
    }
    if for_timestamp is not None:
        body["offset_for_timestamp"] = (
            None
            if for_timestamp.offset < 0
            else {
                "offset": for_timestamp.offset,
                "timestamp": for_timestamp.timestamp,
                "leader_epoch": for_timestamp.leader_epoch,
            }
        )
    return body


@dataclass(frozen=True, slots=True)
class StateChangesQuery:
    since: int
    incarnation: int | None
    limit: int


_STATE_CHANGES_PARAMETERS: Final = ("since", "incarnation", "limit")
DEFAULT_STATE_CHANGES_LIMIT: Final = 10_000
MAX_STATE_CHANGES_LIMIT: Final = 100_000


def parse_state_changes_query(query: Mapping[str, str]) -> StateChangesQuery:
    """``GET /v1/state-changes``: the events after sequence ``since`` of process ``incarnation``."""
    reject_query(query, _STATE_CHANGES_PARAMETERS)
    return StateChangesQuery(
        since=_query_int(query, "since", 0, 0, _MAX_INT64),
        incarnation=_query_int(query, "incarnation", None, 0, _MAX_INT64) if "incarnation" in query else None,
        limit=_query_int(query, "limit", DEFAULT_STATE_CHANGES_LIMIT, 1, MAX_STATE_CHANGES_LIMIT),
    )


def parse_health_query(query: Mapping[str, str]) -> int | None:
    """``GET /v1/cluster/health``: the broker whose restart is asked about, if any."""
    reject_query(query, ("broker",))
    return _query_int(query, "broker", None, 0, _MAX_INT32) if "broker" in query else None


def _query_int(query: Mapping[str, str], name: str, default: int | None, low: int, high: int) -> int:
    raw = query.get(name)
    if raw is None:
        assert default is not None
        return default
    if not raw.isascii() or not raw.isdecimal() or len(raw) > 19 or not low <= int(raw) <= high:
        raise ApiError.invalid(f"query parameter {name} must be an integer in [{low}, {high}], not {raw!r}")
    return int(raw)


# ------------------------------------------------------------------------------------ produce


@dataclass(frozen=True, slots=True)
class RecordInput:
    key: bytes | None
    value: bytes | None
    headers: tuple[RecordHeader, ...] = ()
    partition: int | None = None
    timestamp: int | None = None


@dataclass(frozen=True, slots=True)
class ProduceInput:
    records: tuple[RecordInput, ...]
    acks: int
    timeout_ms: int


_PRODUCE_FIELDS: Final = frozenset({"records", "acks", "timeout_ms", "key_format", "value_format"})
_RECORD_FIELDS: Final = frozenset({"key", "value", "headers", "partition", "timestamp"})
_ACKS: Final[Mapping[object, int]] = {"all": -1, "-1": -1, "1": 1, "0": 0}


def parse_produce_body(body: bytes, *, max_records: int, partition_in_path: bool) -> ProduceInput:
    """A produce request body, validated in full. On the partition endpoint (``partition_in_path``)
    records may not name a partition of their own."""
    document = _parse_json(body)
    if not isinstance(document, dict):
        raise ApiError.invalid(f"body must be a JSON object, not {_json_type(document)}")
    _reject_unknown(document, _PRODUCE_FIELDS, "body")
    if "records" not in document:
        raise ApiError.invalid("body.records is required (a list of records)")
    records = document["records"]
    if not isinstance(records, list):
        raise ApiError.invalid(f"body.records must be a list, not {_json_type(records)}")
    if not records:
        raise ApiError.invalid("body.records must hold at least one record")
    if len(records) > max_records:
        raise ApiError(
            413,
            ErrorCode.RECORD_LIST_TOO_LARGE,
            f"{len(records)} records in one request; at most {max_records} are accepted",
        )
    key_format = Format.parse(document.get("key_format", "json"), "body.key_format")
    value_format = Format.parse(document.get("value_format", "json"), "body.value_format")
    return ProduceInput(
        records=tuple(
            _parse_record(record, f"body.records[{index}]", key_format, value_format, partition_in_path)
            for index, record in enumerate(records)
        ),
        acks=_parse_acks(document.get("acks", "all")),
        timeout_ms=_int_field(
            document, "timeout_ms", "body", DEFAULT_PRODUCE_TIMEOUT_MS, 0, MAX_PRODUCE_TIMEOUT_MS
        ),
    )


def _parse_json(body: bytes) -> Any:
    """The body as JSON, its integers exact whatever their size (see ``_MAYBE_BEYOND_64_BITS``)."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise ApiError.invalid(f"body is not valid JSON: {error}") from None
    if _MAYBE_BEYOND_64_BITS.search(body) is None:
        return document
    # orjson has accepted the body: it is UTF-8 JSON without NaN or Infinity, at most 1024 deep.
    try:
        return json.loads(body)
    except RecursionError:
        raise ApiError.invalid("body is nested too deeply") from None
    except ValueError as error:  # an integer of more than 4300 digits
        raise ApiError.invalid(f"body holds a number that cannot be read: {error}") from None


def _parse_acks(raw: object) -> int:
    if isinstance(raw, int) and not isinstance(raw, bool) and raw in (-1, 0, 1):
        return raw
    if isinstance(raw, str) and raw in _ACKS:
        return _ACKS[raw]
    raise ApiError(
        400,
        ErrorCode.INVALID_REQUIRED_ACKS,
        f'body.acks must be "all", "1" or "0" (or -1, 1, 0), not {_show(raw)}',
    )


def _parse_record(
    raw: object, where: str, key_format: Format, value_format: Format, partition_in_path: bool
) -> RecordInput:
    if not isinstance(raw, dict):
        raise ApiError.invalid(f"{where} must be a JSON object, not {_json_type(raw)}")
    _reject_unknown(raw, _RECORD_FIELDS, where)
    if "value" not in raw:
        raise ApiError.invalid(f"{where}.value is required (null for a tombstone)")
    partition: int | None = None
    if "partition" in raw:
        if partition_in_path:
            raise ApiError.invalid(f"{where}.partition is not accepted here: the path names the partition")
        partition = _int_field(raw, "partition", where, None, 0, _MAX_INT32)
    timestamp: int | None = None
    if "timestamp" in raw:
        timestamp = _int_field(raw, "timestamp", where, None, 0, _MAX_INT64)
    return RecordInput(
        key=_encode(raw.get("key"), key_format, f"{where}.key"),
        value=_encode(raw["value"], value_format, f"{where}.value"),
        headers=_parse_headers(raw.get("headers"), f"{where}.headers"),
        partition=partition,
        timestamp=timestamp,
    )


def _encode(raw: object, fmt: Format, where: str) -> bytes | None:
    if raw is None:
        return None
    if fmt is Format.JSON:
        try:
            return orjson.dumps(raw)
        except orjson.JSONEncodeError as error:
            # An integer outside [-2**63, 2**64 - 1] (it would read back as another number) or a
            # value nested more than 254 deep: refused, as the caller's mistake, before any write.
            raise ApiError.invalid(
                f"{where} cannot be stored as JSON ({error}): integers must be in the 64-bit range "
                f"[{-(2**63)}, {2**64 - 1}] and values nested at most 254 deep; send the value as a "
                "string otherwise"
            ) from None
    if not isinstance(raw, str):
        raise ApiError.invalid(f"{where} must be a string (format {fmt.value}), not {_json_type(raw)}")
    if fmt is Format.STRING:
        return raw.encode("utf-8")
    try:
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        raise ApiError.invalid(f"{where} is not valid base64 (format binary)") from None


def _parse_headers(raw: object, where: str) -> tuple[RecordHeader, ...]:
    """Headers as an object (``{"name": "value"}``) or, for repeated names, a list of
    ``{"key": ..., "value": ...}``; values are UTF-8 strings or null."""
    if raw is None:
        return ()
    pairs: list[tuple[str, object]]
    if isinstance(raw, dict):
        pairs = list(raw.items())
    elif isinstance(raw, list):
        pairs = []
        for index, item in enumerate(raw):
            if not isinstance(item, dict):
                raise ApiError.invalid(f"{where}[{index}] must be an object, not {_json_type(item)}")
            _reject_unknown(item, frozenset({"key", "value"}), f"{where}[{index}]")
            if "key" not in item or not isinstance(item["key"], str):
                raise ApiError.invalid(f"{where}[{index}].key is required and must be a string")
            pairs.append((item["key"], item.get("value")))
    else:
        raise ApiError.invalid(f"{where} must be an object or a list, not {_json_type(raw)}")
    headers: list[RecordHeader] = []
    for name, value in pairs:
        if value is not None and not isinstance(value, str):
            raise ApiError.invalid(f"{where}.{name} must be a string or null, not {_json_type(value)}")
        headers.append(RecordHeader(name, None if value is None else value.encode("utf-8")))
    return tuple(headers)


def _int_field(
    document: Mapping[str, object], name: str, where: str, default: int | None, low: int, high: int
) -> int:
    if name not in document:
        assert default is not None
        return default
    raw = document[name]
    if not isinstance(raw, int) or isinstance(raw, bool):
        raise ApiError.invalid(f"{where}.{name} must be an integer, not {_json_type(raw)}")
    if not low <= raw <= high:
        raise ApiError.invalid(f"{where}.{name} must be in [{low}, {high}], not {raw}")
    return raw


def _reject_unknown(document: Mapping[str, object], known: frozenset[str], where: str) -> None:
    unknown = sorted(set(document) - known)
    if unknown:
        raise ApiError.invalid(
            f"{where} has unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})"
        )


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _show(value: object) -> str:
    text = orjson.dumps(value).decode() if _serialisable(value) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _serialisable(value: object) -> bool:
    try:
        orjson.dumps(value)
    except TypeError:
        return False
    return True


# --------------------------------------------------------------------------- partition choice


def partition_of(topic: TopicMetadata, partition: int) -> PartitionMetadata:
    for candidate in topic.partitions:
        if candidate.partition == partition:
            return candidate
    raise ApiError(
        404,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        f"topic {topic.name} has no partition {partition} (it has {len(topic.partitions)})",
    )


def assign_partitions(
    records: Sequence[RecordInput],
    *,
    partition_count: int,
    available: Sequence[int],
    rotation: int,
    path_partition: int | None = None,
) -> list[int]:
    """The partition of each record (see the module docstring). ``available`` are the partitions
    with a leader; ``rotation`` picks the one partition of this request's unkeyed records."""
    if path_partition is not None:
        if not 0 <= path_partition < partition_count:
            raise _no_partition(path_partition, partition_count)
        return [path_partition] * len(records)
    chosen: list[int] = []
    for record in records:
        if record.partition is not None:
            if record.partition >= partition_count:
                raise _no_partition(record.partition, partition_count)
            chosen.append(record.partition)
        elif record.key is not None:
            chosen.append(keyed_partition(record.key, partition_count))
        else:
            if not available:
                raise ApiError(
                    503,
                    ErrorCode.LEADER_NOT_AVAILABLE,
                    "no partition of the topic has a leader for records without key or partition",
                )
            chosen.append(available[rotation % len(available)])
    return chosen


def _no_partition(partition: int, partition_count: int) -> ApiError:
    return ApiError(
        404,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        f"partition {partition} does not exist (the topic has {partition_count})",
    )


@dataclass(frozen=True, slots=True)
class PartitionBatch:
    """One partition's records of a request, as one v2 batch; ``indexes`` are their positions in
    the request, ``timestamps`` their CreateTime. ``records`` is empty when the batch was not
    encoded (acks=all: the idempotent producer builds its own batches)."""

    partition: int
    indexes: tuple[int, ...]
    timestamps: tuple[int, ...]
    records: bytes


def build_partition_batches(
    records: Sequence[RecordInput], partitions: Sequence[int], *, now_ms: int, encode: bool = True
) -> list[PartitionBatch]:
    """One batch per partition, records in request order; records without a timestamp get
    ``now_ms`` (the producer's clock, as Kafka's producer stamps CreateTime). Without ``encode``
    the record batch bytes are left out (``b""``)."""
    by_partition: dict[int, list[int]] = {}
    for index, partition in enumerate(partitions):
        by_partition.setdefault(partition, []).append(index)
    batches: list[PartitionBatch] = []
    for partition, indexes in sorted(by_partition.items()):
        simple = [_simple_record(records[i], now_ms) for i in indexes]
        batches.append(
            PartitionBatch(
                partition=partition,
                indexes=tuple(indexes),
                timestamps=tuple(record.timestamp for record in simple),
                records=build_batch(simple) if encode else b"",
            )
        )
    return batches


def _simple_record(record: RecordInput, now_ms: int) -> SimpleRecord:
    timestamp = now_ms if record.timestamp is None else record.timestamp
    return SimpleRecord(value=record.value, key=record.key, headers=record.headers, timestamp=timestamp)


@dataclass(frozen=True, slots=True)
class RecordOutcome:
    """What happened to one record: an offset (-1 with acks=0) and a timestamp, or an error."""

    partition: int
    error: ErrorCode = ErrorCode.NONE
    offset: int = -1
    timestamp: int = -1
    message: str | None = None

    def body(self) -> dict[str, Any]:
        if self.error is ErrorCode.NONE:
            return {"partition": self.partition, "offset": self.offset, "timestamp": self.timestamp}
        return {"partition": self.partition, **error_body(self.error, self.message or self.error.name)}


def outcomes_of_batch(
    batch: PartitionBatch, response: ProducePartitionResponse | None, *, acks: int
) -> list[RecordOutcome]:
    """Per-record outcomes of one partition's batch; ``response`` is None for acks=0 (Kafka's
    producer reports offset -1 then, since the broker does not answer)."""
    if response is None:
        return [RecordOutcome(batch.partition, timestamp=t) for t in batch.timestamps]
    if response.error_code is not ErrorCode.NONE:
        message = response.error_message or response.error_code.name
        return [RecordOutcome(batch.partition, response.error_code, message=message) for _ in batch.indexes]
    assert acks != 0
    append_time = response.log_append_time_ms
    return [
        RecordOutcome(
            batch.partition,
            offset=response.base_offset + position,
            timestamp=append_time if append_time != -1 else timestamp,
        )
        for position, timestamp in enumerate(batch.timestamps)
    ]


_UNKNOWN_OUTCOME: Final = "the record may or may not have been written"


def outcome_of_delivery(
    partition: int, delivered: RecordMetadata | ProducerError | None, *, waited_ms: int
) -> RecordOutcome:
    """One record's outcome from the idempotent producer (acks=all): where it was written, its
    error, or, for ``None`` (not finished when the answer was due, ``waited_ms`` after the request
    arrived), REQUEST_TIMED_OUT. Wherever the producer cannot know whether the broker has the record
    (a timeout, no answer, a producer closed meanwhile) the message says so."""
    if delivered is None:
        return RecordOutcome(
            partition,
            ErrorCode.REQUEST_TIMED_OUT,
            message=f"not acknowledged within {waited_ms} ms (timeout_ms + the broker's request.timeout.ms); "
            f"{_UNKNOWN_OUTCOME}: the broker's idempotent producer keeps delivering it until its "
            "delivery.timeout.ms",
        )
    if isinstance(delivered, RecordMetadata):
        return RecordOutcome(partition, offset=delivered.offset, timestamp=delivered.timestamp)
    if isinstance(delivered, ProducerClosedError):
        # The broker is shutting down (or its producer failed): not a fault of the request.
        return RecordOutcome(
            partition,
            ErrorCode.BROKER_NOT_AVAILABLE,
            message=f"the broker's producer closed before the record was acknowledged "
            f"({delivered.message}); {_UNKNOWN_OUTCOME}",
        )
    message = delivered.message
    if isinstance(delivered, ProducerTimeoutError | NetworkError) and not isinstance(
        delivered, BufferExhaustedError
    ):
        message = f"{message}; {_UNKNOWN_OUTCOME}"
    return RecordOutcome(partition, delivered.error_code, message=message)


def produce_response(
    topic: str, batches: Sequence[PartitionBatch], outcomes: Mapping[int, Sequence[RecordOutcome]]
) -> tuple[int, dict[str, Any]]:
    """(HTTP status, body): the records' outcomes in request order. 200 when every record was
    written; otherwise the status of the first failed record's error, with that error at the top
    level as well (so a client that only looks at the status still sees the failure)."""
    by_index = {
        index: outcome
        for batch in batches
        for index, outcome in zip(batch.indexes, outcomes[batch.partition], strict=True)
    }
    ordered = [by_index[index] for index in range(len(by_index))]
    body: dict[str, Any] = {"topic": topic, "records": [outcome.body() for outcome in ordered]}
    failed = [outcome for outcome in ordered if outcome.error is not ErrorCode.NONE]
    if not failed:
        return 200, body
    first = failed[0]
    summary = (
        f"{len(failed)} of {len(ordered)} record(s) not written; first, partition {first.partition}: "
        f"{first.message or first.error.name}"
    )
    return status_of(first.error), {**error_body(first.error, summary), **body}


# --------------------------------------------------------------------------------------- read


@dataclass(frozen=True, slots=True)
class FetchedRecord:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[RecordHeader, ...]


def decode_fetched_records(
    records: bytes, *, offset: int, max_records: int
) -> tuple[list[FetchedRecord], int]:
    """The records at or after ``offset`` in fetched batch bytes, at most ``max_records``, and the
    offset to read next. Control batches are skipped; a LogAppendTime batch's records carry the
    batch's timestamp, as Kafka's consumer reports them."""
    fetched: list[FetchedRecord] = []
    next_offset = offset
    for batch in iterate_batches(records):
        header = batch.header
        if header.is_control_batch:
            next_offset = max(next_offset, header.next_offset)
            continue
        batch.ensure_valid()
        log_append_time = header.timestamp_type == TimestampType.LOG_APPEND_TIME
        for record in batch.records():
            if record.offset < offset:
                continue
            if len(fetched) == max_records:
                return fetched, next_offset
            fetched.append(
                FetchedRecord(
                    offset=record.offset,
                    timestamp=header.max_timestamp if log_append_time else record.timestamp,
                    key=record.key,
                    value=record.value,
                    headers=record.headers,
                )
            )
            next_offset = record.offset + 1
        # Compacted batches may end in a gap: the next read starts after the whole batch.
        next_offset = max(next_offset, header.next_offset)
    return fetched, next_offset


def read_body(
    topic: str,
    partition: int,
    records: Sequence[FetchedRecord],
    *,
    next_offset: int,
    high_watermark: int,
    log_start_offset: int,
    fmt: Format,
) -> dict[str, Any]:
    return {
        "topic": topic,
        "partition": partition,
        "records": [_read_record(record, fmt) for record in records],
        "next_offset": next_offset,
        "high_watermark": high_watermark,
        "log_start_offset": log_start_offset,
    }


def _read_record(record: FetchedRecord, fmt: Format) -> dict[str, Any]:
    """One record as ``read_body`` shows it. The ``*_format`` markers appear only on a fallback, so
    a record that is shown as asked looks exactly as it did before the markers existed."""
    # With format=json a field that is not JSON falls back to base64 rather than failing the read:
    # the default format must not let one record from another writer block the partition.
    fallback = fmt is Format.JSON
    shown: dict[str, Any] = {"offset": record.offset, "timestamp": record.timestamp}
    for field, data in (("key", record.key), ("value", record.value)):
        shown[field], as_binary = _render(data, fmt, record.offset, field, fallback=fallback)
        if as_binary:
            shown[f"{field}_format"] = Format.BINARY.value
    headers = []
    for header in record.headers:
        # Header values are text by convention (Kafka's are bytes): JSON reads show them as UTF-8.
        value, as_binary = _render(
            header.value, Format.STRING if fallback else fmt, record.offset, "header", fallback=fallback
        )
        shown_header: dict[str, Any] = {"key": header.key, "value": value}
        if as_binary:
            shown_header["value_format"] = Format.BINARY.value
        headers.append(shown_header)
    shown["headers"] = headers
    return shown


def _render(data: bytes | None, fmt: Format, offset: int, what: str, *, fallback: bool) -> tuple[Any, bool]:
    """``data`` shown in ``fmt``, and whether it fell back to base64 (only when ``fallback``)."""
    if data is None:
        return None, False
    if fmt is Format.BINARY:
        return _base64(data), False
    try:
        return (orjson.loads(data) if fmt is Format.JSON else data.decode("utf-8")), False
    except (orjson.JSONDecodeError, UnicodeDecodeError):
        if fallback:
            return _base64(data), True
        kind = "JSON" if fmt is Format.JSON else "UTF-8"
        raise ApiError(
            422,
            ErrorCode.INVALID_RECORD,
            f"the {what} of the record at offset {offset} is not {kind}; read it with format=binary",
        ) from None


def _base64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# ----------------------------------------------------------------------------------- metadata


def cluster_body(metadata: MetadataResponse) -> dict[str, Any]:
    return {
        "cluster_id": metadata.cluster_id,
        "controller_id": metadata.controller_id,
        "brokers": [
            {
                "broker_id": b.broker_id,
                "host": b.host,
                "port": b.port,
                "rack": b.rack,
                "security_protocol": b.security_protocol,
            }
            for b in metadata.brokers
        ],
    }


def topics_body(metadata: MetadataResponse) -> dict[str, Any]:
    return {"topics": sorted(t.name for t in metadata.topics if t.error_code is ErrorCode.NONE)}


def topic_body(topic: TopicMetadata) -> dict[str, Any]:
    return {
        "topic": topic.name,
        "partitions": [
            {
                "partition": p.partition,
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "replicas": list(p.replicas),
                "isr": list(p.isr),
                "offline_replicas": list(p.offline_replicas),
            }
            for p in sorted(topic.partitions, key=lambda p: p.partition)
        ],
    }
