"""Hostile input at the JSON API's HTTP edge (issue 23, item 6): numbers beyond 64 bits, bodies that
never finish arriving, oversized request lines and headers.

Integers are checked over real HTTP in front of the in-process cluster of
``tests/ops/test_json_api.py`` (whose harness checks every answer against the OpenAPI document); a
rejected request must have written nothing. The connection-level cases talk to an ``HttpServer``
through a raw asyncio socket on loopback, since an HTTP client would not send them.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.ops.test_json_api import ORDERS, Api, api

__all__ = ["api"]  # the fixture, imported so that this module's tests can ask for it

pytestmark = pytest.mark.asyncio

BEYOND_64_BITS = 2**70
INT64_MAX = 2**63 - 1
UINT64_MAX = 2**64 - 1


def _literal(document: str, **numbers: int) -> bytes:
    """A JSON body with exact integer literals (``orjson.dumps`` cannot write one beyond 64 bits)."""
    return document.format(**numbers).encode()


async def _post(api: Api, body: bytes, path: str = f"/v1/topics/{ORDERS}/records") -> Any:
    return await api.call("POST", path, data=body, headers={"Content-Type": "application/json"})


# (body, the field the message must name, what it must say about the range)
OUT_OF_RANGE: list[tuple[bytes, str, str]] = [
    (_literal('{{"records": [{{"value": {n}}}]}}', n=BEYOND_64_BITS), "body.records[0].value", "64-bit"),
    (
        _literal('{{"records": [{{"value": {{"a": [1, {n}]}}}}]}}', n=-BEYOND_64_BITS),
        "body.records[0].value",
        "64-bit",
    ),
    (
        _literal('{{"records": [{{"key": {n}, "value": 1}}]}}', n=UINT64_MAX + 1),
        "body.records[0].key",
        "64-bit",
    ),
    (
        _literal('{{"records": [{{"value": 1}}, {{"value": 2, "timestamp": {n}}}]}}', n=BEYOND_64_BITS),
        "body.records[1].timestamp",
        f"[0, {INT64_MAX}]",
    ),
    (
        _literal('{{"records": [{{"value": 1, "timestamp": {n}}}]}}', n=INT64_MAX + 1),
        "body.records[0].timestamp",
        f"[0, {INT64_MAX}]",
    ),
    (
        _literal('{{"records": [{{"value": 1, "partition": {n}}}]}}', n=BEYOND_64_BITS),
        "body.records[0].partition",
        "[0, 2147483647]",
    ),
    (
        _literal('{{"records": [{{"value": 1, "partition": {n}}}]}}', n=2**31),
        "body.records[0].partition",
        "[0, 2147483647]",
    ),
    (
        _literal('{{"records": [{{"value": 1}}], "timeout_ms": {n}}}', n=BEYOND_64_BITS),
        "body.timeout_ms",
        "[0, ",
    ),
]


async def test_integers_outside_a_fields_range_are_400_naming_the_field_and_write_nothing(api: Api) -> None:
    failures: list[str] = []
    for body, field, rule in OUT_OF_RANGE:
        answer = await _post(api, body)
        if (answer.status, answer.body.get("error")) != (400, "INVALID_REQUEST"):
            failures.append(f"{body!r}: expected 400 INVALID_REQUEST, got {answer.status} {answer.body}")
        elif field not in answer.body["message"] or rule not in answer.body["message"]:
            failures.append(f"{body!r}: the message does not name {field} and {rule!r}: {answer.body}")
    assert not failures, "\n".join(failures)
    for partition in range(3):
        offsets = await api.call("GET", f"/v1/topics/{ORDERS}/partitions/{partition}/offsets")
        assert offsets.body["high_watermark"] == 0


async def test_values_that_json_carries_exactly_are_stored_exactly(api: Api) -> None:
    # At the edges of what a 64-bit JSON number holds, a float literal, and digits in strings.
    body = _literal(
        '{{"records": [{{"key": {low}, "value": {high}}}, {{"value": 1.5e21}}, {{"value": "{digits}"}},'
        ' {{"value": 7, "timestamp": {ts}}}], "acks": "1"}}',
        low=-(2**63),
        high=UINT64_MAX,
        digits=BEYOND_64_BITS,
        ts=INT64_MAX,
    )
    answer = await _post(api, body, f"/v1/topics/{ORDERS}/partitions/0/records")
    assert answer.status == 200, answer.body
    read = await api.read(ORDERS, 0, 0)
    shown = [(r["key"], r["value"]) for r in read.body["records"]]
    assert shown == [(-(2**63), UINT64_MAX), (None, 1.5e21), (None, str(BEYOND_64_BITS)), (None, 7)]
    assert read.body["records"][3]["timestamp"] == INT64_MAX


async def test_a_value_nested_deeper_than_json_encoding_allows_is_400_not_500(api: Api) -> None:
    deep = b'{"records": [{"value": ' + b"[" * 300 + b"]" * 300 + b"}]}"
    answer = await _post(api, deep)
    assert (answer.status, answer.error) == (400, "INVALID_REQUEST")
    assert "body.records[0].value" in answer.body["message"]
