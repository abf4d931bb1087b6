"""``actorlog cluster up``: a local cluster in the foreground until Ctrl-C or SIGTERM;
``actorlog cluster health``: any cluster's health and the rolling-restart check
(``ops/cli/cluster_health.py``).

    actorlog cluster up [--brokers N] [--zookeeper HOST:PORT] [--data-dir DIR] [--config k=v ...]
                        [--base-port P] [--prometheus] [--tls]
    actorlog cluster health --bootstrap-server H:P [--broker N] [--output text|json] [--wait SECONDS]

Without ``--zookeeper`` it starts its own ZooKeeper from the installed package. It writes
``DIR/cluster.json`` (broker ids, listeners, pids, ZooKeeper address) and ``DIR/client.properties``
(for clients: ``bootstrap.servers`` names the brokers' Kafka listeners, so Kafka's own tools take it
as it is), prints how to reach the cluster, and on Ctrl-C / SIGTERM stops the brokers one at a
time (controlled shutdown), then ZooKeeper and Prometheus. A second Ctrl-C stops at once.

What the user is told, beyond the banner:

* a broker that could not have the port asked for (``--base-port`` + index: 9092, 9093...)
  because something else listens there: one WARNING line on stderr naming the port it got and the
  ``--bootstrap-server`` to use instead, since every example in the README says localhost:9092;
* a child (broker, ZooKeeper, Prometheus) that exits while the cluster runs: at once, one line
  naming it, its pid and how it ended, then the end of its log; the line printed when everything
  has stopped names it again, and the exit code is 1 (0 only when nothing died).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from pathlib import Path

from ops.cli import cluster_health
from ops.clients.connection import DEFAULT_DATA_DIR
from ops.config import parse_overrides
from ops.local.cluster import ChildExit, LocalCluster
from ops.local.zookeeper import ZooKeeperNotInstalledError, ZooKeeperStartError
from ops.properties import ConfigError

__all__ = ["main"]

_WATCH_END_TIMEOUT_S = 10.0  # a bound only: after stop() every child has already exited


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="actorlog cluster", description="Run a local actorlog cluster.")
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="start a local cluster in the foreground (Ctrl-C stops it)")
    up.add_argument("--brokers", type=int, default=3, help="number of brokers (default 3)")
    up.add_argument("--zookeeper", metavar="HOST:PORT", help="an existing ZooKeeper (default: start one)")
    up.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help="where everything lives (default ./actorlog-data)",
    )
    up.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker config key for every broker",
    )
    up.add_argument(
        "--base-port",
        type=int,
        default=9092,
        help="first broker's port, the next ones follow (default 9092); a port in use is replaced "
        "by a free one, with a warning; 0: any free ports",
    )
    up.add_argument("--prometheus", action="store_true", help="also run Prometheus, scraping every broker")
    up.add_argument(
        "--tls",
        action="store_true",
        help="HTTPS listeners and SASL_SSL Kafka listeners: a CA and broker certificates in DATA_DIR/tls/, "
        "clients told SASL_SSL with the CA as ssl.truststore.location (needs the openssl command)",
    )
    health = commands.add_parser(
        "health",
        help="under-replicated, under-min-ISR, offline and rack-breaking partitions; whether a broker "
        "may restart now (exit 0 healthy / allowed, 1 not, 2 error)",
    )
    cluster_health.add_arguments(health)
    return parser


def main(argv: list[str] | None = None) -> int:
    arguments = build_parser().parse_args(argv)
    if arguments.command == "health":
        try:
            return asyncio.run(cluster_health.run(arguments))
        except KeyboardInterrupt:
            return 130
    # Our own ZooKeeper client (it waits for broker registrations) retries when ZooKeeper is gone
    # and its library logs each attempt with a traceback: the one-line report of ZooKeeper's
    # exit says it all.
    logging.getLogger("aiozk").setLevel(logging.CRITICAL)
    try:
        overrides = parse_overrides(arguments.config)
    except ConfigError as error:
        print(f"actorlog cluster: {error}", file=sys.stderr)
        return 2
    cluster = LocalCluster(
        arguments.data_dir,
        brokers=arguments.brokers,
        zookeeper_connect=arguments.zookeeper,
        config=overrides,
        base_port=arguments.base_port,
        prometheus=arguments.prometheus,
        tls=arguments.tls,
    )
    try:
        return asyncio.run(_run(cluster))
    except (ConfigError, ZooKeeperNotInstalledError, ZooKeeperStartError) as error:
        print(f"actorlog cluster: {error}", file=sys.stderr)
        return 2
    except RuntimeError as error:
        print(f"actorlog cluster: {error}", file=sys.stderr)
        return 1


async def _run(cluster: LocalCluster) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    presses = 0

    def on_signal() -> None:
        nonlocal presses
        presses += 1
        if presses > 1:
            print("\nstopping now (second signal)", file=sys.stderr)
            cluster.kill_brokers()
        stop.set()

    def on_child_exit(exit_: ChildExit) -> None:
        print(f"actorlog cluster: {exit_.report()}", file=sys.stderr, flush=True)

    for number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(number, on_signal)
    watcher: asyncio.Future[None] | None = None
    try:
        async with cluster:
            # Watching until every child has exited, shutdown included: a broker that crashes
            # while another one is being stopped is news too.
            watcher = asyncio.ensure_future(cluster.watch(on_child_exit))
            _print_banner(cluster, await cluster.controller_id())
            _warn_about_moved_ports(cluster)
            await stop.wait()
            if cluster.zookeeper_died:
                print(
                    "\nstopping: ZooKeeper is gone, so every broker's controlled shutdown fails its "
                    "retries first (half a minute with the default settings; Ctrl-C again stops at once)",
                    flush=True,
                )
            else:
                print("\nstopping: controlled shutdown of each broker, then ZooKeeper", flush=True)
        # Every child has exited by now, so the watch ends as soon as it has seen the last exit.
        await asyncio.wait({watcher}, timeout=_WATCH_END_TIMEOUT_S)
    finally:
        if watcher is not None and not watcher.done():
            watcher.cancel()
        for number in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(number)
    print("stopped.", flush=True)
    if cluster.unexpected_exits:
        died = "; ".join(
            f"{exit_.name} (pid {exit_.pid}, {exit_.how}; log {exit_.log_path})"
            for exit_ in cluster.unexpected_exits
        )
        print(f"actorlog cluster: not a clean run: died while the cluster ran: {died}", file=sys.stderr)
        return 1
    return 0


def _warn_about_moved_ports(cluster: LocalCluster) -> None:
    """One loud line when a broker is not on the port asked for (see the module docstring)."""
    moved = [broker for broker in cluster.processes.values() if broker.moved]
    if not moved:
        return
    first = next(iter(cluster.processes.values()))
    taken = ", ".join(f"{b.requested_port} (broker {b.broker_id} is on {b.port})" for b in moved)
    listed = cluster.data_dir / "cluster.json"
    if first.moved:
        advice = (
            f"use --bootstrap-server localhost:{first.port}, not localhost:{first.requested_port} "
            f"({listed} lists every broker's listeners)"
        )
    else:
        advice = f"--bootstrap-server localhost:{first.port} still works ({listed} lists every broker)"
    print(
        f"actorlog cluster: WARNING: port(s) already in use: {taken}; {advice}", file=sys.stderr, flush=True
    )


def _print_banner(cluster: LocalCluster, controller: int | None) -> None:
    first = cluster.bootstrap_servers.split(",")[0]
    lines = [
        f"actorlog: {len(cluster.processes)} broker(s) up; controller is broker {controller}",
        f"  ZooKeeper          {cluster.zookeeper_connect}",
    ]
    lines += [
        f"  broker {b.broker_id:<11} {b.url}"
        + (f"  KAFKA://{b.kafka_address}" if b.kafka_address else "")
        + f"  (log {b.log_path})"
        for b in cluster.processes.values()
    ]
    if cluster.prometheus_url:
        lines.append(f"  Prometheus         {cluster.prometheus_url}")
    lines += [
        f"  cluster file       {cluster.data_dir / 'cluster.json'}",
        f"  client config      {cluster.data_dir / 'client.properties'}",
        "",
        "Try, in another terminal (from this directory):",
        f"  actorlog topics --bootstrap-server {first} --create --topic orders --partitions 3",
        f"  actorlog produce --bootstrap-server {first} --topic orders",
        f"  actorlog consume --bootstrap-server {first} --topic orders --from-beginning",
        *(
            [
                f"Kafka's clients and tools: bootstrap.servers={cluster.kafka_bootstrap_servers}",
                f"  with the {'SASL and TLS' if cluster.tls else 'SASL'} settings in "
                f"{cluster.data_dir / 'client.properties'}",
            ]
            if cluster.kafka_bootstrap_servers
            else []
        ),
        "Press Ctrl-C to stop.",
    ]
    print("\n".join(lines), flush=True)
