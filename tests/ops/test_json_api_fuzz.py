"""The JSON API fuzzed from its own OpenAPI document with schemathesis (issue 23's hostile-input suite).

The document is read from the served ``/openapi.json`` of the in-process cluster of
``tests/ops/test_json_api.py`` (real routes, real HTTP on loopback, brokers on virtual time).
For every documented operation schemathesis draws a bounded, derandomized set of requests, both
conforming (positive) and broken (negative: wrong types, missing or extra fields, bad parameters);
each is sent with the broker credential and its answer must be no 5xx, a 4xx in the project's JSON
error shape, and conform to the document (status, content type, response schema). Afterwards the
API still answers and no actor on any broker failed or restarted.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import Case
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.core.transport import Response
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from actors.common.errors import ErrorCode
from tests.ops.test_json_api import AUTH, Api, api

__all__ = ["api"]  # the fixture, imported so that this module's tests can ask for it

pytestmark = pytest.mark.asyncio

# FUZZ_EXAMPLES=200 for a bigger local campaign; the suite's run is 12 per operation and mode.
CASES_PER_OPERATION_AND_MODE = int(os.environ.get("FUZZ_EXAMPLES", "0")) or 12
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def draw_cases(operation: Any, mode: GenerationMode, count: int) -> list[Case[Any]]:
    """A deterministic list of up to ``count`` cases for one operation (hypothesis, derandomized)."""
    cases: list[Case[Any]] = []

    @given(operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=count,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def collect(case: Case[Any]) -> None:
        cases.append(case)

    try:
        collect()
    except Unsatisfiable:
        # Nothing to break: an operation with no parameters and no body has no negative cases.
        assert mode is GenerationMode.NEGATIVE, operation.label
    return cases


def operations(document: dict[str, Any]) -> Iterator[Any]:
    schema = schemathesis.openapi.from_dict(document)
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result
        yield result.ok()


def health(api: Api) -> dict[int, tuple[int, int]]:
    """Failures and restarts summed over every actor of every broker."""
    totals: dict[int, tuple[int, int]] = {}
    for broker_id, broker in api.cluster.brokers.items():
        node = broker.node
        assert node is not None, f"broker {broker_id} is down"
        cells = node.system.statistics().actors
        totals[broker_id] = (sum(c.failures_total for c in cells), sum(c.restarts_total for c in cells))
    return totals


def _params(params: Any) -> list[tuple[str, str]]:
    return [
        (key, item if isinstance(item, str) else json.dumps(item))
        for key, value in (params or {}).items()
        for item in (value if isinstance(value, list) else [value])
    ]


async def send(api: Api, case: Case[Any]) -> Response:
    """Send a case with aiohttp (the server shares this event loop) and wrap the answer for checks."""
    kwargs = case.as_transport_kwargs(base_url=api.url, headers=AUTH)
    if "json" in kwargs:
        body: bytes | None = json.dumps(kwargs["json"]).encode()
    else:
        data = kwargs.get("data")
        body = data.encode() if isinstance(data, str) else data
    headers = {key: str(value) for key, value in kwargs.get("headers", {}).items()}
    # aiohttp warns (an error here) when a body of 1 MiB or more is given as raw bytes: a stream it takes.
    payload: bytes | io.BytesIO | None = (
        io.BytesIO(body) if body is not None and len(body) >= 1 << 20 else body
    )
    async with api.session.request(
        kwargs["method"], kwargs["url"], params=_params(kwargs.get("params")), data=payload, headers=headers
    ) as answer:
        content = await answer.read()
        received: dict[str, list[str]] = {}
        for key, value in answer.headers.items():
            received.setdefault(key.lower(), []).append(value)
        status, reason = answer.status, answer.reason or ""
    prepared = requests.Request(kwargs["method"], kwargs["url"], headers=headers, data=body).prepare()
    return Response(status, received, content, prepared, elapsed=0.0, verify=False, message=reason)


def check_answer(case: Case[Any], response: Response) -> None:
    described = f"{case.method} {case.formatted_path} ({case.meta.generation.mode if case.meta else '?'})"
    assert response.status_code < 500, f"{described}: {response.status_code} {response.content!r}"
    if response.status_code >= 400:
        body = json.loads(response.content)
        assert isinstance(body, dict), f"{described}: {body!r}"
        assert isinstance(body.get("error_code"), int), f"{described}: {body!r}"
        assert isinstance(body.get("error"), str), f"{described}: {body!r}"
        assert isinstance(body.get("message"), str), f"{described}: {body!r}"
        assert ErrorCode[body["error"]] == body["error_code"], f"{described}: {body!r}"
    case.validate_response(response, checks=CHECKS)


async def test_every_operation_survives_schemathesis_cases(api: Api) -> None:
    async with api.session.get(api.url + "/openapi.json") as served:
        assert served.status == 200
        document = await served.json()
    before = health(api)
    sent: dict[str, int] = {}
    for operation in operations(document):
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            for case in draw_cases(operation, mode, CASES_PER_OPERATION_AND_MODE):
                response = await api.cluster.complete(send(api, case))
                check_answer(case, response)
                sent[operation.label] = sent.get(operation.label, 0) + 1
    # Every documented operation was exercised, most of them with both kinds of data.
    assert set(sent) == {
        f"{method.upper()} {path}"
        for path, item in document["paths"].items()
        for method in item
        if method in {"get", "put", "post", "delete", "patch", "head", "options", "trace"}
    }, sent
    assert sum(sent.values()) >= 10 * len(sent), sent
    assert health(api) == before
    assert (await api.call("GET", "/v1/cluster")).status == 200


async def test_the_checks_catch_a_server_error_and_a_wrong_error_shape(api: Api) -> None:
    """The checks above are not vacuous: a 5xx, or a 4xx without the JSON error shape, fails."""
    async with api.session.get(api.url + "/openapi.json") as served:
        document = await served.json()
    (operation,) = [op for op in operations(document) if op.label == "GET /v1/topics/{topic}"]
    (case,) = draw_cases(operation, GenerationMode.POSITIVE, 1)
    good = await api.cluster.complete(send(api, case))
    check_answer(case, good)
    for status, body in [
        (500, b'{"error_code": -1, "error": "UNKNOWN_SERVER_ERROR", "message": "x"}'),
        (404, b"{}"),
    ]:
        bad = Response(status, good.headers, body, good.request, elapsed=0.0, verify=False)
        with pytest.raises(AssertionError):
            check_answer(case, bad)
