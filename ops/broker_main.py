"""``actorlog broker start --config FILE [--override k=v ...]``: one broker process.

What Kubernetes (and ``actorlog cluster up``) runs. With a ``KAFKA://`` listener in ``listeners`` it
also serves Kafka's binary protocol to clients there (``ops/kafka/``, SASL-authenticated client users;
over TLS with the broker's keystore when ``listener.security.protocol.map`` says ``KAFKA:SASL_SSL``;
stopped first at shutdown). The process serves, on its HTTP listener:
the internal actor endpoints (shared-secret authenticated), ``GET /metrics``, ``GET /healthz``
(liveness: answers while the event loop is responsive) and ``GET /readyz`` (readiness: registered in
ZooKeeper and back in the ISR of every partition it follows), plus the JSON API. With an
``HTTPS://`` listener all of it is served over TLS only and peers are verified (``ops/tls.py``).

SIGTERM or SIGINT stops the broker cleanly: actors stop, logs are flushed and closed with the
clean-shutdown marker, the ZooKeeper session closes (the registration vanishes at once). A second
signal during shutdown exits immediately. The ZooKeeper session is opened first, as Kafka's
``KafkaServer.startup`` does, before the logs are loaded; while it is being opened (aiozk retries
for up to ``zookeeper.connection.timeout.ms``, logging one line per failed attempt) a stop signal
ends the broker at once, with nothing else to shut down yet.

``ACTORLOG_SOURCE_ADDRESS`` (an environment variable, not a configuration key: Kafka has none for
this) binds the broker's outgoing HTTP connections to that local IP address. It exists for
fault-injection harnesses (``ops/verify/``): each broker gets its own loopback address, and the
proxies in front of the listeners tell brokers apart by a connection's source address. A value
that is not an IP address this machine can bind is a one-line error and exit code 2 at start-up.
The ZooKeeper client (aiozk) opens its connections without a local address, so the harness cuts a
broker's ZooKeeper link through a proxy port of its own (``zookeeper.connect`` names it) instead.

``log.dirs`` is created if missing and must take a file (``check_log_dir``: a probe written and
removed) before anything starts, as Kafka's ``LogManager.createAndValidateLogDirs`` refuses a log
dir it cannot use: otherwise one line naming the directory, exit code 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import orjson
from aiohttp import web

from actors.common.client_access import client_request_refusal
from actors.server import zk_data
from actors.server.broker import BrokerActor
from actors.server.fetcher.replica_fetcher import FetchPhase, ReplicaFetcherActor
from actors.server.state_changes import StateChangeLog
from ops.broker_metrics import broker_metric_families, collect_node
from ops.codec import wire_codec
from ops.config import BrokerSettings, load_broker_settings
from ops.json_api.routes import JsonApi
from ops.kafka.apis import KafkaApis
from ops.kafka.server import KafkaListener
from ops.properties import ConfigError
from ops.security.authenticator import Authenticator
from ops.security.users import UserStore
from ops.wiring import BrokerNode, NodeAdapters, broker_node_context
from runtime.clock import LoopClock
from runtime.coordination.zk import ZkCoordinator
from runtime.errors import RuntimeFailure
from runtime.logging import configure_logging
from runtime.loop_lag import LoopLagProbe
from runtime.metrics import NodeMetrics
from runtime.rng import fresh_seed, node_rng
from runtime.storage.os_fs import OsFileSystem
from runtime.transport.addresses import AddressBook
from runtime.transport.client_endpoint import ClientEndpoint
from runtime.transport.http import HttpServer, HttpTransport

__all__ = ["SOURCE_ADDRESS_ENV", "main", "readiness", "run_broker", "source_address_from_env"]

_log = logging.getLogger("actorlog.broker")

SOURCE_ADDRESS_ENV = "ACTORLOG_SOURCE_ADDRESS"

# Handler work one event-loop iteration may run before the rest waits for the next one (issue 19):
# a LeaderAndIsr for thousands of partitions starts or tells thousands of partition actors at once,
# ~2 ms of storage work each, and unbounded they all ran in one iteration, 5-6 s during which no
# ZooKeeper ping or request was served. Not much smaller: each iteration also carries the loop's own
# work (sockets, codecs), so the budget sets the actors' share of the CPU in a backlog; at 20 ms the
# scale benchmark's preferred election after a restart timed out (25 s) behind the backlog.
EVENT_LOOP_TURN_BUDGET_MS = 200.0


def source_address_from_env(environ: Mapping[str, str]) -> str | None:
    """The local address outgoing connections bind to (``ACTORLOG_SOURCE_ADDRESS``), or None.

    Raises ConfigError for a value that is not an IP address, or one this machine cannot bind: a
    bad value would otherwise surface only as every connection to a peer failing.
    """
    value = environ.get(SOURCE_ADDRESS_ENV, "").strip()
    if not value:
        return None
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        raise ConfigError(f"{SOURCE_ADDRESS_ENV}={value!r} is not an IP address") from None
    family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((value, 0))
    except OSError as error:
        raise ConfigError(f"{SOURCE_ADDRESS_ENV}={value} cannot be bound here: {error.strerror}") from None
    return value


_WRITE_PROBE = ".actorlog-write-probe"


def check_log_dir(path: str) -> None:
    """Create ``path`` if missing and write, then remove, a small file in it; ConfigError naming
    the directory if either fails. A real write, not ``os.access``: for root, permission bits stop
    nothing, and a read-only mount or ``/proc`` refuse a file that ``os.access`` allows."""
    probe = Path(path) / _WRITE_PROBE
    if os.path.exists(path) and not os.path.isdir(path):
        raise ConfigError(f"log.dirs: {path} is not a directory")
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"probe\n")
        probe.unlink()
    except (OSError, ValueError) as error:  # ValueError: a path with a NUL byte
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise ConfigError(f"log.dirs: {path} is not a writable directory ({reason})") from None


def readiness(node: BrokerNode | None) -> tuple[bool, dict[str, object]]:
    """Ready = registered in ZooKeeper, the controller's metadata received since, every replica
    fetcher past its truncation phase, and this broker in the ISR of every partition it follows,
    as the controller last published it. The ISR
    condition is what makes a rolling restart safe: the next broker may go only once this one
    counts toward min.insync.replicas again. (Lag alone would flap under steady load.)"""
    if node is None:
        return False, {"reason": "starting"}
    registered = current = False
    out_of_isr: list[str] = []
    not_fetching: list[str] = []
    for _, actor in node.system.actor_instances():
        if isinstance(actor, BrokerActor):
            stats = actor.statistics()
            registered = stats.registered
            current = stats.has_current_metadata
            out_of_isr = list(stats.followed_out_of_isr)
        elif isinstance(actor, ReplicaFetcherActor):
            not_fetching += [
                str(p.tp) for p in actor.statistics().partitions if p.phase is not FetchPhase.FETCHING
            ]
    ready = registered and current and not out_of_isr and not not_fetching
    detail: dict[str, object] = {
        "registered": registered,
        "metadata_from_controller": current,
        "out_of_isr_partitions": sorted(out_of_isr),
        "not_fetching_partitions": sorted(not_fetching),
    }
    return ready, detail


def health_routes(node_ref: Callable[[], BrokerNode | None]) -> list[web.RouteDef]:
    async def healthz(request: web.Request) -> web.Response:
        return web.Response(body=orjson.dumps({"status": "ok"}), content_type="application/json")

    async def readyz(request: web.Request) -> web.Response:
        ready, detail = readiness(node_ref())
        return web.Response(
            status=200 if ready else 503,
            body=orjson.dumps({"ready": ready, **detail}),
            content_type="application/json",
        )

    return [web.get("/healthz", healthz), web.get("/readyz", readyz)]


async def run_broker(
    settings: BrokerSettings, *, stop: asyncio.Event, source_address: str | None = None
) -> None:
    """Run one broker until ``stop`` is set; ``source_address``: see ``ACTORLOG_SOURCE_ADDRESS``."""
    config = settings.broker
    clock = LoopClock()
    address_book = AddressBook()
    transport = HttpTransport(
        wire_codec(),
        secret=settings.internal_auth_secret,
        resolve=address_book.resolve,
        max_body_bytes=settings.socket_request_max_bytes,
        source_host=source_address,
        ssl_context=settings.client_ssl_context,
    )
    coordinator = ZkCoordinator(
        settings.zookeeper_connect,
        session_timeout_ms=config.zookeeper_session_timeout_ms,
        connection_timeout_ms=config.zookeeper_connection_timeout_ms,
        clock=clock,
        security=settings.zookeeper_security,
    )
    metrics = NodeMetrics()
    # Watches the event loop once the server listens (log loading included): a loop stalled for seconds
    # starves the ZooKeeper session and every peer (issue 19).
    loop_lag = LoopLagProbe(clock)
    metrics.add_collector(loop_lag.metric_families)
    current: BrokerNode | None = None
    # Two identities (docs/security.md): the broker's secret opens /internal/v1 (the transport's
    # own routes); client users, checked against ZooKeeper, open /client/v1 and the JSON API.
    users = UserStore(coordinator, clock=clock)
    authenticator = Authenticator(internal_secret=settings.internal_auth_secret, users=users)
    client_endpoint = ClientEndpoint(
        wire_codec(),
        authenticate=authenticator.authenticate,
        admit=lambda envelope, ask: client_request_refusal(envelope.target, envelope.message, ask=ask),
        max_body_bytes=settings.socket_request_max_bytes,
    )
    json_api = JsonApi(
        lambda: current,
        secret=settings.internal_auth_secret,
        max_body_bytes=settings.socket_request_max_bytes,
        authenticator=authenticator,
    )
    server = HttpServer(
        settings.listener.host,
        settings.listener.port,
        routes=[
            *transport.routes(),
            *client_endpoint.routes(),
            metrics.route(),
            *health_routes(lambda: current),
            *json_api.routes(),
        ],
        max_body_bytes=settings.socket_request_max_bytes,
        body_timeout_ms=settings.request_body_timeout_ms,
        ssl_context=settings.server_ssl_context,
    )
    # The Kafka protocol listener (ops/kafka/): the same client users, the same actors.
    kafka_apis: KafkaApis | None = None
    kafka = (
        KafkaListener(
            settings.kafka_listener.host,
            settings.kafka_listener.port,
            apis=lambda: kafka_apis,
            users=users,
            max_request_bytes=settings.socket_request_max_bytes,
            ssl_context=settings.kafka_ssl_context,
        )
        if settings.kafka_listener is not None
        else None
    )
    await server.start()
    seed = fresh_seed()
    _log.info("broker %d listening on %s (rng seed %d)", config.broker_id, server.url, seed)
    loop_lag_task = asyncio.ensure_future(loop_lag.run())
    try:
        if kafka is not None:
            await kafka.start()
            _log.info(
                "broker %d listening on KAFKA://%s (%s)",
                config.broker_id,
                kafka.address,
                kafka.security_protocol,
            )
        if not await _open_session_unless_stopped(coordinator, stop):
            _log.info("broker %d stopped while waiting for ZooKeeper", config.broker_id)
            return
        adapters = NodeAdapters(
            clock=clock,
            fs=OsFileSystem(),
            coordinator=coordinator,
            transport=transport,
            address_book=address_book,
            rng=node_rng(seed, str(config.broker_id)),
            load_logs_in_thread=True,
            run_controller=True,
            turn_budget_ms=EVENT_LOOP_TURN_BUDGET_MS,
        )
        async with broker_node_context(
            config,
            adapters=adapters,
            log_dir=settings.log_dir,
            host=settings.advertised_listener.host,
            port=settings.advertised_listener.port,
            default_log_config=settings.log_config,
            rack=settings.rack,
            static_properties=settings.properties,
            broker_config_entries=settings.config_entries(),
            cluster_id=settings.cluster_id,
            tls=settings.advertised_listener.tls,
            extra_endpoints=_kafka_endpoints(settings, kafka),
        ) as node:
            current = node
            client_endpoint.inbound = node.system
            kafka_apis = KafkaApis(
                node.system, node.broker, node.admin, request_timeout_ms=config.request_timeout_ms
            )
            metrics.add_collector(
                lambda: broker_metric_families(
                    node.system,
                    collect_node(node.system, coordinator.statistics()),
                    partition_level=settings.metrics_partition_level,
                )
            )
            _log.info("broker %d started", config.broker_id)
            snapshots = (
                asyncio.ensure_future(
                    _write_own_snapshots(settings, metrics, clock, stop, node.state_changes)
                )
                if settings.metrics_snapshot_dir
                else None
            )
            await stop.wait()
            if snapshots is not None:
                await snapshots
            _log.info("broker %d shutting down", config.broker_id)
            if kafka is not None:
                await kafka.stop()  # no Kafka request reaches a node that is stopping
            # The JSON API's acks=all producer runs on this node: it finishes (or fails) what it
            # holds while the node still runs.
            await json_api.close()
    finally:
        # The node closed the session on its way out; this closes it when the start failed before
        # the node took it over (closing twice is a no-op).
        await coordinator.close()
        if kafka is not None:
            await kafka.stop()
        await server.stop()
        loop_lag_task.cancel()
    _log.info("broker %d stopped", config.broker_id)


def _kafka_endpoints(settings: BrokerSettings, kafka: KafkaListener | None) -> tuple[zk_data.EndPoint, ...]:
    """The KAFKA listener as the registration names it (the port bound, when it was 0)."""
    advertised = settings.advertised_kafka_listener
    if kafka is None or advertised is None:
        return ()
    port = advertised.port or kafka.port
    return (
        zk_data.EndPoint(
            listener_name=zk_data.KAFKA_LISTENER_NAME,
            host=advertised.host,
            port=port,
            security_protocol=advertised.security_protocol,
        ),
    )


async def _open_session_unless_stopped(coordinator: ZkCoordinator, stop: asyncio.Event) -> bool:
    """Open the ZooKeeper session (the node's own ``start`` then finds it open), unless ``stop`` is
    set first: True when open; False when stopped (the attempt is abandoned); raises when the
    session could not be opened within zookeeper.connection.timeout.ms."""
    connecting = asyncio.ensure_future(coordinator.start())
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({connecting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        if not connecting.done():
            connecting.cancel()
            await asyncio.wait({connecting})  # its cancellation, not ours: nothing is raised here
    if connecting.cancelled():
        return False
    connecting.result()  # the start's own error, when it failed
    return True


async def _write_own_snapshots(
    settings: BrokerSettings,
    metrics: NodeMetrics,
    clock: LoopClock,
    stop: asyncio.Event,
    state_changes: StateChangeLog | None,
) -> None:
    """``metrics.snapshot.dir``: every ``metrics.snapshot.interval.ms`` this broker writes its own
    metric snapshot file (the exporter's format, for the rollup) and the state-change events
    recorded since the previous one. The registry and the events are collected on the event loop
    (they are actor state); the writes, which fsync, run in a thread."""
    # Imported here: pyarrow is only loaded by brokers that write snapshots.
    from ops.snapshots import rows_from_registry, write_snapshot, write_state_changes

    directory = Path(str(settings.metrics_snapshot_dir))
    broker = str(settings.broker.broker_id)
    interval_s = settings.metrics_snapshot_interval_ms / 1000

    written_up_to = 0

    async def write_one() -> None:
        nonlocal written_up_to
        ts_ms = clock.wall_clock_ms()
        rows = rows_from_registry(metrics.registry, broker, ts_ms)
        events = state_changes.since(written_up_to) if state_changes is not None else None
        try:
            await asyncio.to_thread(write_snapshot, rows, directory)
            if events is not None and events.events:
                document = events.document()["events"]
                await asyncio.to_thread(write_state_changes, document, directory, broker, ts_ms)
                written_up_to = events.last_sequence
        except OSError as error:
            _log.warning("metric snapshot not written to %s: %s", directory, error)

    # One at start, one per interval, and a last one at shutdown (the final counters).
    await write_one()
    while True:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval_s)
        await write_one()
        if stop.is_set():
            return


def main(
    argv: list[str] | None = None, *, adjust: Callable[[BrokerSettings], BrokerSettings] | None = None
) -> int:
    """``actorlog broker start``. ``adjust`` lets code (never configuration) change the settings
    once loaded: ``ops/verify/faulty_broker.py`` builds the negative controls' brokers with it."""
    parser = argparse.ArgumentParser(description="Run one actorlog broker.")
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("start", help="start a broker in the foreground")
    start.add_argument("--config", required=True, help="a properties file with Kafka's keys")
    start.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="override a key")
    start.add_argument("--log-format", choices=["json", "console"], default="json")
    start.add_argument("--log-level", default="INFO")
    arguments = parser.parse_args(argv)
    try:
        settings = load_broker_settings(config_file=arguments.config, overrides=arguments.override)
        if adjust is not None:
            settings = adjust(settings)
        check_log_dir(settings.log_dir)
        source_address = source_address_from_env(os.environ)
    except ConfigError as error:
        print(f"actorlog broker: {error}", file=sys.stderr)
        return 2
    configure_logging(arguments.log_level, fmt=arguments.log_format)
    for line in settings.describe():
        _log.info("config: %s", line)
    if source_address is not None:
        _log.info("config: outgoing connections from %s (%s)", source_address, SOURCE_ADDRESS_ENV)
    return asyncio.run(_serve(settings, source_address))


async def _serve(settings: BrokerSettings, source_address: str | None) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    signals = 0

    def on_signal() -> None:
        nonlocal signals
        signals += 1
        if signals > 1:
            _log.warning("second stop signal: exiting without a clean shutdown")
            os._exit(130)
        stop.set()

    for number in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(number, on_signal)
    try:
        await run_broker(settings, stop=stop, source_address=source_address)
    except (OSError, RuntimeFailure) as error:
        print(f"actorlog broker: {error}", file=sys.stderr)
        return 1
    finally:
        for number in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(number)
    return 0
