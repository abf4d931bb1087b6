"""Reads with ``format=json`` (the default) of partitions that hold records not written as JSON: each
such key, value or header value comes back as base64 of its bytes with a ``*_format: "binary"``
marker, and the read answers 200, so one record from another writer (a console producer, a binary
API client) never blocks the partition. ``format=string`` stays strict.

The pure half is checked on ``read_body``; the served half over real HTTP in front of the in-process
cluster of ``tests/ops/test_json_api.py`` (whose harness checks every answer against the OpenAPI
document). The console producer's path, with real processes, is in
``tests/ops/test_cli_usability_processes.py``.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from actors.common.errors import ErrorCode
from ops.json_api.model import ApiError, Format, decode_fetched_records, read_body
from runtime.storage.record_builder import SimpleRecord, build_batch
from runtime.storage.records import RecordHeader
from tests.ops.test_json_api import DOCUMENTED, ORDERS, Api, api

__all__ = ["api"]  # the fixture, imported so that this module's tests can ask for it

FOREIGN_VALUE = b"plain text from kafka-console-producer"
NOT_UTF8 = b"\xff\xfe\x00raw"


def _records() -> list[Any]:
    data = build_batch(
        [
            SimpleRecord(b'{"n":1}', key=b'"k1"'),
            SimpleRecord(FOREIGN_VALUE, key=b"user-7"),
            SimpleRecord(b"[2]", key=None, headers=(RecordHeader("trace", NOT_UTF8),)),
            SimpleRecord(NOT_UTF8, key=b'"k3"', headers=(RecordHeader("h", b"text"),)),
            SimpleRecord(None, key=b'"gone"'),
        ],
        base_offset=10,
    )
    records, _ = decode_fetched_records(data, offset=10, max_records=10)
    return records


def _read(fmt: Format) -> dict[str, Any]:
    return read_body("t", 0, _records(), next_offset=15, high_watermark=15, log_start_offset=0, fmt=fmt)


def test_json_reads_mark_fields_that_are_not_json_and_keep_their_bytes() -> None:
    body = _read(Format.JSON)
    shown = {record["offset"]: record for record in body["records"]}
    assert list(shown) == [10, 11, 12, 13, 14]
    # JSON records look exactly as before: no markers.
    assert shown[10] == {"offset": 10, "timestamp": -1, "key": "k1", "value": {"n": 1}, "headers": []}
    assert shown[14] == {"offset": 14, "timestamp": -1, "key": "gone", "value": None, "headers": []}
    # A console-producer line: key and value both marked, their bytes recoverable.
    assert (shown[11]["key_format"], shown[11]["value_format"]) == ("binary", "binary")
    assert base64.b64decode(shown[11]["key"]) == b"user-7"
    assert base64.b64decode(shown[11]["value"]) == FOREIGN_VALUE
    # Only the field that is not JSON is marked.
    assert "key_format" not in shown[13]
    assert (shown[13]["key"], shown[13]["value_format"]) == ("k3", "binary")
    assert base64.b64decode(shown[13]["value"]) == NOT_UTF8
    assert shown[13]["headers"] == [{"key": "h", "value": "text"}]
    # A header value that is not UTF-8 is marked on the header.
    assert shown[12]["value"] == [2]
    assert "value_format" not in shown[12]
    (header,) = shown[12]["headers"]
    assert (header["key"], header["value_format"]) == ("trace", "binary")
    assert base64.b64decode(header["value"]) == NOT_UTF8


def test_marked_records_match_the_documented_read_schema() -> None:
    DOCUMENTED.check("/v1/topics/{topic}/partitions/{partition}/records", "GET", 200, _read(Format.JSON))


def test_string_reads_still_refuse_bytes_that_are_not_utf8() -> None:
    with pytest.raises(ApiError) as refused:
        _read(Format.STRING)
    assert (refused.value.status, refused.value.error) == (422, ErrorCode.INVALID_RECORD)
    assert "offset 12" in refused.value.message  # the header of offset 12 is the first non-UTF-8 field


def test_binary_reads_carry_no_markers() -> None:
    for record in _read(Format.BINARY)["records"]:
        assert not {"key_format", "value_format"} & set(record)
        assert all(set(header) == {"key", "value"} for header in record["headers"])


@pytest.mark.asyncio
async def test_a_foreign_record_does_not_block_a_json_read_of_its_partition(api: Api) -> None:
    """Written through the binary API between two JSON records: the default read answers 200 with
    all three (``Api.call`` validates the answer against the document)."""
    assert (await api.produce(ORDERS, [{"value": {"n": 1}, "partition": 0}])).status == 200
    foreign = base64.b64encode(FOREIGN_VALUE).decode()
    written = await api.produce(
        ORDERS,
        [{"key": foreign, "value": foreign, "partition": 0}],
        key_format="binary",
        value_format="binary",
    )
    assert written.status == 200
    assert (await api.produce(ORDERS, [{"value": {"n": 3}, "partition": 0}])).status == 200

    answer = await api.read(ORDERS, 0, 0)
    assert answer.status == 200, answer.body
    first, middle, last = answer.body["records"]
    assert (first["value"], last["value"]) == ({"n": 1}, {"n": 3})
    assert not {"key_format", "value_format"} & (set(first) | set(last))
    assert (middle["key_format"], middle["value_format"]) == ("binary", "binary")
    assert base64.b64decode(middle["value"]) == FOREIGN_VALUE
    assert base64.b64decode(middle["key"]) == FOREIGN_VALUE
    assert answer.body["next_offset"] == 3
