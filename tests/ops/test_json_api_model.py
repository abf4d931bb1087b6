"""The JSON API's pure half: parsing and validation, partition choice, batches, response shaping."""

from __future__ import annotations

import base64
import struct
from typing import Any

import orjson
import pytest
from multidict import MultiDict

from actors.clients.producer.errors import (
    BufferExhaustedError,
    NetworkError,
    NotEnoughReplicasError,
    ProducerClosedError,
    ProducerTimeoutError,
    RecordTooLargeError,
)
from actors.clients.producer.partitioner import keyed_partition
from actors.clients.producer.protocol import RecordMetadata
from actors.common.errors import ErrorCode
from actors.common.protocol import (
    BrokerEndpoint,
    MetadataResponse,
    PartitionMetadata,
    ProducePartitionResponse,
    TopicMetadata,
)
from ops.json_api.model import (
    DEFAULT_READ_MAX_BYTES,
    DEFAULT_READ_MAX_RECORDS,
    ApiError,
    Format,
    RecordInput,
    assign_partitions,
    build_partition_batches,
    cluster_body,
    decode_fetched_records,
    outcome_of_delivery,
    outcomes_of_batch,
    parse_partition,
    parse_produce_body,
    parse_read_query,
    parse_topic,
    partition_of,
    produce_response,
    read_body,
    reject_query,
    status_of,
    topic_body,
    topics_body,
)
from runtime.storage.record_builder import SimpleRecord, build_batch
from runtime.storage.records import (
    ATTRIBUTES_OFFSET,
    CONTROL_MASK,
    CRC_OFFSET,
    RecordHeader,
    TimestampType,
    compute_crc,
    iterate_batches,
)


def produce(body: object, *, max_records: int = 100, partition_in_path: bool = False) -> Any:
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    return parse_produce_body(raw, max_records=max_records, partition_in_path=partition_in_path)


def refused(call: Any, *args: Any, **kwargs: Any) -> ApiError:
    with pytest.raises(ApiError) as caught:
        call(*args, **kwargs)
    return caught.value


# ----------------------------------------------------------------------------- produce bodies


@pytest.mark.parametrize(
    ("body", "status", "error", "says"),
    [
        (b"{not json", 400, ErrorCode.INVALID_REQUEST, "not valid JSON"),
        (b"", 400, ErrorCode.INVALID_REQUEST, "not valid JSON"),
        ([{"value": 1}], 400, ErrorCode.INVALID_REQUEST, "must be a JSON object, not a list"),
        ({"records": [{"value": 1}], "ack": "all"}, 400, ErrorCode.INVALID_REQUEST, "unknown field(s) ack"),
        ({}, 400, ErrorCode.INVALID_REQUEST, "body.records is required"),
        ({"records": {"value": 1}}, 400, ErrorCode.INVALID_REQUEST, "must be a list, not an object"),
        ({"records": []}, 400, ErrorCode.INVALID_REQUEST, "at least one record"),
        ({"records": [1]}, 400, ErrorCode.INVALID_REQUEST, "records[0] must be a JSON object, not a number"),
        ({"records": [{"value": 1}, {"valu": 2}]}, 400, ErrorCode.INVALID_REQUEST, "records[1] has unknown"),
        ({"records": [{"key": "k"}]}, 400, ErrorCode.INVALID_REQUEST, "records[0].value is required"),
        ({"records": [{"value": 1, "partition": "0"}]}, 400, ErrorCode.INVALID_REQUEST, "must be an integer"),
        ({"records": [{"value": 1, "partition": True}]}, 400, ErrorCode.INVALID_REQUEST, "not a boolean"),
        ({"records": [{"value": 1, "partition": 1.5}]}, 400, ErrorCode.INVALID_REQUEST, "not a number"),
        ({"records": [{"value": 1, "partition": -1}]}, 400, ErrorCode.INVALID_REQUEST, "must be in [0, "),
        ({"records": [{"value": 1, "partition": 2**31}]}, 400, ErrorCode.INVALID_REQUEST, "must be in [0, "),
        (
            {"records": [{"value": 1, "timestamp": -1}]},
            400,
            ErrorCode.INVALID_REQUEST,
            "timestamp must be in",
        ),
        (
            {"records": [{"value": 1, "timestamp": "now"}]},
            400,
            ErrorCode.INVALID_REQUEST,
            "timestamp must be",
        ),
        ({"records": [{"value": 1}], "acks": "2"}, 400, ErrorCode.INVALID_REQUIRED_ACKS, "body.acks"),
        ({"records": [{"value": 1}], "acks": "ALL"}, 400, ErrorCode.INVALID_REQUIRED_ACKS, "body.acks"),
        ({"records": [{"value": 1}], "acks": True}, 400, ErrorCode.INVALID_REQUIRED_ACKS, "not true"),
        ({"records": [{"value": 1}], "acks": 2}, 400, ErrorCode.INVALID_REQUIRED_ACKS, "not 2"),
        ({"records": [{"value": 1}], "timeout_ms": -5}, 400, ErrorCode.INVALID_REQUEST, "timeout_ms"),
        ({"records": [{"value": 1}], "timeout_ms": 10**9}, 400, ErrorCode.INVALID_REQUEST, "timeout_ms"),
        ({"records": [{"value": 1}], "key_format": "avro"}, 400, ErrorCode.INVALID_REQUEST, "key_format"),
        (
            {"records": [{"value": 5}], "value_format": "string"},
            400,
            ErrorCode.INVALID_REQUEST,
            "value must be a string (format string), not a number",
        ),
        (
            {"records": [{"value": "%%%"}], "value_format": "binary"},
            400,
            ErrorCode.INVALID_REQUEST,
            "not valid base64",
        ),
        ({"records": [{"value": 1, "headers": 3}]}, 400, ErrorCode.INVALID_REQUEST, "an object or a list"),
        ({"records": [{"value": 1, "headers": {"h": 1}}]}, 400, ErrorCode.INVALID_REQUEST, "string or null"),
        (
            {"records": [{"value": 1, "headers": [{"value": "v"}]}]},
            400,
            ErrorCode.INVALID_REQUEST,
            "headers[0].key is required",
        ),
        (
            {"records": [{"value": 1, "headers": [{"key": "k", "v": "v"}]}]},
            400,
            ErrorCode.INVALID_REQUEST,
            "unknown field(s) v",
        ),
        ({"records": [{"value": 1}] * 101}, 413, ErrorCode.RECORD_LIST_TOO_LARGE, "at most 100"),
    ],
)
def test_malformed_produce_bodies_are_refused_naming_the_field(
    body: object, status: int, error: ErrorCode, says: str
) -> None:
    problem = refused(produce, body)
    assert (problem.status, problem.error) == (status, error)
    assert says in problem.message


def test_a_record_may_not_name_a_partition_on_the_partition_endpoint() -> None:
    problem = refused(produce, {"records": [{"value": 1, "partition": 0}]}, partition_in_path=True)
    assert problem.status == 400
    assert "the path names the partition" in problem.message


def test_keys_and_values_are_encoded_as_their_format_says() -> None:
    parsed = produce(
        {
            "records": [
                {"key": {"id": 7}, "value": [1, "two", None]},
                {"key": "user-1", "value": None},
                {"key": None, "value": 3.5},
            ]
        }
    )
    assert [(r.key, r.value) for r in parsed.records] == [
        (b'{"id":7}', b'[1,"two",null]'),
        (b'"user-1"', None),
        (None, b"3.5"),
    ]
    text = produce(
        {"records": [{"key": "k\u00e9", "value": "v"}], "key_format": "string", "value_format": "string"}
    )
    assert (text.records[0].key, text.records[0].value) == ("k\u00e9".encode(), b"v")
    raw = base64.b64encode(b"\x00\xff binary").decode()
    binary = produce(
        {"records": [{"key": raw, "value": raw}], "key_format": "binary", "value_format": "binary"}
    )
    assert (binary.records[0].key, binary.records[0].value) == (b"\x00\xff binary", b"\x00\xff binary")


def test_acks_defaults_to_all_and_accepts_kafkas_spellings() -> None:
    assert produce({"records": [{"value": 1}]}).acks == -1
    for spelling, acks in (("all", -1), ("-1", -1), ("1", 1), ("0", 0), (-1, -1), (1, 1), (0, 0)):
        assert produce({"records": [{"value": 1}], "acks": spelling}).acks == acks


def test_headers_come_as_an_object_or_as_a_list_with_repeated_names() -> None:
    as_object = produce({"records": [{"value": 1, "headers": {"a": "x", "b": None}}]})
    as_list = produce({"records": [{"value": 1, "headers": [{"key": "a", "value": "x"}, {"key": "a"}]}]})
    assert as_object.records[0].headers == (RecordHeader("a", b"x"), RecordHeader("b", None))
    assert as_list.records[0].headers == (RecordHeader("a", b"x"), RecordHeader("a", None))


def test_timestamps_and_partitions_are_kept_when_given() -> None:
    parsed = produce({"records": [{"value": 1, "partition": 2, "timestamp": 1_700_000_000_123}]})
    assert (parsed.records[0].partition, parsed.records[0].timestamp) == (2, 1_700_000_000_123)
    assert parsed.timeout_ms == 30_000


# ---------------------------------------------------------------------------- path and query


@pytest.mark.parametrize("name", ["orders", "a.b-c_D9", "x" * 249])
def test_legal_topic_names_pass(name: str) -> None:
    assert parse_topic(name) == name


@pytest.mark.parametrize("name", ["", ".", "..", "has space", "slash/", "x" * 250, "caf\u00e9"])
def test_illegal_topic_names_are_invalid_topic_exception(name: str) -> None:
    problem = refused(parse_topic, name)
    assert (problem.status, problem.error) == (400, ErrorCode.INVALID_TOPIC_EXCEPTION)


@pytest.mark.parametrize("raw", ["-1", "abc", "1.0", "", " 1", "\u0663", "2147483648", "99999999999"])
def test_partition_path_parameters_must_be_non_negative_int32(raw: str) -> None:
    problem = refused(parse_partition, raw)
    assert (problem.status, problem.error) == (400, ErrorCode.INVALID_REQUEST)


def test_read_query_defaults() -> None:
    query = parse_read_query(MultiDict({"offset": "5"}))
    assert (query.offset, query.max_records, query.max_bytes, query.timeout_ms, query.format) == (
        5, DEFAULT_READ_MAX_RECORDS, DEFAULT_READ_MAX_BYTES, 0, Format.JSON,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ({}, "offset is required"),
        ({"offset": "-1"}, "offset must be an integer"),
        ({"offset": "abc"}, "offset must be an integer"),
        ({"offset": "0", "max_records": "0"}, "max_records must be"),
        ({"offset": "0", "max_records": "100000"}, "max_records must be"),
        ({"offset": "0", "max_bytes": "0"}, "max_bytes must be"),
        ({"offset": "0", "timeout_ms": "600000"}, "timeout_ms must be"),
        ({"offset": "0", "format": "xml"}, "format must be one of"),
        ({"offset": "0", "limit": "5"}, "unknown query parameter(s) limit"),
    ],
)
def test_bad_read_queries_are_refused(query: dict[str, str], says: str) -> None:
    problem = refused(parse_read_query, MultiDict(query))
    assert (problem.status, problem.error) == (400, ErrorCode.INVALID_REQUEST)
    assert says in problem.message


def test_repeated_query_parameters_are_refused() -> None:
    problem = refused(parse_read_query, MultiDict([("offset", "1"), ("offset", "2")]))
    assert "more than once" in problem.message
    assert "unknown" in refused(reject_query, MultiDict({"x": "1"})).message


# -------------------------------------------------------------------------- partition choice


def test_keyed_records_go_where_kafkas_default_partitioner_puts_them() -> None:
    keys = [f"user-{n}".encode() for n in range(50)]
    records = [RecordInput(key=key, value=b"v") for key in keys]
    chosen = assign_partitions(records, partition_count=7, available=[0], rotation=0)
    assert chosen == [keyed_partition(key, 7) for key in keys]
    assert len(set(chosen)) > 1  # every partition counts, available or not


def test_unkeyed_records_of_one_request_share_a_partition_rotating_over_available_ones() -> None:
    records = [RecordInput(key=None, value=b"v")] * 3
    assert assign_partitions(records, partition_count=4, available=[1, 3], rotation=0) == [1, 1, 1]
    assert assign_partitions(records, partition_count=4, available=[1, 3], rotation=1) == [3, 3, 3]
    assert assign_partitions(records, partition_count=4, available=[1, 3], rotation=2) == [1, 1, 1]


def test_explicit_partitions_win_and_unknown_ones_are_refused() -> None:
    records = [RecordInput(key=b"k", value=b"v", partition=2), RecordInput(key=None, value=b"v", partition=0)]
    assert assign_partitions(records, partition_count=3, available=[], rotation=0) == [2, 0]
    problem = refused(
        assign_partitions, [RecordInput(key=None, value=b"v", partition=3)], partition_count=3, available=[0],
        rotation=0,
    )  # fmt: skip
    assert (problem.status, problem.error) == (404, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    problem = refused(
        assign_partitions, records, partition_count=3, available=[0], rotation=0, path_partition=3
    )
    assert problem.status == 404
    assert assign_partitions(records, partition_count=3, available=[], rotation=0, path_partition=1) == [1, 1]


def test_unkeyed_records_without_any_leader_are_leader_not_available() -> None:
    problem = refused(
        assign_partitions, [RecordInput(key=None, value=b"v")], partition_count=2, available=[], rotation=0
    )
    assert (problem.status, problem.error) == (503, ErrorCode.LEADER_NOT_AVAILABLE)


def test_partition_of_unknown_partition_is_404() -> None:
    topic = TopicMetadata(name="t", error_code=ErrorCode.NONE, partitions=(_partition(0),))
    assert partition_of(topic, 0).partition == 0
    assert refused(partition_of, topic, 1).status == 404


# ---------------------------------------------------------------------------- batches, outcomes


def test_one_batch_per_partition_in_request_order_with_default_timestamps() -> None:
    records = [
        RecordInput(key=None, value=b"a"),
        RecordInput(key=b"k", value=b"b", timestamp=5, headers=(RecordHeader("h", b"x"),)),
        RecordInput(key=None, value=b"c"),
    ]
    batches = build_partition_batches(records, [1, 0, 1], now_ms=1_000)
    assert [(b.partition, b.indexes, b.timestamps) for b in batches] == [
        (0, (1,), (5,)),
        (1, (0, 2), (1_000, 1_000)),
    ]
    (decoded,) = list(iterate_batches(batches[1].records))
    decoded.ensure_valid()
    assert [(r.offset, r.value, r.timestamp) for r in decoded.records()] == [
        (0, b"a", 1_000),
        (1, b"c", 1_000),
    ]
    (keyed,) = list(iterate_batches(batches[0].records))
    assert keyed.records()[0].headers == (RecordHeader("h", b"x"),)


def test_outcomes_number_records_from_the_base_offset() -> None:
    (batch,) = build_partition_batches([RecordInput(key=None, value=b"v")] * 3, [2, 2, 2], now_ms=10)
    ok = ProducePartitionResponse(topic="t", partition=2, error_code=ErrorCode.NONE, base_offset=40)
    assert [(o.offset, o.timestamp) for o in outcomes_of_batch(batch, ok, acks=1)] == [
        (40, 10),
        (41, 10),
        (42, 10),
    ]
    appended = ProducePartitionResponse(
        topic="t", partition=2, error_code=ErrorCode.NONE, base_offset=0, log_append_time_ms=99
    )
    assert {o.timestamp for o in outcomes_of_batch(batch, appended, acks=-1)} == {99}
    assert [o.offset for o in outcomes_of_batch(batch, None, acks=0)] == [-1, -1, -1]
    failed = ProducePartitionResponse(
        topic="t", partition=2, error_code=ErrorCode.NOT_ENOUGH_REPLICAS, error_message="ISR too small"
    )
    assert {(o.error, o.message) for o in outcomes_of_batch(batch, failed, acks=-1)} == {
        (ErrorCode.NOT_ENOUGH_REPLICAS, "ISR too small")
    }


def test_batches_for_the_producer_are_not_encoded() -> None:
    records = [RecordInput(key=None, value=b"v")] * 3
    (batch,) = build_partition_batches(records, [1, 1, 1], now_ms=7, encode=False)
    assert (batch.partition, batch.indexes, batch.timestamps, batch.records) == (1, (0, 1, 2), (7, 7, 7), b"")


UNKNOWN = "may or may not have been written"


def test_producer_deliveries_become_record_outcomes() -> None:
    written = outcome_of_delivery(3, RecordMetadata("t", 3, 41, 99, -1, 1), waited_ms=5)
    assert (written.error, written.offset, written.timestamp) == (ErrorCode.NONE, 41, 99)
    pending = outcome_of_delivery(3, None, waited_ms=31_000)
    assert pending.error is ErrorCode.REQUEST_TIMED_OUT
    assert pending.message is not None
    assert "31000 ms" in pending.message
    assert UNKNOWN in pending.message
    # An unknown outcome says so; a definite failure keeps the producer's code and message.
    for error, code, unknown in [
        (ProducerTimeoutError("expired in flight"), ErrorCode.REQUEST_TIMED_OUT, True),
        (NetworkError("no answer"), ErrorCode.NETWORK_EXCEPTION, True),
        (ProducerClosedError("the producer is closed"), ErrorCode.BROKER_NOT_AVAILABLE, True),
        (BufferExhaustedError("no memory"), ErrorCode.REQUEST_TIMED_OUT, False),
        (RecordTooLargeError("too large"), ErrorCode.MESSAGE_TOO_LARGE, False),
        (NotEnoughReplicasError("ISR too small"), ErrorCode.NOT_ENOUGH_REPLICAS, False),
    ]:
        outcome = outcome_of_delivery(0, error, waited_ms=1)
        assert outcome.error is code, error
        assert outcome.message is not None
        assert error.message in outcome.message
        assert (UNKNOWN in outcome.message) is unknown, outcome.message


def test_produce_response_lists_records_in_request_order_and_fails_with_the_first_error() -> None:
    records = [RecordInput(key=None, value=b"v")] * 3
    batches = build_partition_batches(records, [1, 0, 1], now_ms=7)
    ok = {
        0: outcomes_of_batch(batches[0], _answer(0, ErrorCode.NONE, 10), acks=1),
        1: outcomes_of_batch(batches[1], _answer(1, ErrorCode.NONE, 20), acks=1),
    }
    status, body = produce_response("t", batches, ok)
    assert status == 200
    assert body == {
        "topic": "t",
        "records": [
            {"partition": 1, "offset": 20, "timestamp": 7},
            {"partition": 0, "offset": 10, "timestamp": 7},
            {"partition": 1, "offset": 21, "timestamp": 7},
        ],
    }
    mixed = {**ok, 1: outcomes_of_batch(batches[1], _answer(1, ErrorCode.NOT_ENOUGH_REPLICAS, -1), acks=-1)}
    status, body = produce_response("t", batches, mixed)
    assert status == 503
    assert (body["error"], body["error_code"]) == ("NOT_ENOUGH_REPLICAS", 19)
    assert body["message"].startswith("2 of 3 record(s) not written; first, partition 1")
    assert [r.get("error") for r in body["records"]] == ["NOT_ENOUGH_REPLICAS", None, "NOT_ENOUGH_REPLICAS"]


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (ErrorCode.INVALID_REQUEST, 400),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 404),
        (ErrorCode.MESSAGE_TOO_LARGE, 413),
        (ErrorCode.OFFSET_OUT_OF_RANGE, 416),
        (ErrorCode.NOT_ENOUGH_REPLICAS, 503),
        (ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, 503),
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, 503),
        (ErrorCode.LEADER_NOT_AVAILABLE, 503),
        (ErrorCode.REQUEST_TIMED_OUT, 503),
        (ErrorCode.BROKER_NOT_AVAILABLE, 503),
        (ErrorCode.UNKNOWN_SERVER_ERROR, 500),
        (ErrorCode.DUPLICATE_SEQUENCE_NUMBER, 500),
    ],
)
def test_kafka_errors_map_to_http_statuses(error: ErrorCode, status: int) -> None:
    assert status_of(error) == status


# -------------------------------------------------------------------------------------- reads


def test_decoding_starts_at_the_offset_and_stops_at_max_records() -> None:
    data = build_batch([SimpleRecord(b"a"), SimpleRecord(b"b"), SimpleRecord(b"c")], base_offset=10)
    data += build_batch([SimpleRecord(b"d")], base_offset=13)
    records, next_offset = decode_fetched_records(data, offset=11, max_records=10)
    assert ([r.offset for r in records], next_offset) == ([11, 12, 13], 14)
    records, next_offset = decode_fetched_records(data, offset=11, max_records=1)
    assert ([r.offset for r in records], next_offset) == ([11], 12)
    assert decode_fetched_records(b"", offset=5, max_records=10) == ([], 5)


def test_log_append_time_batches_report_the_batch_timestamp() -> None:
    data = build_batch(
        [SimpleRecord(b"a", timestamp=1)], timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=777
    )
    records, _ = decode_fetched_records(data, offset=0, max_records=10)
    assert records[0].timestamp == 777


def test_control_batches_are_skipped() -> None:
    control = bytearray(build_batch([SimpleRecord(b"marker")], base_offset=0))
    (attributes,) = struct.unpack_from(">h", control, ATTRIBUTES_OFFSET)
    struct.pack_into(">h", control, ATTRIBUTES_OFFSET, attributes | CONTROL_MASK)
    struct.pack_into(">I", control, CRC_OFFSET, compute_crc(control, 0, len(control)))
    data = bytes(control) + build_batch([SimpleRecord(b"data")], base_offset=1)
    records, next_offset = decode_fetched_records(data, offset=0, max_records=10)
    assert ([(r.offset, r.value) for r in records], next_offset) == ([(1, b"data")], 2)


def test_read_body_renders_keys_values_and_headers_in_each_format() -> None:
    data = build_batch(
        [SimpleRecord(b'{"n":1}', key=b'"k"', headers=(RecordHeader("h", b"v"),))], base_offset=3
    )
    records, _ = decode_fetched_records(data, offset=3, max_records=1)

    def shown(fmt: Format) -> dict[str, Any]:
        body = read_body("t", 0, records, next_offset=4, high_watermark=4, log_start_offset=0, fmt=fmt)
        record: dict[str, Any] = body["records"][0]
        return record

    assert shown(Format.JSON) | {"timestamp": 0} == {
        "offset": 3, "timestamp": 0, "key": "k", "value": {"n": 1}, "headers": [{"key": "h", "value": "v"}],
    }  # fmt: skip
    assert (shown(Format.STRING)["key"], shown(Format.STRING)["value"]) == ('"k"', '{"n":1}')
    binary = shown(Format.BINARY)
    assert base64.b64decode(binary["value"]) == b'{"n":1}'
    assert base64.b64decode(binary["headers"][0]["value"]) == b"v"


def test_records_that_cannot_be_shown_as_text_are_422_naming_the_offset() -> None:
    records, _ = decode_fetched_records(
        build_batch([SimpleRecord(b"\xff\xfe", key=None)], base_offset=8), offset=8, max_records=1
    )
    problem = refused(
        read_body, "t", 0, records, next_offset=9, high_watermark=9, log_start_offset=0, fmt=Format.STRING
    )
    assert (problem.status, problem.error) == (422, ErrorCode.INVALID_RECORD)
    assert "offset 8" in problem.message
    # format=json falls back to base64 for such a field, marked, so the read goes on.
    shown = read_body("t", 0, records, next_offset=9, high_watermark=9, log_start_offset=0, fmt=Format.JSON)
    assert shown["records"][0]["value_format"] == "binary"
    body = read_body("t", 0, records, next_offset=9, high_watermark=9, log_start_offset=0, fmt=Format.BINARY)
    assert body["records"][0]["key"] is None


# ----------------------------------------------------------------------------------- metadata


def test_metadata_bodies_use_kafkas_names() -> None:
    metadata = MetadataResponse(
        brokers=(BrokerEndpoint(broker_id=2, host="h", port=1, rack="r1", security_protocol="SSL"),),
        controller_id=2,
        topics=(
            TopicMetadata(name="b", error_code=ErrorCode.NONE, partitions=(_partition(1), _partition(0))),
            TopicMetadata(name="a", error_code=ErrorCode.NONE, partitions=()),
        ),
        cluster_id="c",
    )
    assert cluster_body(metadata) == {
        "cluster_id": "c",
        "controller_id": 2,
        "brokers": [{"broker_id": 2, "host": "h", "port": 1, "rack": "r1", "security_protocol": "SSL"}],
    }
    assert topics_body(metadata) == {"topics": ["a", "b"]}
    assert topic_body(metadata.topics[0])["partitions"] == [
        {
            "partition": 0,
            "leader": 1,
            "leader_epoch": 4,
            "replicas": [1, 2],
            "isr": [1],
            "offline_replicas": [2],
        },
        {
            "partition": 1,
            "leader": 1,
            "leader_epoch": 4,
            "replicas": [1, 2],
            "isr": [1],
            "offline_replicas": [2],
        },
    ]


def _partition(number: int) -> PartitionMetadata:
    return PartitionMetadata(
        partition=number, error_code=ErrorCode.NONE, leader=1, leader_epoch=4, replicas=(1, 2), isr=(1,),
        offline_replicas=(2,),
    )  # fmt: skip


def _answer(partition: int, error: ErrorCode, base_offset: int) -> ProducePartitionResponse:
    return ProducePartitionResponse(topic="t", partition=partition, error_code=error, base_offset=base_offset)
