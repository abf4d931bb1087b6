"""``actorlog cluster up``: a local cluster in the foreground until Ctrl-C or SIGTERM.

    actorlog cluster up [--brokers N] [--zookeeper HOST:PORT] [--data-dir DIR] [--config k=v ...]
                        [--base-port P] [--prometheus]

Without ``--zookeeper`` it starts its own ZooKeeper from the installed package. It writes
``DIR/cluster.json`` (broker ids, endpoints, pids, ZooKeeper address) and ``DIR/client.properties``
(for clients), prints how to reach the cluster, and on Ctrl-C / SIGTERM stops the brokers one at a
time (controlled shutdown), then ZooKeeper and Prometheus. A second Ctrl-C stops at once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from pathlib import Path

from ops.clients.connection import DEFAULT_DATA_DIR
from ops.config import parse_overrides
from ops.local.cluster import LocalCluster
from ops.local.zookeeper import ZooKeeperNotInstalledError, ZooKeeperStartError
from ops.properties import ConfigError

__all__ = ["main"]


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
        "--base-port", type=int, default=9092, help="first broker's port (default 9092; free ports if taken)"
    )
    up.add_argument("--prometheus", action="store_true", help="also run Prometheus, scraping every broker")
    return parser


def main(argv: list[str] | None = None) -> int:
    arguments = build_parser().parse_args(argv)
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
            for broker in cluster.processes.values():
                if broker.process is not None and broker.process.returncode is None:
                    broker.process.kill()
        stop.set()

    for number in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(number, on_signal)
    try:
        async with cluster:
            _print_banner(cluster, await cluster.controller_id())
            await stop.wait()
            print("\nstopping: controlled shutdown of each broker, then ZooKeeper", flush=True)
    finally:
        for number in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(number)
    print("stopped.")
    return 0


def _print_banner(cluster: LocalCluster, controller: int | None) -> None:
    first = cluster.bootstrap_servers.split(",")[0]
    lines = [
        f"actorlog: {len(cluster.processes)} broker(s) up; controller is broker {controller}",
        f"  ZooKeeper          {cluster.zookeeper_connect}",
    ]
    lines += [f"  broker {b.broker_id:<11} {b.url}  (log {b.log_path})" for b in cluster.processes.values()]
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
        "Press Ctrl-C to stop.",
    ]
    print("\n".join(lines), flush=True)
