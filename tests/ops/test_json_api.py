"""The JSON API over real HTTP on loopback, in front of an in-process three-broker cluster.

The API is served by broker 1's node (as ``ops/broker_main.py`` serves it) through the runtime's
``HttpServer``; the brokers run the real controller on virtual time over the simulated network.
Every answer in this module is checked against the OpenAPI document: a test middleware tags each
response with the route that served it, and ``Api.call`` validates the body against the documented
schema for that route, method and status (an undocumented status fails). Waits are replies and
``cluster.complete`` (virtual time), and the arrival of a request at the server (an event).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import jsonschema
import orjson
import pytest
import pytest_asyncio
from aiohttp import web
from openapi_spec_validator import validate as validate_openapi
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from actors.clients.producer.partitioner import keyed_partition
from actors.common.errors import ErrorCode
from actors.common.names import broker_node
from actors.common.protocol import FetchRequest, UpdateMetadataRequest
from actors.common.types import TopicPartition
from actors.server.replica.partition_state import Role
from ops.json_api.routes import JsonApi, json_api_routes
from ops.json_api.schema import openapi_document
from ops.wiring import BrokerNode
from runtime.codec import WireEnvelope
from runtime.transport.http import HttpServer
from runtime.transport.sim import LinkFilter
from tests.support.cluster import InProcessCluster, batch

pytestmark = pytest.mark.asyncio

SECRET = "json-api-test-secret"
AUTH = {"Authorization": f"Bearer {SECRET}"}
BODY_LIMIT = 64 * 1024
RECORD_CAP = 200
ROUTE_HEADER = "X-Test-Route"
ORDERS = "orders"  # 3 partitions, leaders 1, 2, 3, ISR of 3
ORDERS_REPLICAS = {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)}  # the controller elects the first
THIN = "thin"  # 1 partition led by broker 1 whose ISR is only the leader


# ------------------------------------------------------------------------------ the document


_DOCUMENT_URI = "urn:actorlog:openapi"
_OPERATIONS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")


class DocumentedResponses:
    """Validates answers against the OpenAPI document's response schemas (JSON Schema 2020-12)."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        resource = Resource.from_contents(document, default_specification=DRAFT202012)
        self._registry: Registry[Any] = Registry().with_resource(_DOCUMENT_URI, resource)

    def check(self, template: str, method: str, status: int, body: Any) -> None:
        operation = self.document["paths"][template][method.lower()]
        responses = operation["responses"]
        assert str(status) in responses, f"{method} {template} answered {status}: undocumented ({body})"
        response = responses[str(status)]
        if "$ref" in response:
            pointer = response["$ref"].removeprefix("#")
        else:
            escaped = template.replace("~", "~0").replace("/", "~1")
            pointer = f"/paths/{escaped}/{method.lower()}/responses/{status}"
        schema = {"$ref": f"{_DOCUMENT_URI}#{pointer}/content/application~1json/schema"}
        validator = jsonschema.Draft202012Validator(schema, registry=self._registry)
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(body)]
        assert not errors, f"{method} {template} {status} does not match the document: {errors}\n{body}"


DOCUMENTED = DocumentedResponses(openapi_document())


def documented_operations(document: dict[str, Any]) -> set[tuple[str, str]]:
    return {
        (path, method.upper())
        for path, item in document["paths"].items()
        for method in item
        if method in _OPERATIONS
    }


# ------------------------------------------------------------------------------------ harness


@dataclass
class Answer:
    status: int
    body: Any
    headers: Any

    @property
    def error(self) -> str:
        name: str = self.body["error"]
        return name


class Arrivals:
    """The paths of the requests the server received (an event per arrival, for tests that must
    know a request is being served before they move virtual time)."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self._changed = asyncio.Event()

    def note(self, path: str) -> None:
        self.paths.append(path)
        self._changed.set()

    async def received(self, path: str) -> None:
        while path not in self.paths:
            self._changed.clear()
            await self._changed.wait()


@dataclass
class Api:
    cluster: InProcessCluster
    session: aiohttp.ClientSession
    url: str
    arrivals: Arrivals
    json_api: JsonApi

    async def call(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        data: bytes | None = None,
        headers: dict[str, str] | None = None,
        auth: bool = True,
    ) -> Answer:
        sent = {**(AUTH if auth else {}), **(headers or {})}
        if json is not None:
            data = orjson.dumps(json)
            sent.setdefault("Content-Type", "application/json")
        async with self.session.request(method, self.url + path, data=data, headers=sent) as response:
            body = orjson.loads(await response.read())
            answer = Answer(response.status, body, response.headers)
        assert response.content_type == "application/json"
        template = answer.headers.get(ROUTE_HEADER)
        if template is not None:
            DOCUMENTED.check(template, method, answer.status, body)
        if answer.status >= 400:
            assert set(body) >= {"error_code", "error", "message"}, body
            assert ErrorCode[body["error"]] == body["error_code"]
            assert "Traceback" not in body["message"]
        return answer

    async def produce(self, topic: str, records: list[dict[str, Any]], **fields: Any) -> Answer:
        return await self.call("POST", f"/v1/topics/{topic}/records", json={"records": records, **fields})

    async def read(self, topic: str, partition: int, offset: int, **query: Any) -> Answer:
        parameters = "".join(f"&{k}={v}" for k, v in query.items())
        return await self.call(
            "GET", f"/v1/topics/{topic}/partitions/{partition}/records?offset={offset}{parameters}"
        )

    async def eventually(self, call: Awaitable[Answer], *, within_ms: int = 60_000) -> Answer:
        """A call whose answer needs virtual time to pass (retries, long polls)."""
        return await self.cluster.complete(call, within_ms=within_ms)


def tag_route(arrivals: Arrivals) -> Any:
    @web.middleware
    async def tag(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> Any:
        arrivals.note(request.path)
        response = await handler(request)
        resource = request.match_info.route.resource
        if resource is not None:
            response.headers[ROUTE_HEADER] = resource.canonical
        return response

    return tag


@contextlib.asynccontextmanager
async def serving(json_api: JsonApi, cluster: InProcessCluster) -> AsyncIterator[Api]:
    arrivals = Arrivals()
    server = HttpServer(
        "127.0.0.1", 0, routes=json_api.routes(), max_body_bytes=BODY_LIMIT, middlewares=[tag_route(arrivals)]
    )
    await server.start()
    try:
        async with aiohttp.ClientSession() as session:
            yield Api(cluster, session, server.url, arrivals, json_api)
    finally:
        await server.stop()
        # Its acks=all producer runs on broker 1's node: closed while the cluster runs (virtual
        # time moves while it finishes what it still holds).
        await cluster.complete(json_api.close())


def broker_1(cluster: InProcessCluster) -> Callable[[], BrokerNode | None]:
    return lambda: cluster.brokers[1].node


@pytest_asyncio.fixture
async def api() -> AsyncIterator[Api]:
    async with InProcessCluster() as cluster:
        # Broker 2 first: it is the controller, so what it tells broker 1 (which serves the API)
        # crosses the network, where a test can hold it up.
        await cluster.start_brokers(2, 1, 3)
        await cluster.create_topic(ORDERS, ORDERS_REPLICAS)
        # One replica, min.insync.replicas=2: acks=all can never be satisfied.
        await cluster.create_topic(THIN, {0: (1,)})
        json_api = JsonApi(
            broker_1(cluster), secret=SECRET, max_body_bytes=BODY_LIMIT, max_records_per_request=RECORD_CAP
        )
        async with serving(json_api, cluster) as served:
            yield served


def by_partition(answer: Answer) -> dict[int, list[int]]:
    offsets: dict[int, list[int]] = {}
    for record in answer.body["records"]:
        offsets.setdefault(record["partition"], []).append(record["offset"])
    return offsets


# ------------------------------------------------------------------------------ the document


async def test_the_document_is_valid_openapi_and_names_exactly_the_served_routes(api: Api) -> None:
    document = openapi_document()
    validate_openapi(document)
    app = web.Application()
    app.add_routes(json_api_routes(lambda: None, secret=SECRET, max_body_bytes=BODY_LIMIT))
    served = {(route.resource.canonical, route.method) for route in app.router.routes() if route.resource}
    assert served == documented_operations(document)
    for path, method in served:
        operation = document["paths"][path][method.lower()]
        if path.startswith("/v1/"):
            assert "401" in operation["responses"]
            assert operation.get("security", document["security"]) == [{"bearerAuth": []}]
        else:
            assert operation["security"] == []
    answer = await api.call("GET", "/openapi.json", auth=False)
    assert (answer.status, answer.body) == (200, document)


async def test_answers_are_checked_against_the_document(api: Api) -> None:
    """The checks every call in this module goes through are not vacuous."""
    answer = await api.call("GET", "/v1/cluster")
    assert answer.headers[ROUTE_HEADER] == "/v1/cluster"
    with pytest.raises(AssertionError, match="does not match the document"):
        DOCUMENTED.check("/v1/cluster", "GET", 200, {**answer.body, "extra": 1})
    with pytest.raises(AssertionError, match="does not match the document"):
        DOCUMENTED.check("/v1/topics/{topic}", "GET", 404, {"error": "UNKNOWN_TOPIC_OR_PARTITION"})
    with pytest.raises(AssertionError, match="undocumented"):
        DOCUMENTED.check("/v1/cluster", "GET", 416, answer.body)


# --------------------------------------------------------------------------- produce and read


async def test_produced_records_read_back_with_keys_values_headers_and_timestamps(api: Api) -> None:
    records: list[dict[str, Any]] = [
        {"key": {"user": 1}, "value": {"amount": 12.5, "items": ["a", "b"]}, "headers": {"trace": "t-1"}},
        {"key": None, "value": "plain", "partition": 2, "timestamp": 1_600_000_000_000},
        {"key": "k", "value": None, "partition": 2, "headers": [{"key": "h", "value": "1"}, {"key": "h"}]},
        {"value": [1, 2, 3], "partition": 0},
    ]
    produced = await api.produce(ORDERS, records)
    assert produced.status == 200
    assert produced.body["topic"] == ORDERS
    outcomes = produced.body["records"]
    assert [o["partition"] for o in outcomes] == [keyed_partition(b'{"user":1}', 3), 2, 2, 0]
    now = api.cluster.clock.wall_clock_ms()
    assert [o["timestamp"] for o in outcomes] == [now, 1_600_000_000_000, now, now]
    read: dict[int, list[dict[str, Any]]] = {}
    for partition in range(3):
        answer = await api.read(ORDERS, partition, 0)
        assert answer.status == 200
        assert answer.body["high_watermark"] == answer.body["next_offset"] == len(answer.body["records"])
        read[partition] = answer.body["records"]
    for sent, outcome in zip(records, outcomes, strict=True):
        (got,) = [r for r in read[outcome["partition"]] if r["offset"] == outcome["offset"]]
        assert (got["key"], got["value"], got["timestamp"]) == (
            sent.get("key"),
            sent["value"],
            outcome["timestamp"],
        )
    assert read[2][1]["headers"] == [{"key": "h", "value": "1"}, {"key": "h", "value": None}]


async def test_keyed_records_land_where_kafkas_partitioner_puts_them_in_order(api: Api) -> None:
    keys = [f"customer-{n % 9}" for n in range(60)]
    as_json = await api.produce(ORDERS, [{"key": k, "value": n} for n, k in enumerate(keys)])
    as_text = await api.produce(
        ORDERS,
        [{"key": k, "value": str(n)} for n, k in enumerate(keys)],
        key_format="string",
        value_format="string",
    )
    assert [r["partition"] for r in as_json.body["records"]] == [
        keyed_partition(orjson.dumps(k), 3) for k in keys
    ]
    assert [r["partition"] for r in as_text.body["records"]] == [keyed_partition(k.encode(), 3) for k in keys]
    for partition, offsets in by_partition(as_json).items():
        assert offsets == sorted(offsets)
        answer = await api.read(ORDERS, partition, offsets[0], max_records=len(offsets))
        expected = [n for n, k in enumerate(keys) if keyed_partition(orjson.dumps(k), 3) == partition]
        assert [r["value"] for r in answer.body["records"]] == expected


async def test_unkeyed_records_of_a_request_share_one_partition_and_requests_rotate(api: Api) -> None:
    first = await api.produce(ORDERS, [{"value": n} for n in range(4)])
    second = await api.produce(ORDERS, [{"value": n} for n in range(4)])
    assert [set(by_partition(a)) for a in (first, second)] == [{0}, {1}]
    assert by_partition(first) == {0: [0, 1, 2, 3]}


async def test_the_partition_endpoint_writes_every_record_to_its_partition(api: Api) -> None:
    answer = await api.call(
        "POST", f"/v1/topics/{ORDERS}/partitions/2/records", json={"records": [{"key": "a", "value": 1}] * 3}
    )
    assert (answer.status, by_partition(answer)) == (200, {2: [0, 1, 2]})


async def test_acks_one_and_zero(api: Api) -> None:
    one = await api.produce(ORDERS, [{"value": "one", "partition": 1}], acks="1")
    assert (one.status, one.body["records"][0]["offset"]) == (200, 0)
    zero = await api.produce(
        ORDERS, [{"value": "zero", "partition": 1}, {"value": "z", "partition": 0}], acks=0
    )
    assert zero.status == 200
    assert [r["offset"] for r in zero.body["records"]] == [-1, -1]
    await api.cluster.settle()  # acks=0 is a tell: nothing to wait for but its delivery
    assert [r["value"] for r in (await api.read(ORDERS, 1, 0)).body["records"]] == ["one", "zero"]
    assert [r["value"] for r in (await api.read(ORDERS, 0, 0)).body["records"]] == ["z"]


async def test_acks_all_below_min_insync_replicas_times_out_without_writing(api: Api) -> None:
    # The leader refuses the batch NOT_ENOUGH_REPLICAS, which is retriable: the broker's idempotent
    # producer retries it, as Kafka's does, past the request's deadline (timeout_ms + the broker's
    # request.timeout.ms), when the answer says the records may or may not have been written.
    refused = await api.eventually(api.produce(THIN, [{"value": 1}, {"value": 2}], timeout_ms=0))
    assert (refused.status, refused.error) == (503, "REQUEST_TIMED_OUT")
    assert refused.headers["Retry-After"] == "1"
    assert [r["error"] for r in refused.body["records"]] == ["REQUEST_TIMED_OUT"] * 2
    assert "may or may not have been written" in refused.body["records"][0]["message"]
    assert api.cluster.broker(1).statistics().request_errors_total[("Produce", "NOT_ENOUGH_REPLICAS")] > 1
    offsets = await api.call("GET", f"/v1/topics/{THIN}/partitions/0/offsets")
    assert offsets.body["high_watermark"] == 0  # refused before the append
    accepted = await api.produce(THIN, [{"value": 1}], acks="1")
    assert (accepted.status, accepted.body["records"][0]["offset"]) == (200, 0)


async def test_closing_fails_what_the_producer_holds_and_refuses_later_acks_all(api: Api) -> None:
    cluster = api.cluster
    # THIN's leader refuses acks=all (too few in-sync replicas): the record stays in the producer.
    waiting = asyncio.ensure_future(api.produce(THIN, [{"value": 1}]))
    await asyncio.wait_for(api.arrivals.received(f"/v1/topics/{THIN}/records"), timeout=30)
    await cluster.wait_for(
        lambda: (
            cluster.broker(1).statistics().request_errors_total.get(("Produce", "NOT_ENOUGH_REPLICAS"), 0) > 0
        ),
        step_ms=10,
    )
    await cluster.complete(api.json_api.close())
    closed = await asyncio.wait_for(waiting, timeout=30)
    assert (closed.status, closed.error, closed.body["records"][0]["error"]) == (
        503, "BROKER_NOT_AVAILABLE", "BROKER_NOT_AVAILABLE",
    )  # fmt: skip
    assert "may or may not have been written" in closed.body["records"][0]["message"]
    refused = await api.produce(ORDERS, [{"value": 1}])
    assert (refused.status, refused.error, refused.body["message"]) == (
        503, "BROKER_NOT_AVAILABLE", "the broker is shutting down",
    )  # fmt: skip
    assert (await api.produce(ORDERS, [{"value": 1}], acks="1")).status == 200


async def test_binary_and_string_formats_round_trip(api: Api) -> None:
    blob = bytes(range(256))
    encoded = base64.b64encode(blob).decode()
    answer = await api.produce(
        ORDERS,
        [{"key": encoded, "value": encoded, "partition": 0}],
        key_format="binary",
        value_format="binary",
    )
    assert answer.status == 200
    await api.produce(ORDERS, [{"value": "caf\u00e9", "partition": 0}], value_format="string")
    binary = await api.read(ORDERS, 0, 0, format="binary")
    assert [base64.b64decode(r["value"]) for r in binary.body["records"]] == [blob, "caf\u00e9".encode()]
    assert base64.b64decode(binary.body["records"][0]["key"]) == blob
    as_text = await api.read(ORDERS, 0, 1, format="string")
    assert as_text.body["records"][0]["value"] == "caf\u00e9"
    # format=json shows a record that is not JSON as base64, marked, instead of failing the read.
    not_json = await api.read(ORDERS, 0, 0, format="json")
    assert not_json.status == 200
    first = not_json.body["records"][0]
    assert (first["key_format"], first["value_format"]) == ("binary", "binary")
    assert base64.b64decode(first["value"]) == blob


async def test_reads_page_through_the_log_and_stop_at_the_high_watermark(api: Api) -> None:
    await api.produce(ORDERS, [{"value": n, "partition": 0} for n in range(5)])
    first = await api.read(ORDERS, 0, 0, max_records=2)
    assert ([r["offset"] for r in first.body["records"]], first.body["next_offset"]) == ([0, 1], 2)
    rest = await api.read(ORDERS, 0, first.body["next_offset"])
    assert [r["value"] for r in rest.body["records"]] == [2, 3, 4]
    at_end = await api.read(ORDERS, 0, 5)
    assert (at_end.body["records"], at_end.body["next_offset"], at_end.body["high_watermark"]) == ([], 5, 5)
    beyond = await api.read(ORDERS, 0, 6)
    assert (beyond.status, beyond.error) == (416, "OFFSET_OUT_OF_RANGE")
    offsets = await api.call("GET", f"/v1/topics/{ORDERS}/partitions/0/offsets")
    assert offsets.body == {"topic": ORDERS, "partition": 0, "log_start_offset": 0, "high_watermark": 5}


async def test_offsets_for_a_timestamp_name_the_first_record_at_or_after_it(api: Api) -> None:
    """docs/log.md §11: the first record in offset order whose timestamp reaches the one asked
    for (timestamps need not grow with offsets), with that record's timestamp and leader epoch."""
    base = 1_600_000_000_000
    sent = [{"value": n, "partition": 0, "timestamp": base + ts} for n, ts in enumerate((100, 50, 300, 200))]
    assert (await api.produce(ORDERS, sent)).status == 200
    epoch = (await api.call("GET", f"/v1/topics/{ORDERS}")).body["partitions"][0]["leader_epoch"]
    path = f"/v1/topics/{ORDERS}/partitions/0/offsets"

    async def for_timestamp(timestamp: int) -> Any:
        answer = await api.call("GET", f"{path}?timestamp={timestamp}")
        assert answer.status == 200
        assert {k: answer.body[k] for k in ("log_start_offset", "high_watermark")} == {
            "log_start_offset": 0,
            "high_watermark": 4,
        }
        return answer.body["offset_for_timestamp"]

    assert await for_timestamp(base + 60) == {"offset": 0, "timestamp": base + 100, "leader_epoch": epoch}
    assert await for_timestamp(base + 250) == {"offset": 2, "timestamp": base + 300, "leader_epoch": epoch}
    assert await for_timestamp(0) == {"offset": 0, "timestamp": base + 100, "leader_epoch": epoch}
    assert await for_timestamp(base + 301) is None
    assert "offset_for_timestamp" not in (await api.call("GET", path)).body


async def test_a_long_poll_waits_for_records_or_its_timeout(api: Api) -> None:
    empty = await api.eventually(api.read(ORDERS, 1, 0, timeout_ms=2_000))
    assert (empty.status, empty.body["records"]) == (200, [])
    waiting = asyncio.ensure_future(api.read(ORDERS, 1, 0, timeout_ms=30_000))
    await api.produce(ORDERS, [{"value": "late", "partition": 1}])
    answer = await asyncio.wait_for(waiting, timeout=30)
    assert [r["value"] for r in answer.body["records"]] == ["late"]


# ----------------------------------------------------------------------------------- metadata


async def test_cluster_topics_and_partitions(api: Api) -> None:
    cluster = await api.call("GET", "/v1/cluster")
    cluster_id = cluster.body.pop("cluster_id")
    assert isinstance(cluster_id, str)
    assert len(cluster_id) == 22  # /cluster/id, made by the first broker
    assert cluster.body == {
        "controller_id": api.cluster.controller_id(),
        "brokers": [
            {
                "broker_id": b,
                "host": f"broker-{b}",
                "port": 9092,
                "rack": None,
                "security_protocol": "PLAINTEXT",
            }
            for b in (1, 2, 3)
        ],
    }
    assert (await api.call("GET", "/v1/topics")).body == {"topics": [ORDERS, THIN]}
    topic = await api.call("GET", f"/v1/topics/{ORDERS}")
    assert topic.body["topic"] == ORDERS
    assert [
        (p["partition"], p["leader"], p["leader_epoch"], p["replicas"], p["isr"])
        for p in topic.body["partitions"]
    ] == [
        (0, 1, 0, [1, 2, 3], [1, 2, 3]),
        (1, 2, 0, [2, 3, 1], [2, 3, 1]),
        (2, 3, 0, [3, 1, 2], [3, 1, 2]),
    ]


async def test_state_changes_are_served_after_a_sequence(api: Api) -> None:
    """GET /v1/state-changes: this broker's events after ``since``, its incarnation, what the ring
    dropped; ``limit`` pages; another incarnation answers from the start; bad values are 400."""
    # Broker 1 (serving the API) leads orders-0; cut off from broker 3, it drops 3 from the ISR.
    tp = TopicPartition(ORDERS, 0)
    cut = api.cluster.cut(1, 3)
    produced = await api.cluster.produce(1, tp, batch(b"x"), acks=1)
    assert produced.partitions[0].error_code is ErrorCode.NONE
    await api.cluster.wait_for(lambda: 3 not in api.cluster.partition(1, tp).state.isr)
    api.cluster.heal(cut)
    everything = await api.call("GET", "/v1/state-changes")
    assert everything.status == 200
    body = everything.body
    served_by = body["broker"]
    assert body["dropped"] == 0
    events = body["events"]
    assert [(e["kind"], e["topic"], e["partition"], e["isr"]) for e in events] == [
        ("isr_shrink", ORDERS, 0, [1, 2])
    ]
    assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
    assert body["last_sequence"] == len(events)
    assert {e["broker"] for e in events} == {str(served_by)}
    assert events[0]["reason"] in ("lag", "fetch_stopped")
    limited = await api.call("GET", "/v1/state-changes?since=0&limit=1")
    assert limited.body["events"] == events
    after = await api.call("GET", f"/v1/state-changes?since=1&incarnation={body['incarnation']}")
    assert after.body["events"] == []
    assert after.body["last_sequence"] == 1
    restarted = await api.call("GET", f"/v1/state-changes?since=1&incarnation={body['incarnation'] + 1}")
    assert restarted.body["events"] == events
    for query in ("since=-1", "limit=0", "since=x", "offset=3"):
        refused = await api.call("GET", f"/v1/state-changes?{query}")
        assert refused.status == 400, query
        assert refused.error == "INVALID_REQUEST"


# ------------------------------------------------------------------------------ bad requests


def _valid_produce() -> dict[str, Any]:
    return {"records": [{"value": 1}]}


# (method, path, body (JSON value, or raw bytes), content type, status, Kafka error name)
MALFORMED: list[tuple[str, str, Any, str, int, str]] = [
    ("POST", "/v1/topics/orders/records", b"{oops", "application/json", 400, "INVALID_REQUEST"),
    ("POST", "/v1/topics/orders/records", [1], "application/json", 400, "INVALID_REQUEST"),
    (
        "POST",
        "/v1/topics/orders/records",
        {"records": [{"value": 1}], "extra": 1},
        "application/json",
        400,
        "INVALID_REQUEST",
    ),
    ("POST", "/v1/topics/orders/records", {"acks": "all"}, "application/json", 400, "INVALID_REQUEST"),
    (
        "POST",
        "/v1/topics/orders/records",
        {"records": [{"key": "k"}]},
        "application/json",
        400,
        "INVALID_REQUEST",
    ),
    (
        "POST",
        "/v1/topics/orders/records",
        {"records": [{"value": 1, "partition": "1"}]},
        "application/json",
        400,
        "INVALID_REQUEST",
    ),
    (
        "POST",
        "/v1/topics/orders/records",
        {"records": [{"value": 1}], "acks": "2"},
        "application/json",
        400,
        "INVALID_REQUIRED_ACKS",
    ),
    (
        "POST",
        "/v1/topics/orders/records",
        {"records": [{"value": "!"}], "value_format": "binary"},
        "application/json",
        400,
        "INVALID_REQUEST",
    ),
    (
        "POST",
        "/v1/topics/orders/records",
        b'{"records": [{"value": 1}]}',
        "text/plain",
        415,
        "INVALID_REQUEST",
    ),
    (
        "POST",
        "/v1/topics/orders/records?acks=1",
        _valid_produce(),
        "application/json",
        400,
        "INVALID_REQUEST",
    ),
    (
        "POST",
        "/v1/topics/orders/records",
        {"records": [{"value": 1, "partition": 7}]},
        "application/json",
        404,
        "UNKNOWN_TOPIC_OR_PARTITION",
    ),
    (
        "POST",
        "/v1/topics/missing/records",
        _valid_produce(),
        "application/json",
        404,
        "UNKNOWN_TOPIC_OR_PARTITION",
    ),
    (
        "POST",
        "/v1/topics/bad%20name/records",
        _valid_produce(),
        "application/json",
        400,
        "INVALID_TOPIC_EXCEPTION",
    ),
    (
        "POST",
        "/v1/topics/orders/partitions/x/records",
        _valid_produce(),
        "application/json",
        400,
        "INVALID_REQUEST",
    ),
    (
        "POST",
        "/v1/topics/orders/partitions/-1/records",
        _valid_produce(),
        "application/json",
        400,
        "INVALID_REQUEST",
    ),
    (
        "POST",
        "/v1/topics/orders/partitions/3/records",
        _valid_produce(),
        "application/json",
        404,
        "UNKNOWN_TOPIC_OR_PARTITION",
    ),
    (
        "POST",
        "/v1/topics/orders/partitions/0/records",
        {"records": [{"value": 1, "partition": 0}]},
        "application/json",
        400,
        "INVALID_REQUEST",
    ),
    (
        "POST",
        "/v1/topics/orders/records",
        {"records": [{"value": 1}] * (RECORD_CAP + 1)},
        "application/json",
        413,
        "RECORD_LIST_TOO_LARGE",
    ),
    ("GET", "/v1/topics/orders/partitions/0/records", None, "", 400, "INVALID_REQUEST"),
    ("GET", "/v1/topics/orders/partitions/0/records?offset=-1", None, "", 400, "INVALID_REQUEST"),
    ("GET", "/v1/topics/orders/partitions/0/records?offset=abc", None, "", 400, "INVALID_REQUEST"),
    ("GET", "/v1/topics/orders/partitions/0/records?offset=0&offset=1", None, "", 400, "INVALID_REQUEST"),
    ("GET", "/v1/topics/orders/partitions/0/records?offset=0&limit=1", None, "", 400, "INVALID_REQUEST"),
    (
        "GET",
        "/v1/topics/orders/partitions/0/records?offset=0&max_records=0",
        None,
        "",
        400,
        "INVALID_REQUEST",
    ),
    ("GET", "/v1/topics/orders/partitions/0/records?offset=0&format=xml", None, "", 400, "INVALID_REQUEST"),
    ("GET", "/v1/topics/orders/partitions/0/records?offset=99", None, "", 416, "OFFSET_OUT_OF_RANGE"),
    ("GET", "/v1/topics/orders/partitions/zero/records?offset=0", None, "", 400, "INVALID_REQUEST"),
    ("GET", "/v1/topics/orders/partitions/9/records?offset=0", None, "", 404, "UNKNOWN_TOPIC_OR_PARTITION"),
    ("GET", "/v1/topics/missing/partitions/0/records?offset=0", None, "", 404, "UNKNOWN_TOPIC_OR_PARTITION"),
    ("GET", "/v1/topics/orders/partitions/1.5/offsets", None, "", 400, "INVALID_REQUEST"),
    ("GET", "/v1/topics/orders/partitions/5/offsets", None, "", 404, "UNKNOWN_TOPIC_OR_PARTITION"),
    ("GET", "/v1/topics/orders/partitions/0/offsets?timestamp=-1", None, "", 400, "INVALID_REQUEST"),
    ("GET", "/v1/topics/orders/partitions/0/offsets?timestamp=now", None, "", 400, "INVALID_REQUEST"),
    (
        "GET",
        "/v1/topics/orders/partitions/0/offsets?timestamp=9223372036854775808",
        None,
        "",
        400,
        "INVALID_REQUEST",
    ),
    (
        "GET",
        "/v1/topics/orders/partitions/0/offsets?timestamp=1&timestamp=2",
        None,
        "",
        400,
        "INVALID_REQUEST",
    ),
    ("GET", "/v1/topics/orders/partitions/0/offsets?time=1", None, "", 400, "INVALID_REQUEST"),
    ("GET", "/v1/topics/missing", None, "", 404, "UNKNOWN_TOPIC_OR_PARTITION"),
    ("GET", "/v1/topics/a*b", None, "", 400, "INVALID_TOPIC_EXCEPTION"),
    ("GET", "/v1/topics/%C3%A9", None, "", 400, "INVALID_TOPIC_EXCEPTION"),
    ("GET", "/v1/cluster?verbose=1", None, "", 400, "INVALID_REQUEST"),
    ("GET", "/v1/nothing-here", None, "", 404, "INVALID_REQUEST"),
    ("DELETE", "/v1/topics/orders", None, "", 405, "INVALID_REQUEST"),
]


async def test_every_malformed_request_gets_its_status_and_kafka_error_name_and_writes_nothing(
    api: Api,
) -> None:
    failures: list[str] = []
    for method, path, body, content_type, status, error in MALFORMED:
        raw = body if isinstance(body, bytes) or body is None else orjson.dumps(body)
        headers = {"Content-Type": content_type} if content_type else {}
        answer = await api.call(method, path, data=raw, headers=headers)
        if (answer.status, answer.body.get("error")) != (status, error):
            failures.append(f"{method} {path}: expected {status} {error}, got {answer.status} {answer.body}")
    assert not failures, "\n".join(failures)
    for partition in range(3):
        offsets = await api.call("GET", f"/v1/topics/{ORDERS}/partitions/{partition}/offsets")
        assert offsets.body["high_watermark"] == 0


async def test_bodies_above_the_limit_are_413_with_or_without_a_content_length(api: Api) -> None:
    big = orjson.dumps({"records": [{"value": "x" * 1000}] * 100})
    assert len(big) > BODY_LIMIT
    sized = await api.call(
        "POST", f"/v1/topics/{ORDERS}/records", data=big, headers={"Content-Type": "application/json"}
    )
    assert (sized.status, sized.error) == (413, "MESSAGE_TOO_LARGE")

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(big), 8192):
            yield big[start : start + 8192]

    async with api.session.post(
        api.url + f"/v1/topics/{ORDERS}/records",
        data=chunks(),
        headers={**AUTH, "Content-Type": "application/json"},
    ) as response:
        chunked = orjson.loads(await response.read())
    assert (response.status, chunked["error"]) == (413, "MESSAGE_TOO_LARGE")
    assert (await api.read(ORDERS, 0, 0)).body["high_watermark"] == 0


async def test_every_v1_route_needs_the_secret_and_the_document_does_not(api: Api) -> None:
    concrete = {"{topic}": ORDERS, "{partition}": "0"}
    for path, method in sorted(documented_operations(openapi_document())):
        for value in path, *concrete:
            path = path.replace(value, concrete.get(value, value))
        if not path.startswith("/v1/"):
            continue
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": SECRET}):
            answer = await api.call(
                method,
                path + "?offset=0" if path.endswith("records") else path,
                json=_valid_produce() if method == "POST" else None,
                headers=headers,
                auth=False,
            )
            assert (answer.status, answer.error) == (401, "SASL_AUTHENTICATION_FAILED"), (
                method,
                path,
                headers,
            )
            assert answer.headers["WWW-Authenticate"].startswith("Basic")
    assert (await api.read(ORDERS, 0, 0)).body["high_watermark"] == 0


# --------------------------------------------------------------------------- leaders moving


async def test_without_a_leader_produce_and_read_are_leader_not_available(api: Api) -> None:
    cluster = api.cluster
    tp = TopicPartition("leaderless", 0)
    await cluster.create_topic(tp.topic, {0: (3,)})
    # Its only replica dies: once the session is gone the controller marks it offline (leader -1).
    await cluster.kill(3)
    await cluster.wait_for(lambda: getattr(cluster.broker(1).metadata.partition_state(tp), "leader", 0) == -1)
    described = await api.call("GET", f"/v1/topics/{tp.topic}")
    assert described.body["partitions"][0]["leader"] == -1
    unkeyed = await api.produce(tp.topic, [{"value": 1}])
    assert (unkeyed.status, unkeyed.error) == (503, "LEADER_NOT_AVAILABLE")
    explicit = await api.eventually(
        api.produce(tp.topic, [{"value": 1, "partition": 0}], acks="1", timeout_ms=0)
    )
    assert (explicit.status, explicit.body["records"][0]["error"]) == (503, "LEADER_NOT_AVAILABLE")
    # With acks=all the broker's producer waits for a leader, as Kafka's does, past the deadline.
    waited = await api.eventually(api.produce(tp.topic, [{"value": 1, "partition": 0}], timeout_ms=0))
    assert (waited.status, waited.body["records"][0]["error"]) == (503, "REQUEST_TIMED_OUT")
    assert "may or may not have been written" in waited.body["records"][0]["message"]
    read = await api.eventually(api.read(tp.topic, 0, 0))
    assert (read.status, read.error) == (503, "LEADER_NOT_AVAILABLE")


def update_metadata_to(broker_id: int) -> LinkFilter:
    """A link filter losing every UpdateMetadata sent to ``broker_id`` (the controller retries)."""

    def crosses(source: str, target: str, direction: str, envelope: WireEnvelope) -> bool:
        return not (target == broker_node(broker_id) and isinstance(envelope.message, UpdateMetadataRequest))

    return crosses


async def test_reads_and_writes_follow_the_leader_once_metadata_names_it(api: Api) -> None:
    cluster = api.cluster
    tp = TopicPartition("moving", 0)
    await cluster.create_topic(tp.topic, {0: (3, 2)})  # led by broker 3; broker 1 is no replica
    # (broker 2 starts fetching the new partition with its next fetch from broker 3: time passes)
    await api.eventually(api.produce(tp.topic, [{"value": n, "partition": 0} for n in range(3)]))
    # Leadership moves, but broker 1 (which serves the API) does not hear of it in its metadata:
    # broker 3's session expires, the controller elects broker 2 (epoch 1) and broker 3, back
    # at once, follows it. The read goes to broker 3 with the old epoch, is fenced, and retries
    # until metadata catches up.
    held = cluster.block(update_metadata_to(1))
    cluster.expire_session(3)

    def moved() -> bool:
        followers = [cluster.partition_actor(b, tp) for b in (2, 3)]
        return all(f is not None and f.state.leader_epoch == 1 for f in followers)

    await cluster.wait_for(moved)
    assert (cluster.zk_partition_state(tp)[0].leader, cluster.partition(2, tp).state.role) == (2, Role.LEADER)
    stale = cluster.broker(1).metadata.partition_state(tp)
    assert stale is not None
    assert (stale.leader, stale.leader_epoch) == (3, 0)
    reading = asyncio.ensure_future(api.read(tp.topic, 0, 0))
    await asyncio.wait_for(api.arrivals.received(f"/v1/topics/{tp.topic}/partitions/0/records"), timeout=30)
    await cluster.advance(1_000)
    assert not reading.done()
    # The read went to broker 3 with the old epoch, and was fenced there.
    assert cluster.broker(3).statistics().request_errors_total[("FetchConsumer", "FENCED_LEADER_EPOCH")] >= 1
    cluster.heal(held)
    answer = await cluster.complete(reading, within_ms=5_000)
    assert [r["value"] for r in answer.body["records"]] == [0, 1, 2]
    # The broker's producer still names broker 3: answered NOT_LEADER_OR_FOLLOWER, it refreshes
    # its metadata and sends the batch to broker 2 after its retry back-off (virtual time).
    produced = await api.eventually(api.produce(tp.topic, [{"value": 3, "partition": 0}]))
    assert produced.body["records"][0]["offset"] == 3
    assert cluster.log(2, tp).log_end_offset == 4


def replica_fetches(source: int, target: int) -> LinkFilter:
    """A link filter losing every FetchRequest follower ``source`` sends to leader ``target``."""

    def crosses(source_node: str, target_node: str, direction: str, envelope: WireEnvelope) -> bool:
        return not (
            (source_node, target_node) == (broker_node(source), broker_node(target))
            and isinstance(envelope.message, FetchRequest)
        )

    return crosses


async def test_a_retry_after_not_leader_or_follower_is_deduplicated_by_the_new_leader(api: Api) -> None:
    """Issue 14 item 13. A leader answers a parked acks=all produce NOT_LEADER_OR_FOLLOWER when it
    loses leadership, after the batch was appended; the follower that fetched it keeps it as the
    new leader. The JSON API's retry of that answer must not append the record a second time."""
    cluster = api.cluster
    tp = TopicPartition("retried", 0)
    await cluster.create_topic(tp.topic, {0: (3, 2, 1)})  # led by broker 3, ISR of 3
    await cluster.wait_for_isr(tp, (3, 2, 1))
    # Broker 1 stops fetching from broker 3: the high watermark cannot pass what broker 1 has, so
    # an acks=all produce stays parked at broker 3 (for less than replica.lag.time.max.ms).
    held = cluster.block(replica_fetches(1, 3))
    path = f"/v1/topics/{tp.topic}/records"
    producing = asyncio.ensure_future(api.produce(tp.topic, [{"value": "once", "partition": 0}]))
    await asyncio.wait_for(api.arrivals.received(path), timeout=30)
    await cluster.wait_for(
        lambda: cluster.log(3, tp).log_end_offset == 1 and cluster.log(2, tp).log_end_offset == 1,
        within_ms=2_000,
        step_ms=10,
    )
    assert (cluster.log(3, tp).high_watermark, producing.done()) == (0, False)
    # Leadership moves to broker 2, which has the record: broker 3's session expires, the
    # controller elects broker 2 and broker 3, back at once, follows it, answering the parked
    # produce NOT_LEADER_OR_FOLLOWER.
    cluster.expire_session(3)
    answer = await cluster.complete(producing, within_ms=30_000, step_ms=10)
    cluster.heal(held)
    assert cluster.zk_partition_state(tp)[0].leader == 2
    assert cluster.broker(3).statistics().request_errors_total[("Produce", "NOT_LEADER_OR_FOLLOWER")] >= 1
    assert answer.status == 200, answer.body
    read = await api.read(tp.topic, 0, 0)
    written = [(r["offset"], r["value"]) for r in read.body["records"]]
    assert written == [(0, "once")], f"the record is in the log {len(written)} times: {written}"
    assert answer.body["records"][0]["offset"] == 0
    assert cluster.log(2, tp).log_end_offset == 1


# ------------------------------------------------------------------------- server conditions


async def test_a_starting_broker_answers_503_and_a_failing_one_500_without_a_traceback() -> None:
    async with InProcessCluster() as cluster:
        starting = JsonApi(lambda: None, secret=SECRET, max_body_bytes=BODY_LIMIT)
        async with serving(starting, cluster) as api:
            answer = await api.call("GET", "/v1/topics")
            assert (answer.status, answer.error) == (503, "BROKER_NOT_AVAILABLE")

        def broken() -> BrokerNode | None:
            raise RuntimeError("wiring bug")

        failing = JsonApi(broken, secret=SECRET, max_body_bytes=BODY_LIMIT)
        async with serving(failing, cluster) as api:
            answer = await api.call("GET", "/v1/cluster")
            assert (answer.status, answer.error) == (500, "UNKNOWN_SERVER_ERROR")
            assert answer.body["message"] == "internal error: RuntimeError"


# ---------------------------------------------------------------------------- cluster health


async def test_cluster_health_lists_problems_and_answers_restarts(api: Api) -> None:
    """GET /v1/cluster/health: from broker 1's metadata cache and the topics' min ISR (2 here)."""
    health = await api.call("GET", "/v1/cluster/health")
    assert health.status == 200
    body = health.body
    assert (body["healthy"], body["brokers"], body["restart"]) == (False, [1, 2, 3], None)
    # thin-0 has one replica, in sync, below min.insync.replicas=2.
    assert [(p["topic"], p["partition"], p["isr"]) for p in body["under_min_isr_partitions"]] == [
        (THIN, 0, [1])
    ]
    assert body["under_replicated_partitions"] == body["offline_partitions"] == []
    assert body["rack_constraint_broken_partitions"] == []
    # Broker 3 is in the full ISRs of orders (3 of min 2) only: it may go. Broker 1 is thin-0's ISR.
    allowed = (await api.call("GET", "/v1/cluster/health?broker=3")).body["restart"]
    assert (allowed["allowed"], allowed["live"], allowed["hosted_partitions"]) == (True, True, 3)
    refused = (await api.call("GET", "/v1/cluster/health?broker=1")).body["restart"]
    assert refused["allowed"] is False
    assert [(p["topic"], p["partition"]) for p in refused["blocking_partitions"]] == [(THIN, 0)]

    # Broker 1 leads orders-0; cut off from broker 3 it shrinks the ISR to (1, 2): at min ISR.
    tp = TopicPartition(ORDERS, 0)
    cut = api.cluster.cut(1, 3)
    produced = await api.cluster.produce(1, tp, batch(b"x"), acks=1)
    assert produced.partitions[0].error_code is ErrorCode.NONE
    await api.cluster.wait_for(
        lambda: (m := api.cluster.broker(1).metadata.partition_state(tp)) is not None and 3 not in m.isr
    )
    api.cluster.heal(cut)
    body = (await api.call("GET", "/v1/cluster/health?broker=2")).body
    assert [(p["partition"], p["isr"], p["out_of_isr"]) for p in body["under_replicated_partitions"]] == [
        (0, [1, 2], [3])
    ]
    assert [(p["topic"], p["partition"]) for p in body["restart"]["blocking_partitions"]] == [(ORDERS, 0)]
    assert (await api.call("GET", "/v1/cluster/health?broker=3")).body["restart"]["allowed"] is True


async def test_cluster_health_refuses_bad_parameters(api: Api) -> None:
    for query in ("broker=x", "broker=-1", "broker=1&broker=2", "topic=orders"):
        answer = await api.call("GET", f"/v1/cluster/health?{query}")
        assert (answer.status, answer.error) == (400, "INVALID_REQUEST"), query
