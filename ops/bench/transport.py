"""Transport benchmark: actorlog asks over HTTP vs a bare aiohttp echo server of the same shape.

    python -m ops.bench.transport [--duration 3] [--warmup 1]

Each server runs in its own OS process on loopback; this process is the client. Both sides echo
the request body: the bare server returns the POST body as is; the actorlog node decodes the frame,
routes it to an echo actor's mailbox, the actor replies, and the reply frame is the response. Both
clients use one aiohttp ClientSession with the same connector settings.

Measured, side by side in the same run:
* asks/s with 100-byte payloads, 1 and 32 requests in flight;
* MB/s (payload bytes echoed per second, one direction) with 16 KiB and 1 MiB payloads, 4 in flight.
Targets (issue 2): actorlog ≥ 0.6 × bare for asks/s, ≥ 0.8 × bare for MB/s at 1 MiB.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeAlias, assert_never

import aiohttp
from aiohttp import web

import runtime.messages
from runtime import Actor, ActorRef, ActorSystem, Context, wire
from runtime.codec import Codec
from runtime.transport.http import HttpServer, HttpTransport

SECRET = "bench-secret"


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class BenchEcho:
    payload: bytes


@wire
@dataclass(frozen=True, slots=True, kw_only=True)
class BenchEchoed:
    payload: bytes


BenchMessage: TypeAlias = BenchEcho


class BenchEchoActor(Actor[BenchMessage]):
    def receive(self, ctx: Context[BenchMessage], message: BenchMessage) -> None:
        match message:
            case BenchEcho():
                ctx.reply(BenchEchoed(payload=message.payload))
            case _:
                assert_never(message)


def bench_codec() -> Codec:
    return Codec.from_modules(runtime.messages, sys.modules[__name__])


# ------------------------------------------------------------------------------------- servers


async def serve_actorlog() -> None:
    transport = HttpTransport(bench_codec(), secret=SECRET, resolve=lambda node: None)
    server = HttpServer("127.0.0.1", 0, routes=transport.routes(), max_body_bytes=64 << 20)
    await server.start()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    async with ActorSystem("bench-server", transport=transport) as system:
        system.spawn("echo", BenchEchoActor)
        print(f"LISTENING {server.url}", flush=True)
        await stop.wait()
    await server.stop()


async def serve_bare() -> None:
    async def echo(request: web.Request) -> web.Response:
        return web.Response(body=await request.read(), content_type="application/octet-stream")

    app = web.Application(client_max_size=64 << 20)
    app.add_routes([web.post("/echo", echo)])
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert server is not None
    port = getattr(server, "sockets")[0].getsockname()[1]  # noqa: B009 - not on the protocol type
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print(f"LISTENING http://127.0.0.1:{port}", flush=True)
    await stop.wait()
    await runner.cleanup()


# -------------------------------------------------------------------------------------- client


@dataclass(frozen=True)
class Result:
    requests_per_second: float
    megabytes_per_second: float


async def measure(
    call: Callable[[bytes], Awaitable[None]],
    payload: bytes,
    in_flight: int,
    duration_s: float,
    warmup_s: float,
) -> Result:
    count = 0
    measuring = False
    deadline = 0.0

    async def worker() -> None:
        nonlocal count
        while True:
            now = time.perf_counter()
            if measuring and now >= deadline:
                return
            await call(payload)
            if measuring:
                count += 1

    warm_deadline = time.perf_counter() + warmup_s
    while time.perf_counter() < warm_deadline:
        await asyncio.gather(*(call(payload) for _ in range(in_flight)))
    measuring = True
    start = time.perf_counter()
    deadline = start + duration_s
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    elapsed = time.perf_counter() - start
    return Result(count / elapsed, count * len(payload) / elapsed / 1e6)


def _start_server(mode: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "ops.bench.transport", mode],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("LISTENING "):
        process.kill()
        raise RuntimeError(f"{mode} server did not start: {line!r}")
    return process, line.split()[1]


async def run_client(duration_s: float, warmup_s: float) -> list[tuple[str, Result, Result]]:
    actorlog_process, actorlog_url = _start_server("serve-actorlog")
    bare_process, bare_url = _start_server("serve-bare")
    rows: list[tuple[str, Result, Result]] = []
    try:
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=32, keepalive_timeout=15)
        async with aiohttp.ClientSession(connector=connector) as session:

            async def bare_call(payload: bytes) -> None:
                body: Any = io.BytesIO(payload) if len(payload) > 1 << 20 else payload
                async with session.post(bare_url + "/echo", data=body) as response:
                    data = await response.read()
                    assert len(data) == len(payload)

            transport = HttpTransport(
                bench_codec(), secret=SECRET, resolve={"server": actorlog_url}.get, session=session
            )
            async with ActorSystem("bench-client", transport=transport) as system:
                echo = ActorRef(node_id="server", name="echo")

                async def actorlog_call(payload: bytes) -> None:
                    reply = await system.ask(echo, BenchEcho(payload=payload), timeout_ms=30_000)
                    assert isinstance(reply, BenchEchoed)
                    assert len(reply.payload) == len(payload)

                for label, size, in_flight in (
                    ("asks/s, 100 B, 1 in flight", 100, 1),
                    ("asks/s, 100 B, 32 in flight", 100, 32),
                    ("MB/s, 16 KiB, 4 in flight", 16 * 1024, 4),
                    ("MB/s, 1 MiB, 4 in flight", 1024 * 1024, 4),
                ):
                    payload = os.urandom(size)
                    bare = await measure(bare_call, payload, in_flight, duration_s, warmup_s)
                    ours = await measure(actorlog_call, payload, in_flight, duration_s, warmup_s)
                    rows.append((label, bare, ours))
    finally:
        for process in (actorlog_process, bare_process):
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=10)
    return rows


def report(rows: list[tuple[str, Result, Result]]) -> None:
    print(f"{'benchmark':<32} {'bare aiohttp':>14} {'actorlog':>14} {'ratio':>7}")
    for label, bare, ours in rows:
        if label.startswith("asks"):
            bare_value, our_value = bare.requests_per_second, ours.requests_per_second
        else:
            bare_value, our_value = bare.megabytes_per_second, ours.megabytes_per_second
        print(f"{label:<32} {bare_value:>14,.1f} {our_value:>14,.1f} {our_value / bare_value:>7.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "mode", nargs="?", default="client", choices=["client", "serve-actorlog", "serve-bare"]
    )
    parser.add_argument("--duration", type=float, default=3.0, help="seconds measured per cell")
    parser.add_argument("--warmup", type=float, default=0.5, help="seconds of warm-up per cell")
    arguments = parser.parse_args(argv)
    if arguments.mode == "serve-actorlog":
        asyncio.run(serve_actorlog())
    elif arguments.mode == "serve-bare":
        asyncio.run(serve_bare())
    else:
        report(asyncio.run(run_client(arguments.duration, arguments.warmup)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
