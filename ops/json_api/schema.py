"""The OpenAPI 3.1 document of the JSON API (``GET /openapi.json``).

It describes exactly what ``ops/json_api/routes.py`` serves: every path and method, their parameters,
request and response bodies (schemas are JSON Schema 2020-12, as OpenAPI 3.1 uses them, and
response objects are closed with ``additionalProperties: false``), and each error status with the
Kafka error names it carries. The tests check it validates, that it names every served route and
nothing else, and that live answers validate against it.
"""

from __future__ import annotations

import copy
from typing import Any, Final

from ops.json_api.model import (
    DEFAULT_READ_MAX_BYTES,
    DEFAULT_READ_MAX_RECORDS,
    DEFAULT_STATE_CHANGES_LIMIT,
    MAX_PRODUCE_TIMEOUT_MS,
    MAX_READ_MAX_BYTES,
    MAX_READ_MAX_RECORDS,
    MAX_READ_TIMEOUT_MS,
    MAX_RECORDS_PER_REQUEST,
    MAX_STATE_CHANGES_LIMIT,
)

__all__ = ["API_VERSION", "openapi_document"]

API_VERSION: Final = "1.0.0"
_INT32_MAX: Final = 2**31 - 1
_JSON: Final = "application/json"

Schema = dict[str, Any]


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _object(properties: dict[str, Schema], *, required: list[str] | None = None, **extra: Any) -> Schema:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
        **extra,
    }


def _integer(description: str, minimum: int | None = None, maximum: int | None = None) -> Schema:
    schema: Schema = {"type": "integer", "description": description}
    if minimum is not None:
        schema["minimum"] = minimum
    if maximum is not None:
        schema["maximum"] = maximum
    return schema


_BROKER_IDS: Final = {"type": "array", "items": {"type": "integer"}}

_SCHEMAS: Final[dict[str, Schema]] = {
    "Error": _object(
        {
            "error_code": _integer("Kafka's error code (e.g. 3 for UNKNOWN_TOPIC_OR_PARTITION)."),
            "error": {
                "type": "string",
                "description": "Kafka's error name.",
                "examples": ["NOT_ENOUGH_REPLICAS"],
            },
            "message": {"type": "string", "description": "What went wrong, for a person."},
        },
        description="Every error answer of every actorlog HTTP endpoint has this shape.",
    ),
    "Broker": _object(
        {
            "broker_id": _integer("The broker's broker.id."),
            "host": {"type": "string"},
            "port": _integer("The broker's HTTP port.", 0, 65535),
            "rack": {"type": ["string", "null"], "description": "broker.rack, or null."},
            "security_protocol": {
                "type": "string",
                "description": "Kafka's security protocol of the broker's listener: PLAINTEXT is "
                "reached at http://, SSL at https:// (docs/tls.md).",
                "examples": ["PLAINTEXT", "SSL"],
            },
        }
    ),
    "Cluster": _object(
        {
            "cluster_id": {"type": ["string", "null"], "description": "The cluster id, or null if unknown."},
            "controller_id": _integer("The active controller's broker id (-1: none known)."),
            "brokers": {"type": "array", "items": _ref("Broker"), "description": "Live brokers."},
        }
    ),
    "HealthPartition": _object(
        {
            "topic": {"type": "string"},
            "partition": _integer("Partition number.", 0),
            "leader": _integer("The leader's broker id (-1: no leader, the partition is offline)."),
            "replicas": {**_BROKER_IDS, "description": "Assigned replicas, preferred leader first."},
            "isr": {**_BROKER_IDS, "description": "In-sync replicas."},
            "out_of_isr": {**_BROKER_IDS, "description": "Assigned replicas not in the ISR."},
            "min_insync_replicas": _integer("The topic's min.insync.replicas.", 1),
            "replica_racks": {
                "type": "array",
                "items": {"type": ["string", "null"]},
                "description": "Each replica's broker.rack, in replica order (null: none, or the broker "
                "is not live).",
            },
        }
    ),
    "RestartCheck": _object(
        {
            "broker": _integer("The broker asked about.", 0),
            "live": {"type": "boolean", "description": "Whether it is a live broker now."},
            "allowed": {
                "type": "boolean",
                "description": "Whether it may restart now without taking any partition it hosts below "
                "min.insync.replicas.",
            },
            "hosted_partitions": _integer("Partitions with a replica on it.", 0),
            "blocking_partitions": {
                "type": "array",
                "items": _ref("HealthPartition"),
                "description": "Partitions whose ISR holds the broker and would be below "
                "min.insync.replicas without it.",
            },
            "reason": {"type": "string", "description": "The answer, for a person."},
        }
    ),
    "ClusterHealth": _object(
        {
            "healthy": {
                "type": "boolean",
                "description": "No partition under-replicated, under min ISR, offline or breaking the "
                "rack constraint.",
            },
            "controller_id": _integer("The active controller's broker id (-1: none known)."),
            "brokers": {**_BROKER_IDS, "description": "Live brokers."},
            "topic_count": _integer("Topics assessed.", 0),
            "partition_count": _integer("Partitions assessed.", 0),
            "under_replicated_partitions": {"type": "array", "items": _ref("HealthPartition")},
            "under_min_isr_partitions": {"type": "array", "items": _ref("HealthPartition")},
            "offline_partitions": {"type": "array", "items": _ref("HealthPartition")},
            "rack_constraint_broken_partitions": {
                "type": "array",
                "items": _ref("HealthPartition"),
                "description": "Partitions whose replicas cover fewer racks than they could.",
            },
            "restart": {
                "anyOf": [_ref("RestartCheck"), {"type": "null"}],
                "description": "Only with the broker parameter: whether that broker may restart now.",
            },
        }
    ),
    "TopicList": _object({"topics": {"type": "array", "items": {"type": "string"}}}),
    "PartitionInfo": _object(
        {
            "partition": _integer("Partition number.", 0),
            "leader": _integer("The leader's broker id (-1: no leader)."),
            "leader_epoch": _integer("The leader epoch."),
            "replicas": {**_BROKER_IDS, "description": "Assigned replicas, preferred leader first."},
            "isr": {**_BROKER_IDS, "description": "In-sync replicas."},
            "offline_replicas": {**_BROKER_IDS, "description": "Replicas on brokers that are down."},
        }
    ),
    "Topic": _object(
        {"topic": {"type": "string"}, "partitions": {"type": "array", "items": _ref("PartitionInfo")}}
    ),
    "Offsets": _object(
        {
            "topic": {"type": "string"},
            "partition": _integer("Partition number.", 0),
            "log_start_offset": _integer("The first offset still in the log.", 0),
            "high_watermark": _integer("One past the last committed offset: reads stop here.", 0),
            "offset_for_timestamp": {
                "anyOf": [_ref("OffsetAndTimestamp"), {"type": "null"}],
                "description": "Only with the timestamp parameter: the first record below the high "
                "watermark whose timestamp is at or after it, or null when there is none.",
            },
        },
        required=["topic", "partition", "log_start_offset", "high_watermark"],
    ),
    "OffsetAndTimestamp": _object(
        {
            "offset": _integer("The first offset whose record's timestamp is >= the one asked for.", 0),
            "timestamp": _integer(
                "That record's timestamp (ms since the epoch; with message.timestamp.type "
                "LogAppendTime, when the leader appended it)."
            ),
            "leader_epoch": _integer("The leader epoch of its batch (-1: none)."),
        }
    ),
    "StateChanges": _object(
        {
            "broker": _integer("The broker that answered.", 0),
            "incarnation": _integer("Its process's start time (epoch ms): sequences count within it.", 0),
            "last_sequence": _integer("The sequence to ask after next time.", 0),
            "dropped": _integer("Events after `since` the bounded ring no longer held (lost).", 0),
            "events": {
                "type": "array",
                "description": "Oldest first; the columns of the rollup's state-change files.",
                "items": {"type": "object"},
            },
        }
    ),
    "Header": _object(
        {
            "key": {"type": "string"},
            "value": {
                "type": ["string", "null"],
                "description": "UTF-8 text (base64 when reading with format=binary), or null.",
            },
        }
    ),
    "ReadHeader": _object(
        {
            "key": {"type": "string"},
            "value": {
                "type": ["string", "null"],
                "description": "UTF-8 text (base64 when reading with format=binary, or when value_format "
                "says binary), or null.",
            },
            "value_format": {
                "const": "binary",
                "description": "Only with format=json, on a header value that is not UTF-8: the value is "
                "then base64 of its bytes.",
            },
        },
        required=["key", "value"],
    ),
    "ProduceRecord": _object(
        {
            "key": {
                "description": "The key: any JSON value (key_format json), a string (string), base64 "
                "(binary), or null for none. Keyed records without a partition go to "
                "murmur2(key bytes) % partitions, as Kafka's default partitioner does. JSON integers "
                "must be in the 64-bit range [-2^63, 2^64 - 1] (larger ones would read back as "
                "another number: send them as strings).",
            },
            "value": {"description": "The value, encoded as key_format says for keys; null is a tombstone."},
            "headers": {
                "oneOf": [
                    {"type": "object", "additionalProperties": {"type": ["string", "null"]}},
                    {"type": "array", "items": _ref("Header")},
                ],
                "description": "Header name to UTF-8 value, or a list of {key, value} for repeated names.",
            },
            "partition": _integer("Explicit partition (topic endpoint only).", 0, _INT32_MAX),
            "timestamp": _integer("CreateTime in ms since the epoch; default: now.", 0),
        },
        required=["value"],
    ),
    "ProduceRequest": _object(
        {
            "records": {
                "type": "array",
                "items": _ref("ProduceRecord"),
                "minItems": 1,
                "maxItems": MAX_RECORDS_PER_REQUEST,
                "description": "Records of one partition are written in order: with acks=1 or 0 as one "
                "record batch, with acks=all by the broker's idempotent producer.",
            },
            "acks": {
                "enum": ["all", "-1", "1", "0", -1, 1, 0],
                "default": "all",
                "description": "all: once every in-sync replica has the records (and the ISR has at "
                "least min.insync.replicas); 1: once the leader has them; 0: without waiting (offsets "
                "are -1).",
            },
            "timeout_ms": _integer(
                "How long the answer may wait, beyond the broker's request.timeout.ms, for the records to "
                "be acknowledged (leader moves and retries included); records not acknowledged by then "
                "are REQUEST_TIMED_OUT and may or may not have been written.",
                0,
                MAX_PRODUCE_TIMEOUT_MS,
            )
            | {"default": 30_000},
            "key_format": {"enum": ["json", "string", "binary"], "default": "json"},
            "value_format": {"enum": ["json", "string", "binary"], "default": "json"},
        },
        required=["records"],
    ),
    "RecordMetadata": _object(
        {
            "partition": _integer("Partition the record went to.", 0),
            "offset": _integer("The record's offset (-1 with acks=0)."),
            "timestamp": _integer("CreateTime, or the log append time for LogAppendTime topics."),
        }
    ),
    "RecordError": _object(
        {
            "partition": _integer("Partition the record was meant for.", 0),
            "error_code": {"type": "integer"},
            "error": {"type": "string", "examples": ["REQUEST_TIMED_OUT", "LEADER_NOT_AVAILABLE"]},
            "message": {"type": "string"},
        }
    ),
    "ProduceResult": _object(
        {
            "topic": {"type": "string"},
            "records": {
                "type": "array",
                "items": {"oneOf": [_ref("RecordMetadata"), _ref("RecordError")]},
                "description": "One entry per request record, in request order.",
            },
        }
    ),
    "ProduceFailure": _object(
        {
            "error_code": {"type": "integer", "description": "The first failed record's error code."},
            "error": {"type": "string"},
            "message": {"type": "string"},
            "topic": {"type": "string"},
            "records": {
                "type": "array",
                "items": {"oneOf": [_ref("RecordMetadata"), _ref("RecordError")]},
            },
        },
        description="Some records were not written: each record's outcome, and the first failure.",
    ),
    "ReadRecord": _object(
        {
            "offset": _integer("The record's offset.", 0),
            "timestamp": _integer("CreateTime, or the log append time for LogAppendTime topics."),
            "key": {
                "description": "Decoded as the format parameter says (base64 when key_format says "
                "binary); null for none."
            },
            "key_format": {
                "const": "binary",
                "description": "Only with format=json, on a record whose key is not JSON (say, written "
                "by a console producer): the key is then base64 of its bytes.",
            },
            "value": {
                "description": "Decoded as the format parameter says (base64 when value_format says "
                "binary); null for a tombstone."
            },
            "value_format": {
                "const": "binary",
                "description": "Only with format=json, on a record whose value is not JSON: the value is "
                "then base64 of its bytes. Such a record never fails the read.",
            },
            "headers": {"type": "array", "items": _ref("ReadHeader")},
        },
        required=["offset", "timestamp", "key", "value", "headers"],
    ),
    "ReadResult": _object(
        {
            "topic": {"type": "string"},
            "partition": _integer("Partition number.", 0),
            "records": {"type": "array", "items": _ref("ReadRecord")},
            "next_offset": _integer("The offset to read next.", 0),
            "high_watermark": _integer("The partition's high watermark when read."),
            "log_start_offset": _integer("The partition's log start offset when read."),
        }
    ),
}

_STATUS_TEXT: Final = {
    400: "Invalid request: malformed JSON, wrong type, unknown or missing field, bad parameter "
    "(INVALID_REQUEST, INVALID_TOPIC_EXCEPTION, INVALID_REQUIRED_ACKS, INVALID_TIMESTAMP, INVALID_RECORD).",
    401: "Missing or wrong Authorization: Bearer <internal.auth.secret> (SASL_AUTHENTICATION_FAILED).",
    404: "Unknown topic or partition (UNKNOWN_TOPIC_OR_PARTITION).",
    408: "The body did not arrive in full within the broker's request.body.timeout.ms; nothing was "
    "written and the connection is closed (REQUEST_TIMED_OUT).",
    413: "Body above socket.request.max.bytes (MESSAGE_TOO_LARGE), too many records in one request or "
    "a batch above max.message.bytes (RECORD_LIST_TOO_LARGE, MESSAGE_TOO_LARGE).",
    415: "The body is not application/json (INVALID_REQUEST).",
    416: "The offset is outside the log (OFFSET_OUT_OF_RANGE).",
    422: "With format=string, a record's key, value or header is not UTF-8; read it with format=binary "
    "(INVALID_RECORD). format=json never answers 422: it marks such fields and shows them in base64.",
    500: "The server failed (UNKNOWN_SERVER_ERROR).",
    502: "A peer broker failed an internal request (UNKNOWN_SERVER_ERROR).",
    503: "Retriable: no leader, the leader moved, too few in-sync replicas, a timeout, the broker is "
    "starting or shutting down (LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, "
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT, NETWORK_EXCEPTION, BROKER_NOT_AVAILABLE, ...).",
}


def _response(description: str, schema: Schema) -> Schema:
    return {"description": description, "content": {_JSON: {"schema": schema}}}


def _errors(*statuses: int) -> dict[str, Schema]:
    return {str(status): {"$ref": f"#/components/responses/Error{status}"} for status in statuses}


def _produce_errors(*statuses: int) -> dict[str, Schema]:
    """A produce error is a plain Error (nothing was sent) or a ProduceFailure (outcomes per record)."""
    schema = {"oneOf": [_ref("Error"), _ref("ProduceFailure")]}
    return {str(status): _response(_STATUS_TEXT[status], schema) for status in statuses}


_COMMON_ERRORS: Final = (401, 500, 502, 503)

_TOPIC: Final = {
    "name": "topic",
    "in": "path",
    "required": True,
    "description": "Topic name.",
    "schema": {"type": "string", "pattern": "^[a-zA-Z0-9._-]{1,249}$"},
}
_PARTITION: Final = {
    "name": "partition",
    "in": "path",
    "required": True,
    "description": "Partition number.",
    "schema": {"type": "integer", "minimum": 0, "maximum": _INT32_MAX},
}


def _query(name: str, description: str, schema: Schema, *, required: bool = False) -> Schema:
    return {"name": name, "in": "query", "required": required, "description": description, "schema": schema}


_READ_PARAMETERS: Final = [
    _query("offset", "The first offset to read.", {"type": "integer", "minimum": 0}, required=True),
    _query(
        "max_records",
        "At most this many records.",
        {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_READ_MAX_RECORDS,
            "default": DEFAULT_READ_MAX_RECORDS,
        },
    ),
    _query(
        "max_bytes",
        "Fetch at most about this many bytes of record batches (at least one batch is returned).",
        {"type": "integer", "minimum": 1, "maximum": MAX_READ_MAX_BYTES, "default": DEFAULT_READ_MAX_BYTES},
    ),
    _query(
        "timeout_ms",
        "Wait up to this long for records when there are none yet at the offset (long poll).",
        {"type": "integer", "minimum": 0, "maximum": MAX_READ_TIMEOUT_MS, "default": 0},
    ),
    _query(
        "format",
        "How keys and values are shown: JSON values, UTF-8 strings, or base64. With json (the "
        "default) a key or value that is not JSON comes as base64, its record marked with "
        'key_format/value_format "binary" (a header value that is not UTF-8: value_format on the '
        "header).",
        {"enum": ["json", "string", "binary"], "default": "json"},
    ),
]


def _produce_operation(summary: str, description: str, operation_id: str) -> Schema:
    return {
        "summary": summary,
        "description": description,
        "operationId": operation_id,
        "requestBody": {"required": True, "content": {_JSON: {"schema": _ref("ProduceRequest")}}},
        "responses": {
            "200": _response("Every record was written.", _ref("ProduceResult")),
            **_errors(401),
            **_produce_errors(400, 404, 408, 413, 415, 500, 502, 503),
        },
    }


_STATE_CHANGES_PARAMETERS: Final = [
    _query(
        "since", "Answer the events after this sequence.", {"type": "integer", "minimum": 0, "default": 0}
    ),
    _query(
        "incarnation",
        "The incarnation `since` belongs to; another one (the process restarted) answers from the start.",
        {"type": "integer", "minimum": 0},
    ),
    _query(
        "limit",
        "At most this many events.",
        {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_STATE_CHANGES_LIMIT,
            "default": DEFAULT_STATE_CHANGES_LIMIT,
        },
    ),
]


def openapi_document() -> dict[str, Any]:
    """A fresh copy of the document (callers may keep or change it)."""
    return copy.deepcopy(_document())


def _document() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "actorlog JSON API",
            "version": API_VERSION,
            "description": "Produce JSON records, read records by offset, and read cluster and topic "
            "metadata, on any broker. Records are forwarded to each partition's leader. Errors carry "
            "Kafka's error codes and names. The same listener also serves /metrics, /healthz, "
            "/readyz and the internal actor endpoints, which are not part of this API. Before any route, "
            "the listener answers a request line above 8192 bytes 414, a header field above 8190 bytes "
            "or more than 128 headers 431, and any other malformed request 400, with the Error shape.",
        },
        "security": [{"bearerAuth": []}],
        "paths": {
            "/openapi.json": {
                "get": {
                    "summary": "This document",
                    "operationId": "getOpenApi",
                    "security": [],
                    "responses": {"200": _response("The OpenAPI document.", {"type": "object"})},
                }
            },
            "/v1/cluster": {
                "get": {
                    "summary": "Cluster id, active controller and live brokers",
                    "operationId": "getCluster",
                    "responses": {
                        "200": _response("The cluster.", _ref("Cluster")),
                        **_errors(400, *_COMMON_ERRORS),
                    },
                }
            },
            "/v1/cluster/health": {
                "get": {
                    "summary": "Partitions under-replicated, under min ISR, offline or breaking the rack "
                    "constraint; with broker, whether it may restart now",
                    "description": "From this broker's metadata cache and the topics' "
                    "min.insync.replicas. A broker may restart only if every partition whose ISR holds it "
                    "keeps at least min.insync.replicas in-sync replicas without it (docs/operations.md "
                    "§8.2). Always 200: the body says healthy or not.",
                    "operationId": "getClusterHealth",
                    "parameters": [
                        _query(
                            "broker",
                            "A broker id: also answer whether this broker may restart now.",
                            {"type": "integer", "minimum": 0, "maximum": _INT32_MAX},
                        )
                    ],
                    "responses": {
                        "200": _response("The cluster's health.", _ref("ClusterHealth")),
                        **_errors(400, *_COMMON_ERRORS),
                    },
                }
            },
            "/v1/state-changes": {
                "get": {
                    "summary": "This broker's ISR state-change events after a sequence",
                    "description": "ISR shrinks and expands this broker made, the ISR change "
                    "notifications it wrote and, on the controller, the partition states it wrote or "
                    "learned; kept in a bounded ring (docs/operations.md §5).",
                    "operationId": "getStateChanges",
                    "parameters": _STATE_CHANGES_PARAMETERS,
                    "responses": {
                        "200": _response("The events.", _ref("StateChanges")),
                        **_errors(400, *_COMMON_ERRORS),
                    },
                }
            },
            "/v1/topics": {
                "get": {
                    "summary": "Topic names",
                    "operationId": "listTopics",
                    "responses": {
                        "200": _response("Every topic, sorted.", _ref("TopicList")),
                        **_errors(400, *_COMMON_ERRORS),
                    },
                }
            },
            "/v1/topics/{topic}": {
                "parameters": [_TOPIC],
                "get": {
                    "summary": "A topic's partitions: leader, leader epoch, replicas, ISR, offline replicas",
                    "operationId": "getTopic",
                    "responses": {
                        "200": _response("The topic.", _ref("Topic")),
                        **_errors(400, 404, *_COMMON_ERRORS),
                    },
                },
            },
            "/v1/topics/{topic}/records": {
                "parameters": [_TOPIC],
                "post": _produce_operation(
                    "Produce records to a topic",
                    "Each record goes to its explicit partition, else to murmur2(key) % partitions, else "
                    "(no key) to one partition per request, rotating over the partitions with a leader.",
                    "produceToTopic",
                ),
            },
            "/v1/topics/{topic}/partitions/{partition}/offsets": {
                "parameters": [_TOPIC, _PARTITION],
                "get": {
                    "summary": "A partition's log start offset and high watermark, from its leader",
                    "description": "With timestamp, also the first offset whose record has a "
                    "timestamp at or after it (Kafka's offsetsForTimes; docs/log.md §11).",
                    "operationId": "getPartitionOffsets",
                    "parameters": [
                        _query(
                            "timestamp",
                            "Milliseconds since the epoch: find the first record at or after it.",
                            {"type": "integer", "minimum": 0, "maximum": 2**63 - 1},
                        )
                    ],
                    "responses": {
                        "200": _response("The offsets.", _ref("Offsets")),
                        **_errors(400, 404, *_COMMON_ERRORS),
                    },
                },
            },
            "/v1/topics/{topic}/partitions/{partition}/records": {
                "parameters": [_TOPIC, _PARTITION],
                "post": _produce_operation(
                    "Produce records to one partition",
                    "Records may not name a partition: the path does.",
                    "produceToPartition",
                ),
                "get": {
                    "summary": "Read committed records (below the high watermark) from an offset",
                    "description": "A consumer fetch at the partition's current leader.",
                    "operationId": "readRecords",
                    "parameters": _READ_PARAMETERS,
                    "responses": {
                        "200": _response("Records from the offset (maybe none).", _ref("ReadResult")),
                        **_errors(400, 404, 416, 422, *_COMMON_ERRORS),
                    },
                },
            },
        },
        "components": {
            "securitySchemes": {
                "bearerAuth": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "The cluster's internal.auth.secret.",
                }
            },
            "schemas": _SCHEMAS,
            "responses": {
                f"Error{status}": _response(text, _ref("Error")) for status, text in _STATUS_TEXT.items()
            },
        },
    }
