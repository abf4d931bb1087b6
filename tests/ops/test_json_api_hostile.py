"""Hostile input at the JSON API's HTTP edge (issue 23, item 6): numbers beyond 64 bits, bodies that
never finish arriving, oversized request lines and headers.

Integers are checked over real HTTP in front of the in-process cluster of
``tests/ops/test_json_api.py`` (whose harness checks every answer against the OpenAPI document); a
rejected request must have written nothing. The connection-level cases talk to an ``HttpServer``
through a raw asyncio socket on loopback, since an HTTP client would not send them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp import web

from runtime.system import ActorSystem
from runtime.transport.http import TELL_PATH, HttpServer, HttpTransport
from tests.ops.test_json_api import AUTH, BODY_LIMIT, ORDERS, SECRET, Api, api
from tests.support.runtime_actors import make_codec

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


# ------------------------------------------------------------------------ the connection level

# Short, so that a test waits for it: the server's answer, not a sleep, ends each wait below.
BODY_TIMEOUT_MS = 100
# The most a test waits for the server to answer and close (far above BODY_TIMEOUT_MS).
BOUND_S = 5.0


@contextlib.asynccontextmanager
async def listening(routes: list[web.RouteDef]) -> AsyncIterator[HttpServer]:
    server = HttpServer(
        "127.0.0.1", 0, routes=routes, max_body_bytes=BODY_LIMIT, body_timeout_ms=BODY_TIMEOUT_MS
    )
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def exchange(server: HttpServer, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes, then read until the server closes the connection (within ``BOUND_S``):
    the status, headers and body of its answer."""
    assert server.port is not None
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(request)
        await writer.drain()
        async with asyncio.timeout(BOUND_S):
            answer = await reader.read()  # until EOF: the server must close the connection
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, body


def assert_json_error(headers: dict[str, str], body: bytes, error: str) -> dict[str, Any]:
    assert headers["content-type"].startswith("application/json"), (headers, body)
    document: dict[str, Any] = orjson.loads(body)
    assert set(document) == {"error_code", "error", "message"}, document
    assert document["error"] == error, document
    return document


def _short_body_request(path: str, content_type: str) -> bytes:
    """Headers announcing 100 bytes of body, then only 10 of them."""
    return (
        f"POST {path} HTTP/1.1\r\nHost: test\r\nAuthorization: {AUTH['Authorization']}\r\n"
        f"Content-Type: {content_type}\r\nContent-Length: 100\r\n\r\n"
    ).encode() + b"0123456789"


async def test_a_frame_body_shorter_than_its_content_length_is_408_and_the_connection_closed() -> None:
    transport = HttpTransport(
        make_codec(), secret=SECRET, resolve=lambda _node: None, max_body_bytes=BODY_LIMIT
    )
    async with ActorSystem("node", transport=transport), listening(transport.routes()) as server:
        status, headers, body = await exchange(
            server, _short_body_request(TELL_PATH, "application/octet-stream")
        )
    assert status == 408
    assert "100 ms" in assert_json_error(headers, body, "REQUEST_TIMED_OUT")["message"]


async def test_a_json_body_shorter_than_its_content_length_is_408_and_writes_nothing(api: Api) -> None:
    async with listening(api.json_api.routes()) as server:
        status, headers, body = await exchange(
            server, _short_body_request(f"/v1/topics/{ORDERS}/records", "application/json")
        )
    assert status == 408
    assert_json_error(headers, body, "REQUEST_TIMED_OUT")
    for partition in range(3):
        offsets = await api.call("GET", f"/v1/topics/{ORDERS}/partitions/{partition}/offsets")
        assert offsets.body["high_watermark"] == 0


async def _count(request: web.Request) -> web.Response:
    return web.json_response({"bytes": len(await request.read())})


async def test_a_body_that_arrives_in_time_is_served_and_the_connection_kept() -> None:
    async with listening([web.post("/count", _count)]) as server:
        assert server.port is not None
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            for _ in range(2):  # the same connection serves a second request
                writer.write(b"POST /count HTTP/1.1\r\nHost: test\r\nContent-Length: 3\r\n\r\nabc")
                async with asyncio.timeout(BOUND_S):
                    status_line = await reader.readline()
                    head = await reader.readuntil(b"\r\n\r\n")
                    length = next(
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    )
                    assert orjson.loads(await reader.readexactly(length)) == {"bytes": 3}
                assert status_line.startswith(b"HTTP/1.1 200")
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


# (request bytes, status, what the message must say)
OVERSIZED: list[tuple[bytes, int, str]] = [
    (b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\nHost: test\r\n\r\n", 414, "request line"),
    (b"GET /count HTTP/1.1\r\nHost: test\r\nX-Big: " + b"b" * 20_000 + b"\r\n\r\n", 431, "header"),
    (
        b"GET /count HTTP/1.1\r\nHost: test\r\n" + b"".join(b"X-%d: 1\r\n" % n for n in range(200)) + b"\r\n",
        431,
        "header",
    ),
    (b"GET /count HTTP/1.1\r\nHost: test\r\nBad Header: 1\r\n\r\n", 400, "malformed"),
]


async def test_oversized_or_malformed_request_heads_get_json_errors_and_no_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    failures: list[str] = []
    async with listening([web.get("/count", _count)]) as server:
        for request, expected, words in OVERSIZED:
            status, headers, body = await exchange(server, request)
            shown = f"{request[:40]!r}: {status} {headers.get('content-type')} {body[:200]!r}"
            if status != expected or not headers.get("content-type", "").startswith("application/json"):
                failures.append(f"expected a JSON {expected}, got {shown}")
                continue
            document = assert_json_error(headers, body, "INVALID_REQUEST")
            if words not in document["message"]:
                failures.append(f"the message does not say {words!r}: {shown}")
    assert not failures, "\n".join(failures)
    tracebacks = [
        r.getMessage() for r in caplog.records if r.exc_info is not None or r.levelno >= logging.ERROR
    ]
    assert not tracebacks, tracebacks
