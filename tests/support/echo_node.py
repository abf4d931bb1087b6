"""A tiny actor node in its own OS process, for tests of the HTTP transport across processes.

    python -m tests.support.echo_node --node-id a --secret S [--peer b=http://127.0.0.1:N --asks 50]

It serves an ``echo`` actor (EchoActor) over HTTP on a free loopback port and prints
``LISTENING <url>``. With ``--peer``, it then asks the peer's echo ``--asks`` times from inside an
actor and prints ``ASKS <replies> <failures>``. It runs until SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import signal

from runtime import ActorSystem
from runtime.ref import ActorRef
from runtime.transport.http import HttpServer, HttpTransport
from tests.support.runtime_actors import AskerActor, EchoActor, Pong, SendPings, make_codec


async def run(arguments: argparse.Namespace) -> None:
    addresses: dict[str, str] = {}
    for peer in arguments.peer or []:
        node, url = peer.split("=", 1)
        addresses[node] = url
    transport = HttpTransport(
        make_codec(), secret=arguments.secret, resolve=addresses.get, max_body_bytes=8 << 20
    )
    server = HttpServer("127.0.0.1", 0, routes=transport.routes(), max_body_bytes=8 << 20)
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    try:
        async with ActorSystem(arguments.node_id, transport=transport) as system:
            system.spawn("echo", EchoActor)
            print(f"LISTENING {server.url}", flush=True)
            if addresses and arguments.asks:
                done = asyncio.Event()
                asker = AskerActor(arguments.asks, done)
                ref = system.spawn("asker", lambda: asker)
                peer_node = next(iter(addresses))
                system.tell(ref, SendPings(ActorRef(node_id=peer_node, name="echo"), arguments.asks, 5000))
                await done.wait()
                replies = sum(1 for outcome in asker.outcomes if isinstance(outcome, Pong))
                print(f"ASKS {replies} {len(asker.outcomes) - replies}", flush=True)
            await stop.wait()
    finally:
        await server.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--node-id", required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--peer", action="append")
    parser.add_argument("--asks", type=int, default=0)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
