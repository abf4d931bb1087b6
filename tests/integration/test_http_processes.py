"""The HTTP transport between real OS processes on loopback, and its shared-secret gate."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from runtime import ActorSystem
from runtime.codec import FRAME_CONTENT_TYPE, WireEnvelope
from runtime.ref import ActorRef
from runtime.transport.http import ASK_PATH, TELL_PATH, HttpTransport
from tests.support.runtime_actors import GetNotes, Note, Notes, Ping, Pong, make_codec

pytestmark = [pytest.mark.asyncio, pytest.mark.integration]

SECRET = "process-secret"
ROOT = Path(__file__).resolve().parents[2]


@contextlib.asynccontextmanager
async def node_process(*arguments: str) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.support.echo_node", *arguments,
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), timeout=30)).decode()
        assert line.startswith("LISTENING "), line
        yield process, line.split()[1]
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), timeout=10)
            except TimeoutError:
                process.kill()
                await process.wait()


async def test_two_processes_exchange_asks_over_http() -> None:
    async with (
        node_process("--node-id", "a", "--secret", SECRET) as (_, url_a),
        node_process("--node-id", "b", "--secret", SECRET, "--peer", f"a={url_a}", "--asks", "50") as (
            process_b,
            url_b,
        ),
    ):
        assert process_b.stdout is not None
        line = (await asyncio.wait_for(process_b.stdout.readline(), timeout=30)).decode()
        assert line.split() == ["ASKS", "50", "0"]
        # And the other direction, from this (third) process as a client-only node.
        addresses = {"a": url_a, "b": url_b}
        transport = HttpTransport(make_codec(), secret=SECRET, resolve=addresses.get)
        async with ActorSystem("client", transport=transport) as client:
            for node in ("a", "b"):
                reply = await client.ask(
                    ActorRef(node_id=node, name="echo"),
                    Ping(sequence=5, payload=b"x" * 1000),
                    timeout_ms=5000,
                )
                assert reply == Pong(sequence=5, payload=b"x" * 1000)


async def test_requests_without_the_right_secret_get_401_and_change_nothing() -> None:
    codec = make_codec()
    async with node_process("--node-id", "a", "--secret", SECRET) as (_, url):
        tell_body = codec.encode_envelopes([WireEnvelope("echo", Note(sender="intruder", sequence=1))])
        ask_body = codec.encode_envelopes([WireEnvelope("echo", Ping(sequence=1), None, 1000)])
        async with aiohttp.ClientSession() as session:
            for headers in (
                {"Content-Type": FRAME_CONTENT_TYPE},
                {"Content-Type": FRAME_CONTENT_TYPE, "Authorization": "Bearer wrong"},
                {"Content-Type": FRAME_CONTENT_TYPE, "Authorization": SECRET},
            ):
                for path, body in ((TELL_PATH, tell_body), (ASK_PATH, ask_body)):
                    async with session.post(url + path, data=body, headers=headers) as response:
                        assert response.status == 401
                        error = await response.json()
                        assert error["error_code"] == 58
                        assert "internal.auth.secret" in error["message"]
            # A malformed frame with the right secret is a 400 that names the problem.
            good = {"Content-Type": FRAME_CONTENT_TYPE, "Authorization": f"Bearer {SECRET}"}
            async with session.post(url + ASK_PATH, data=b"\x00\x00\x00\x05{oops", headers=good) as response:
                assert response.status == 400
                assert "malformed frame" in (await response.json())["message"]
        transport = HttpTransport(codec, secret=SECRET, resolve={"a": url}.get)
        async with ActorSystem("client", transport=transport) as client:
            notes = await client.ask(ActorRef(node_id="a", name="echo"), GetNotes(), timeout_ms=5000)
        assert notes == Notes(notes=())


async def test_bodies_above_the_limit_get_413_with_a_kafka_error_code() -> None:
    codec = make_codec()
    async with node_process("--node-id", "a", "--secret", SECRET) as (_, url):
        body = codec.encode_envelopes(
            [WireEnvelope("echo", Ping(sequence=1, payload=b"x" * (9 << 20)), None, 1000)]
        )
        headers = {"Content-Type": FRAME_CONTENT_TYPE, "Authorization": f"Bearer {SECRET}"}
        async with (
            aiohttp.ClientSession() as session,
            session.post(url + ASK_PATH, data=io.BytesIO(body), headers=headers) as response,
        ):
            assert response.status == 413
            assert (await response.json())["error_code"] == 10
