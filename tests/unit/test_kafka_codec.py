"""The Kafka codec (``ops/kafka/codec.py``, kio) against kafka-python's ``kafka.protocol`` as an oracle.

For every served API and version, a request and a response with every field set to a value that is
not its default are written by both libraries and must be the same bytes: responses built at the
highest served version and written by the codec at the requested one (fields the version lacks
left out), requests written by kafka-python at that version and read back by the codec, whose
result kafka-python must write again to the same bytes. Record batches are real v2 batches and
come back as the same bytes. Then the frame rules: what the codec refuses to read.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import struct
import types
import typing
import warnings
from typing import Any

import pytest

with warnings.catch_warnings():
    # kafka-python 3.0 loads its protocol schemas with the deprecated importlib.resources.read_text.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.admin.configs import AlterConfigsRequest as KpAlterConfigsRequest
    from kafka.protocol.admin.configs import AlterConfigsResponse as KpAlterConfigsResponse
    from kafka.protocol.admin.configs import DescribeConfigsRequest as KpDescribeConfigsRequest
    from kafka.protocol.admin.configs import DescribeConfigsResponse as KpDescribeConfigsResponse
    from kafka.protocol.admin.configs import (
        IncrementalAlterConfigsRequest as KpIncrementalAlterConfigsRequest,
    )
    from kafka.protocol.admin.configs import (
        IncrementalAlterConfigsResponse as KpIncrementalAlterConfigsResponse,
    )
    from kafka.protocol.admin.topics import (
        AlterPartitionReassignmentsRequest as KpAlterPartitionReassignmentsRequest,
    )
    from kafka.protocol.admin.topics import (
        AlterPartitionReassignmentsResponse as KpAlterPartitionReassignmentsResponse,
    )
    from kafka.protocol.admin.topics import CreateTopicsRequest as KpCreateTopicsRequest
    from kafka.protocol.admin.topics import CreateTopicsResponse as KpCreateTopicsResponse
    from kafka.protocol.admin.topics import DeleteTopicsRequest as KpDeleteTopicsRequest
    from kafka.protocol.admin.topics import DeleteTopicsResponse as KpDeleteTopicsResponse
    from kafka.protocol.admin.topics import ElectLeadersRequest as KpElectLeadersRequest
    from kafka.protocol.admin.topics import ElectLeadersResponse as KpElectLeadersResponse
    from kafka.protocol.admin.topics import (
        ListPartitionReassignmentsRequest as KpListPartitionReassignmentsRequest,
    )
    from kafka.protocol.admin.topics import (
        ListPartitionReassignmentsResponse as KpListPartitionReassignmentsResponse,
    )
    from kafka.protocol.consumer.fetch import FetchRequest as KpFetchRequest
    from kafka.protocol.consumer.fetch import FetchResponse as KpFetchResponse
    from kafka.protocol.consumer.offsets import ListOffsetsRequest as KpListOffsetsRequest
    from kafka.protocol.consumer.offsets import ListOffsetsResponse as KpListOffsetsResponse
    from kafka.protocol.consumer.offsets import OffsetForLeaderEpochRequest as KpOffsetForLeaderEpochRequest
    from kafka.protocol.consumer.offsets import OffsetForLeaderEpochResponse as KpOffsetForLeaderEpochResponse
    from kafka.protocol.metadata.api_versions import ApiVersionsRequest as KpApiVersionsRequest
    from kafka.protocol.metadata.api_versions import ApiVersionsResponse as KpApiVersionsResponse
    from kafka.protocol.metadata.metadata import MetadataRequest as KpMetadataRequest
    from kafka.protocol.metadata.metadata import MetadataResponse as KpMetadataResponse
    from kafka.protocol.producer import InitProducerIdRequest as KpInitProducerIdRequest
    from kafka.protocol.producer import InitProducerIdResponse as KpInitProducerIdResponse
    from kafka.protocol.producer import ProduceRequest as KpProduceRequest
    from kafka.protocol.producer import ProduceResponse as KpProduceResponse
    from kafka.protocol.sasl import SaslAuthenticateRequest as KpSaslAuthenticateRequest
    from kafka.protocol.sasl import SaslAuthenticateResponse as KpSaslAuthenticateResponse
    from kafka.protocol.sasl import SaslHandshakeRequest as KpSaslHandshakeRequest
    from kafka.protocol.sasl import SaslHandshakeResponse as KpSaslHandshakeResponse

from ops.kafka import codec
from runtime.storage.record_builder import SimpleRecord, build_batch

ORACLE: dict[int, tuple[Any, Any, type[Any], type[Any]]] = {
    codec.ApiKey.PRODUCE: (KpProduceRequest, KpProduceResponse, codec.ProduceRequest, codec.ProduceResponse),
    codec.ApiKey.FETCH: (KpFetchRequest, KpFetchResponse, codec.FetchRequest, codec.FetchResponse),
    codec.ApiKey.LIST_OFFSETS: (
        KpListOffsetsRequest, KpListOffsetsResponse, codec.ListOffsetsRequest, codec.ListOffsetsResponse,
    ),
    codec.ApiKey.METADATA: (
        KpMetadataRequest, KpMetadataResponse, codec.MetadataRequest, codec.MetadataResponse,
    ),
    codec.ApiKey.SASL_HANDSHAKE: (
        KpSaslHandshakeRequest, KpSaslHandshakeResponse,
        codec.SaslHandshakeRequest, codec.SaslHandshakeResponse,
    ),
    codec.ApiKey.API_VERSIONS: (
        KpApiVersionsRequest, KpApiVersionsResponse, codec.ApiVersionsRequest, codec.ApiVersionsResponse,
    ),
    codec.ApiKey.CREATE_TOPICS: (
        KpCreateTopicsRequest, KpCreateTopicsResponse, codec.CreateTopicsRequest, codec.CreateTopicsResponse,
    ),
    codec.ApiKey.DELETE_TOPICS: (
        KpDeleteTopicsRequest, KpDeleteTopicsResponse, codec.DeleteTopicsRequest, codec.DeleteTopicsResponse,
    ),
    codec.ApiKey.INIT_PRODUCER_ID: (
        KpInitProducerIdRequest, KpInitProducerIdResponse,
        codec.InitProducerIdRequest, codec.InitProducerIdResponse,
    ),
    codec.ApiKey.OFFSET_FOR_LEADER_EPOCH: (
        KpOffsetForLeaderEpochRequest, KpOffsetForLeaderEpochResponse,
        codec.OffsetForLeaderEpochRequest, codec.OffsetForLeaderEpochResponse,
    ),
    codec.ApiKey.DESCRIBE_CONFIGS: (
        KpDescribeConfigsRequest, KpDescribeConfigsResponse,
        codec.DescribeConfigsRequest, codec.DescribeConfigsResponse,
    ),
    codec.ApiKey.SASL_AUTHENTICATE: (
        KpSaslAuthenticateRequest, KpSaslAuthenticateResponse,
        codec.SaslAuthenticateRequest, codec.SaslAuthenticateResponse,
    ),
    codec.ApiKey.ALTER_CONFIGS: (
        KpAlterConfigsRequest, KpAlterConfigsResponse, codec.AlterConfigsRequest, codec.AlterConfigsResponse,
    ),
    codec.ApiKey.ELECT_LEADERS: (
        KpElectLeadersRequest, KpElectLeadersResponse, codec.ElectLeadersRequest, codec.ElectLeadersResponse,
    ),
    codec.ApiKey.ALTER_PARTITION_REASSIGNMENTS: (
        KpAlterPartitionReassignmentsRequest, KpAlterPartitionReassignmentsResponse,
        codec.AlterPartitionReassignmentsRequest, codec.AlterPartitionReassignmentsResponse,
    ),
    codec.ApiKey.LIST_PARTITION_REASSIGNMENTS: (
        KpListPartitionReassignmentsRequest, KpListPartitionReassignmentsResponse,
        codec.ListPartitionReassignmentsRequest, codec.ListPartitionReassignmentsResponse,
    ),
    codec.ApiKey.INCREMENTAL_ALTER_CONFIGS: (
        KpIncrementalAlterConfigsRequest, KpIncrementalAlterConfigsResponse,
        codec.IncrementalAlterConfigsRequest, codec.IncrementalAlterConfigsResponse,
    ),
}  # fmt: skip
SERVED = [
    (key, version)
    for key, (low, high) in sorted(codec.API_VERSIONS.items())
    for version in range(low, high + 1)
]
BATCH = build_batch([SimpleRecord(b"value-1", key=b"k"), SimpleRecord(b"value-2")], base_offset=0)


def test_every_served_api_has_an_oracle() -> None:
    assert set(ORACLE) == set(codec.API_VERSIONS)


def sample(cls: type[Any], depth: int = 0) -> Any:
    """An entity of ``cls`` with every field set, none to its default: two elements per array."""
    values: dict[str, Any] = {}
    for number, field in enumerate(dataclasses.fields(cls), start=1):
        annotation = field.type
        if typing.get_origin(annotation) in (types.UnionType, typing.Union):
            annotation = next(a for a in typing.get_args(annotation) if a is not types.NoneType)
        values[field.name] = _sample_value(annotation, number + depth, depth)
    return cls(**values)


def _sample_value(annotation: Any, number: int, depth: int) -> Any:
    if typing.get_origin(annotation) is tuple:
        element = typing.get_args(annotation)[0]
        return tuple(_sample_value(element, number + offset, depth) for offset in (0, 1))
    if dataclasses.is_dataclass(annotation):
        return sample(typing.cast("type[Any]", annotation), depth + 10)
    if annotation is bool:
        return True
    if annotation is codec.Records:
        return BATCH
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return annotation(6)  # an error code: NOT_LEADER_OR_FOLLOWER
    if isinstance(annotation, type) and issubclass(annotation, datetime.datetime):
        return datetime.datetime.fromtimestamp(1_700_000_000.123, tz=datetime.UTC)
    if isinstance(annotation, type) and issubclass(annotation, datetime.timedelta):
        return datetime.timedelta(milliseconds=1000 + number)
    if isinstance(annotation, type) and issubclass(annotation, bytes):
        return b"bytes-%d" % number
    if isinstance(annotation, type) and issubclass(annotation, str):
        return f"s{number}"
    if isinstance(annotation, type) and issubclass(annotation, int):
        return number % 100 + 1  # fits every integer width, never a -1 default
    raise TypeError(annotation)


def oracle(kio_entity: Any, kp_class: Any, version: int, *, top: bool = True) -> Any:
    """The kafka-python container of ``kio_entity``'s values, by field name (kio drops Kafka's
    ``Ms`` suffix where it uses a timedelta)."""
    values: dict[str, Any] = {}
    for name, field in kp_class._struct.fields.items() if top else kp_class.fields.items():
        if not field.for_version_q(version):
            continue
        kio_name = name if hasattr(kio_entity, name) else name.removesuffix("_ms")
        if not hasattr(kio_entity, kio_name):
            continue
        value = getattr(kio_entity, kio_name)
        if value is None:
            values[name] = None
        elif field.is_struct_array():
            values[name] = [_container(item, field, version) for item in value]
        elif field.is_struct():
            values[name] = _container(value, field, version)
        else:
            values[name] = _plain(value)
    return values if not top else kp_class[version](**values)


def _container(kio_entity: Any, field: Any, version: int) -> Any:
    return field.data_class(**oracle(kio_entity, field, version, top=False), version=version)


def _plain(value: Any) -> Any:
    if isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1000)
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, enum.Enum):
        return int(value.value)
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    return value


@pytest.mark.parametrize(("api_key", "version"), SERVED)
def test_responses_are_written_as_kafka_python_writes_them(api_key: int, version: int) -> None:
    _, kp_response, _, kio_response = ORACLE[api_key]
    response = sample(kio_response)
    written = codec.encode_response(codec.RequestHeader(api_key, version, 77, "c"), response)
    expected = oracle(response, kp_response, version)
    expected.with_header(correlation_id=77)
    assert written == bytes(expected.encode(header=True, framed=True))


@pytest.mark.parametrize(("api_key", "version"), SERVED)
def test_requests_are_read_as_kafka_python_writes_them(api_key: int, version: int) -> None:
    kp_request, _, kio_request, _ = ORACLE[api_key]
    sent = oracle(sample(kio_request), kp_request, version)
    sent.with_header(correlation_id=78, client_id="client-1")
    frame = bytes(sent.encode(header=True))
    header, request = codec.decode_request(frame)
    assert header == codec.RequestHeader(api_key, version, 78, "client-1")
    assert isinstance(request, kio_request)
    again = oracle(request, kp_request, version)
    again.with_header(correlation_id=78, client_id="client-1")
    assert bytes(again.encode(header=True)) == frame


def test_record_batches_pass_through_as_bytes() -> None:
    data = KpProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=BATCH)
    produce = KpProduceRequest[7](
        transactional_id=None, acks=-1, timeout_ms=1000,
        topic_data=[KpProduceRequest.TopicProduceData(name="t", partition_data=[data])],
    )  # fmt: skip
    produce.with_header(correlation_id=1, client_id=None)
    _, request = codec.decode_request(bytes(produce.encode(header=True)))
    assert isinstance(request, codec.ProduceRequest)
    assert request.topic_data[0].partition_data[0].records == BATCH
    assert codec.millis(request.timeout) == 1000


def test_an_old_version_is_read_into_the_newest_class_with_kafkas_defaults() -> None:
    fetch = KpFetchRequest[4](
        replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=1000, isolation_level=0,
        topics=[KpFetchRequest.FetchTopic(topic="t", partitions=[
            KpFetchRequest.FetchTopic.FetchPartition(partition=0, fetch_offset=5, partition_max_bytes=100),
        ])],
    )  # fmt: skip
    fetch.with_header(correlation_id=1, client_id=None)
    header, request = codec.decode_request(bytes(fetch.encode(header=True)))
    assert header.api_version == 4
    assert isinstance(request, codec.FetchRequest)
    partition = request.topics[0].partitions[0]
    assert (partition.current_leader_epoch, partition.log_start_offset) == (-1, -1)
    assert (request.session_id, request.session_epoch, request.forgotten_topics_data) == (0, -1, ())
    metadata = KpMetadataRequest[0](topics=[])
    metadata.with_header(correlation_id=2, client_id=None)
    _, read = codec.decode_request(bytes(metadata.encode(header=True)))
    assert read == codec.MetadataRequest(topics=(), allow_auto_topic_creation=True)


def test_the_api_versions_fallback_is_a_v0_answer_with_every_served_range() -> None:
    frame = codec.api_versions_fallback(9)
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    answer = KpApiVersionsResponse.decode(frame[4:], version=0, header=True)
    assert answer.header.correlation_id == 9
    assert answer.error_code == 35  # UNSUPPORTED_VERSION
    assert {(k.api_key, k.min_version, k.max_version) for k in answer.api_keys} == {
        (key, low, high) for key, (low, high) in codec.API_VERSIONS.items()
    }


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (b"\x00\x03\x00", "no header"),
        (struct.pack(">hhi", 3, 5, 1), "API key 3 v5"),  # the header stops before the client id
        (struct.pack(">hhih", 3, 5, 1, -1) + b"\x00\x00", "API key 3 v5"),  # a truncated body
        (struct.pack(">hhih", 3, 5, 1, -1) + b"\xff\xff\xff\xfe\x01", "API key 3 v5"),  # negative array
        (struct.pack(">hhih", 3, 5, 1, -1) + b"\xff\xff\xff\xff\x01" + b"!", "bytes after the request"),
        (struct.pack(">hhih", 17, 1, 1, 3) + b"abc\x00\x02\xff\xfe", "API key 17 v1"),  # bad UTF-8
    ],
)
def test_unreadable_frames_are_refused(frame: bytes, message: str) -> None:
    with pytest.raises(codec.KafkaDecodeError, match=message):
        codec.decode_request(frame)


@pytest.mark.parametrize(
    ("api_key", "version"), [(0, 2), (0, 8), (1, 3), (1, 12), (3, 6), (10, 0), (68, 0), (-1, 0)]
)
def test_keys_and_versions_not_served_are_told_apart(api_key: int, version: int) -> None:
    with pytest.raises(codec.UnsupportedRequest) as refused:
        codec.decode_request(struct.pack(">hhih", api_key, version, 1, -1))
    assert (refused.value.api_key, refused.value.api_version) == (api_key, version)


def test_a_response_must_answer_its_request() -> None:
    with pytest.raises(TypeError):
        codec.encode_response(codec.RequestHeader(3, 5, 1, None), sample(codec.FetchResponse))
