"""The Kafka protocol codec: the one module that imports the protocol library, kio (pinned exactly).

What this module owns: which APIs and versions the listener serves (``API_VERSIONS``), reading a
request frame (header and body) and writing a response frame, and the message classes the rest of
the listener builds and reads, re-exported here under stable names so a change of kio (its reader
signature changed once already) stays inside this file.

Rules kept:

* **One version to handle per API.** A request of any served version is decoded into the class of
  the highest served version of its API, field by field (a field the older version lacks gets the
  schema's default: ``current_leader_epoch`` -1, ``allow_auto_topic_creation`` true...); a response
  is built at the highest version and written at the request's version, fields the older version
  lacks left out. What differs in meaning between versions (Metadata v0's empty topic list means
  all topics) is the handler's to know; ``decode_request`` gives it the header's version.
* **Strict decoding.** A frame shorter than its header, a body kio cannot read, or bytes left over
  after the body is a ``KafkaDecodeError``: the listener closes the connection, as Kafka does with a
  request it cannot parse. An API key or version not served is ``UnsupportedRequest`` (ApiVersions
  is then answered in the v0 format with UNSUPPORTED_VERSION, KIP-511).
* **Record batches are bytes.** Produce's and Fetch's ``records`` pass through untouched: the
  broker's own code (``runtime/storage/records.py``) validates and stores them.
* **Headers follow the version.** A flexible version (KIP-482: AlterPartitionReassignments,
  ListPartitionReassignments, ElectLeaders v2) has a v2 request header and a v1 response header
  (each with tagged fields, none of which is read or written); every other served version a v1
  request header and a v0 response header (just the correlation id).

kio 0.6.5 has no classes for some early versions (CreateTopics 0-1, DeleteTopics 0,
DescribeConfigs 0, OffsetForLeaderEpoch 0-1); those are not served. Every client this listener is
tested with asks for the highest versions, which are.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import io
import struct
import types
import typing
from collections.abc import Mapping
from functools import cache
from typing import Final

from kio.index import load_request_schema, load_response_schema
from kio.schema.alter_configs.v1.request import AlterableConfig as AlterConfigsEntry
from kio.schema.alter_configs.v1.request import AlterConfigsRequest, AlterConfigsResource
from kio.schema.alter_configs.v1.response import AlterConfigsResourceResponse, AlterConfigsResponse
from kio.schema.alter_partition_reassignments.v0.request import (
    AlterPartitionReassignmentsRequest,
    ReassignableTopic,
)
from kio.schema.alter_partition_reassignments.v0.response import (
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v2.request import ApiVersionsRequest
from kio.schema.api_versions.v2.response import ApiVersion, ApiVersionsResponse
from kio.schema.create_topics.v3.request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from kio.schema.create_topics.v3.response import CreatableTopicResult, CreateTopicsResponse
from kio.schema.delete_topics.v3.request import DeleteTopicsRequest
from kio.schema.delete_topics.v3.response import DeletableTopicResult, DeleteTopicsResponse
from kio.schema.describe_configs.v1.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.describe_configs.v1.response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
)
from kio.schema.elect_leaders.v2.request import ElectLeadersRequest
from kio.schema.elect_leaders.v2.response import (
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.fetch.v11.response import FetchableTopicResponse, FetchResponse
from kio.schema.fetch.v11.response import PartitionData as FetchPartitionData
from kio.schema.incremental_alter_configs.v0.request import AlterableConfig as IncrementalAlterConfigsEntry
from kio.schema.incremental_alter_configs.v0.request import (
    AlterConfigsResource as IncrementalAlterConfigsResource,
)
from kio.schema.incremental_alter_configs.v0.request import IncrementalAlterConfigsRequest
from kio.schema.incremental_alter_configs.v0.response import (
    AlterConfigsResourceResponse as IncrementalAlterConfigsResourceResponse,
)
from kio.schema.incremental_alter_configs.v0.response import IncrementalAlterConfigsResponse
from kio.schema.init_producer_id.v0.request import InitProducerIdRequest
from kio.schema.init_producer_id.v0.response import InitProducerIdResponse
from kio.schema.list_offsets.v3.request import ListOffsetsPartition, ListOffsetsRequest, ListOffsetsTopic
from kio.schema.list_offsets.v3.response import (
    ListOffsetsPartitionResponse,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from kio.schema.list_partition_reassignments.v0.request import ListPartitionReassignmentsRequest
from kio.schema.list_partition_reassignments.v0.response import (
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)
from kio.schema.metadata.v5.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v5.response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kio.schema.offset_for_leader_epoch.v3.request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from kio.schema.offset_for_leader_epoch.v3.response import (
    EpochEndOffset,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderTopicResult,
)
from kio.schema.produce.v7.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v7.response import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
)
from kio.schema.request_header.v1.header import RequestHeader as _RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as _RequestHeaderV2
from kio.schema.sasl_authenticate.v1.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v1.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse
from kio.schema.types import BrokerId, ProducerId, TopicName
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError
from kio.static.primitive import Records, TZAware, i8, i16, i32, i32Timedelta, i64, i64Timedelta

__all__ = [
    "API_VERSIONS",
    "AlterConfigsEntry",
    "AlterConfigsRequest",
    "AlterConfigsResource",
    "AlterConfigsResourceResponse",
    "AlterConfigsResponse",
    "AlterPartitionReassignmentsRequest",
    "AlterPartitionReassignmentsResponse",
    "ApiKey",
    "ApiVersion",
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "BrokerId",
    "CreatableReplicaAssignment",
    "CreatableTopic",
    "CreatableTopicConfig",
    "CreatableTopicResult",
    "CreateTopicsRequest",
    "CreateTopicsResponse",
    "DeletableTopicResult",
    "DeleteTopicsRequest",
    "DeleteTopicsResponse",
    "DescribeConfigsRequest",
    "DescribeConfigsResource",
    "DescribeConfigsResourceResult",
    "DescribeConfigsResponse",
    "DescribeConfigsResult",
    "ElectLeadersRequest",
    "ElectLeadersResponse",
    "EpochEndOffset",
    "FetchPartition",
    "FetchPartitionData",
    "FetchRequest",
    "FetchResponse",
    "FetchTopic",
    "FetchableTopicResponse",
    "IncrementalAlterConfigsEntry",
    "IncrementalAlterConfigsRequest",
    "IncrementalAlterConfigsResource",
    "IncrementalAlterConfigsResourceResponse",
    "IncrementalAlterConfigsResponse",
    "InitProducerIdRequest",
    "InitProducerIdResponse",
    "KafkaDecodeError",
    "KafkaErrorCode",
    "ListOffsetsPartition",
    "ListOffsetsPartitionResponse",
    "ListOffsetsRequest",
    "ListOffsetsResponse",
    "ListOffsetsTopic",
    "ListOffsetsTopicResponse",
    "ListPartitionReassignmentsRequest",
    "ListPartitionReassignmentsResponse",
    "MetadataRequest",
    "MetadataRequestTopic",
    "MetadataResponse",
    "MetadataResponseBroker",
    "MetadataResponsePartition",
    "MetadataResponseTopic",
    "OffsetForLeaderEpochRequest",
    "OffsetForLeaderEpochResponse",
    "OffsetForLeaderPartition",
    "OffsetForLeaderTopic",
    "OffsetForLeaderTopicResult",
    "OngoingPartitionReassignment",
    "OngoingTopicReassignment",
    "PartitionProduceData",
    "PartitionProduceResponse",
    "PartitionResult",
    "ProduceRequest",
    "ProduceResponse",
    "ProducerId",
    "ReassignablePartitionResponse",
    "ReassignableTopic",
    "ReassignableTopicResponse",
    "Records",
    "ReplicaElectionResult",
    "Request",
    "RequestHeader",
    "Response",
    "SaslAuthenticateRequest",
    "SaslAuthenticateResponse",
    "SaslHandshakeRequest",
    "SaslHandshakeResponse",
    "TopicName",
    "TopicProduceData",
    "TopicProduceResponse",
    "UnsupportedRequest",
    "api_versions_fallback",
    "append_time",
    "decode_request",
    "duration",
    "encode_response",
    "error",
    "i8",
    "i16",
    "i32",
    "i64",
    "lifetime",
    "millis",
    "peek_header",
    "records",
]


class ApiKey:
    """Kafka's API keys of the served APIs (Kafka's ``ApiKeys`` names)."""

    PRODUCE: Final = 0
    FETCH: Final = 1
    LIST_OFFSETS: Final = 2
    METADATA: Final = 3
    SASL_HANDSHAKE: Final = 17
    API_VERSIONS: Final = 18
    CREATE_TOPICS: Final = 19
    DELETE_TOPICS: Final = 20
    INIT_PRODUCER_ID: Final = 22
    OFFSET_FOR_LEADER_EPOCH: Final = 23
    DESCRIBE_CONFIGS: Final = 32
    ALTER_CONFIGS: Final = 33
    SASL_AUTHENTICATE: Final = 36
    ELECT_LEADERS: Final = 43
    INCREMENTAL_ALTER_CONFIGS: Final = 44
    ALTER_PARTITION_REASSIGNMENTS: Final = 45
    LIST_PARTITION_REASSIGNMENTS: Final = 46


# API key -> (lowest, highest) version served. The highest versions are the ones every tested
# client accepts (docs/kafka-protocol.md); nothing here that is not implemented is ever advertised.
API_VERSIONS: Final[Mapping[int, tuple[int, int]]] = types.MappingProxyType(
    {
        ApiKey.PRODUCE: (3, 7),
        ApiKey.FETCH: (4, 11),
        ApiKey.LIST_OFFSETS: (1, 3),
        ApiKey.METADATA: (0, 5),
        ApiKey.SASL_HANDSHAKE: (0, 1),
        ApiKey.API_VERSIONS: (0, 2),
        ApiKey.CREATE_TOPICS: (2, 3),
        ApiKey.DELETE_TOPICS: (1, 3),
        ApiKey.INIT_PRODUCER_ID: (0, 0),
        ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 3),
        ApiKey.DESCRIBE_CONFIGS: (1, 1),
        ApiKey.ALTER_CONFIGS: (0, 1),
        ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 0),
        ApiKey.SASL_AUTHENTICATE: (0, 1),
        ApiKey.ELECT_LEADERS: (0, 2),
        ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
        ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    }
)

Request: typing.TypeAlias = (
    ApiVersionsRequest
    | MetadataRequest
    | ProduceRequest
    | FetchRequest
    | ListOffsetsRequest
    | InitProducerIdRequest
    | OffsetForLeaderEpochRequest
    | CreateTopicsRequest
    | DeleteTopicsRequest
    | DescribeConfigsRequest
    | AlterConfigsRequest
    | IncrementalAlterConfigsRequest
    | SaslHandshakeRequest
    | SaslAuthenticateRequest
    | ElectLeadersRequest
    | AlterPartitionReassignmentsRequest
    | ListPartitionReassignmentsRequest
)
Response: typing.TypeAlias = (
    ApiVersionsResponse
    | MetadataResponse
    | ProduceResponse
    | FetchResponse
    | ListOffsetsResponse
    | InitProducerIdResponse
    | OffsetForLeaderEpochResponse
    | CreateTopicsResponse
    | DeleteTopicsResponse
    | DescribeConfigsResponse
    | AlterConfigsResponse
    | IncrementalAlterConfigsResponse
    | SaslHandshakeResponse
    | SaslAuthenticateResponse
    | ElectLeadersResponse
    | AlterPartitionReassignmentsResponse
    | ListPartitionReassignmentsResponse
)
_REQUESTS: Final[Mapping[int, type[Request]]] = {
    ApiKey.API_VERSIONS: ApiVersionsRequest,
    ApiKey.METADATA: MetadataRequest,
    ApiKey.PRODUCE: ProduceRequest,
    ApiKey.FETCH: FetchRequest,
    ApiKey.LIST_OFFSETS: ListOffsetsRequest,
    ApiKey.INIT_PRODUCER_ID: InitProducerIdRequest,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: OffsetForLeaderEpochRequest,
    ApiKey.CREATE_TOPICS: CreateTopicsRequest,
    ApiKey.DELETE_TOPICS: DeleteTopicsRequest,
    ApiKey.DESCRIBE_CONFIGS: DescribeConfigsRequest,
    ApiKey.ALTER_CONFIGS: AlterConfigsRequest,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: IncrementalAlterConfigsRequest,
    ApiKey.SASL_HANDSHAKE: SaslHandshakeRequest,
    ApiKey.SASL_AUTHENTICATE: SaslAuthenticateRequest,
    ApiKey.ELECT_LEADERS: ElectLeadersRequest,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: AlterPartitionReassignmentsRequest,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: ListPartitionReassignmentsRequest,
}
_RESPONSES: Final[Mapping[type[Response], int]] = {
    ApiVersionsResponse: ApiKey.API_VERSIONS,
    MetadataResponse: ApiKey.METADATA,
    ProduceResponse: ApiKey.PRODUCE,
    FetchResponse: ApiKey.FETCH,
    ListOffsetsResponse: ApiKey.LIST_OFFSETS,
    InitProducerIdResponse: ApiKey.INIT_PRODUCER_ID,
    OffsetForLeaderEpochResponse: ApiKey.OFFSET_FOR_LEADER_EPOCH,
    CreateTopicsResponse: ApiKey.CREATE_TOPICS,
    DeleteTopicsResponse: ApiKey.DELETE_TOPICS,
    DescribeConfigsResponse: ApiKey.DESCRIBE_CONFIGS,
    AlterConfigsResponse: ApiKey.ALTER_CONFIGS,
    IncrementalAlterConfigsResponse: ApiKey.INCREMENTAL_ALTER_CONFIGS,
    SaslHandshakeResponse: ApiKey.SASL_HANDSHAKE,
    SaslAuthenticateResponse: ApiKey.SASL_AUTHENTICATE,
    ElectLeadersResponse: ApiKey.ELECT_LEADERS,
    AlterPartitionReassignmentsResponse: ApiKey.ALTER_PARTITION_REASSIGNMENTS,
    ListPartitionReassignmentsResponse: ApiKey.LIST_PARTITION_REASSIGNMENTS,
}


class KafkaDecodeError(ValueError):
    """A frame that cannot be read as a request: the connection is closed."""


class UnsupportedRequest(KafkaDecodeError):
    """An API key or version this listener does not serve."""

    def __init__(self, api_key: int, api_version: int) -> None:
        super().__init__(f"API key {api_key} version {api_version} is not served")
        self.api_key = api_key
        self.api_version = api_version


@dataclasses.dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


_FIXED_HEADER = struct.Struct(">hhi")  # api key, api version, correlation id
_NO_TAGGED_FIELDS: Final = b"\0"  # an empty tagged-field section (unsigned varint 0)
_SIZE = struct.Struct(">i")


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """(api key, api version, correlation id): the part of the header every version shares."""
    if len(frame) < _FIXED_HEADER.size:
        raise KafkaDecodeError(f"a request of {len(frame)} bytes has no header")
    api_key, api_version, correlation_id = _FIXED_HEADER.unpack_from(frame)
    return int(api_key), int(api_version), int(correlation_id)


def is_served(api_key: int, api_version: int) -> bool:
    versions = API_VERSIONS.get(api_key)
    return versions is not None and versions[0] <= api_version <= versions[1]


def decode_request(frame: bytes) -> tuple[RequestHeader, Request]:
    """The header and the request (as the highest served version's class) of one frame (without
    its size prefix). Raises UnsupportedRequest, or KafkaDecodeError for anything unreadable."""
    api_key, api_version, correlation_id = peek_header(frame)
    if not is_served(api_key, api_version):
        raise UnsupportedRequest(api_key, api_version)
    frame = bytes(frame)  # kio reads read-only buffers only (a bytes object is returned as is)
    read_header, read_body, target = _request_plan(api_key, api_version)
    try:
        header, header_size = read_header(frame, 0)
        body, body_size = read_body(frame, header_size)
    except (SerialError, ValueError) as failure:
        raise KafkaDecodeError(f"API key {api_key} v{api_version}: {failure}") from None
    if header_size + body_size != len(frame):
        raise KafkaDecodeError(
            f"API key {api_key} v{api_version}: "
            f"{len(frame) - header_size - body_size} bytes after the request"
        )
    request = typing.cast("Request", _convert(body, target))
    return RequestHeader(api_key, api_version, correlation_id, header.client_id), request


def encode_response(header: RequestHeader, response: Response) -> bytes:
    """The size-prefixed frame answering ``header``'s request, at its version."""
    api_key = _RESPONSES.get(type(response))
    if api_key != header.api_key:
        raise TypeError(f"{type(response).__name__} does not answer API key {header.api_key}")
    target = _response_class(header.api_key, header.api_version)
    return _frame(header.correlation_id, _convert(response, target), flexible=target.__flexible__)


def api_versions_fallback(correlation_id: int) -> bytes:
    """KIP-511: the answer to an ApiVersions request of a version not served, in the v0 format
    every client can read: UNSUPPORTED_VERSION and the served ranges, so the client asks again
    with a version from them."""
    response = ApiVersionsResponseV0(
        error_code=KafkaErrorCode.unsupported_version,
        api_keys=tuple(
            ApiVersionV0(api_key=i16(key), min_version=i16(low), max_version=i16(high))
            for key, (low, high) in sorted(API_VERSIONS.items())
        ),
    )
    return _frame(correlation_id, response)


# ------------------------------------------------------------------------------- values


def error(code: int) -> KafkaErrorCode:
    """Kafka's error code of that number (every code actorlog answers is one of kio's)."""
    return KafkaErrorCode(code)


def millis(value: datetime.timedelta) -> int:
    return round(value.total_seconds() * 1000)


def duration(ms: int) -> i32Timedelta:
    return typing.cast("i32Timedelta", datetime.timedelta(milliseconds=ms))


def lifetime(ms: int) -> i64Timedelta:
    return typing.cast("i64Timedelta", datetime.timedelta(milliseconds=ms))


def append_time(ms: int) -> TZAware | None:
    """A log append time in epoch milliseconds (-1: none, as Kafka writes it)."""
    if ms < 0:
        return None
    return typing.cast("TZAware", datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC))


def records(data: bytes) -> Records:
    """Stored record batches, as they are: the protocol frames them, nothing re-encodes them."""
    return typing.cast("Records", data)


# -------------------------------------------------------------------------- implementation


def _frame(correlation_id: int, entity: typing.Any, *, flexible: bool = False) -> bytes:
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    buffer.write(_SIZE.pack(correlation_id))
    if flexible:
        buffer.write(_NO_TAGGED_FIELDS)  # response header v1
    entity_writer(type(entity))(buffer, entity)
    frame = buffer.getbuffer()
    _SIZE.pack_into(frame, 0, len(frame) - _SIZE.size)
    del frame
    return buffer.getvalue()


@cache
def _request_plan(api_key: int, api_version: int) -> tuple[typing.Any, typing.Any, type[object]]:
    schema = load_request_schema(api_key, api_version)
    header = _RequestHeaderV2 if schema.__flexible__ else _RequestHeaderV1
    return entity_reader(header), entity_reader(schema), _REQUESTS[api_key]


@cache
def _response_class(api_key: int, api_version: int) -> typing.Any:
    return load_response_schema(api_key, api_version)


def _convert(value: typing.Any, target: typing.Any) -> typing.Any:
    """``value`` (an entity of one version of a message) as an entity of ``target`` (another
    version of the same message): fields by name, defaults for fields ``value`` lacks."""
    if type(value) is target:
        return value
    arguments: dict[str, object] = {}
    for name, kind, inner, default in _plan(target):
        present = getattr(value, name, _MISSING)
        if present is _MISSING:
            arguments[name] = default()
        elif kind == "entity" and present is not None:
            arguments[name] = _convert(present, inner)
        elif kind == "entities" and present is not None:
            arguments[name] = tuple(
                _convert(item, inner) for item in typing.cast("tuple[object, ...]", present)
            )
        else:
            arguments[name] = present
    return target(**arguments)


_MISSING: Final = object()


@cache
def _plan(target: typing.Any) -> tuple[tuple[str, str, typing.Any, typing.Callable[[], object]], ...]:
    plan: list[tuple[str, str, typing.Any, typing.Callable[[], object]]] = []
    for field in dataclasses.fields(target):
        annotation = field.type
        optional = False
        if typing.get_origin(annotation) in (types.UnionType, typing.Union):
            arguments = [a for a in typing.get_args(annotation) if a is not types.NoneType]
            optional = len(arguments) < len(typing.get_args(annotation))
            annotation = arguments[0]
        kind, inner = "value", object
        if typing.get_origin(annotation) is tuple:
            element = typing.get_args(annotation)[0]
            if dataclasses.is_dataclass(element):
                kind, inner = "entities", typing.cast("type[object]", element)
            annotation = tuple
        elif dataclasses.is_dataclass(annotation):
            kind, inner = "entity", typing.cast("type[object]", annotation)
        plan.append((field.name, kind, inner, _default_of(field, annotation, optional)))
    return tuple(plan)


def _default_of(
    field: dataclasses.Field[object], annotation: object, optional: bool
) -> typing.Callable[[], object]:
    """The value a field takes when the version it comes from lacks it: the schema's default,
    else Kafka's implicit one (null, an empty array, zero, an empty string, false)."""
    if field.default is not dataclasses.MISSING:
        default = field.default
        return lambda: default
    if optional:
        return lambda: None
    implicit: object
    if annotation is tuple:
        implicit = ()
    elif annotation is bool:
        implicit = False
    elif isinstance(annotation, type) and issubclass(annotation, datetime.timedelta):
        implicit = datetime.timedelta(0)
    elif isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        implicit = annotation(0)
    elif isinstance(annotation, type) and issubclass(annotation, int):
        implicit = 0
    elif isinstance(annotation, type) and issubclass(annotation, str):
        implicit = ""
    elif isinstance(annotation, type) and issubclass(annotation, bytes):
        implicit = b""
    else:
        raise TypeError(f"no implicit default for {field.name}: {annotation!r}")
    return lambda: implicit
