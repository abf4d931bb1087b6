"""``actorlog zookeeper``: one standalone ZooKeeper from the installed package, in the
foreground, until Ctrl-C (``ops.local.zookeeper`` runs it)."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence

from ops.local.zookeeper import LocalZooKeeper, ZooKeeperNotInstalledError, ZooKeeperStartError

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """``actorlog zookeeper --port N --data-dir D``: one ZooKeeper in the foreground."""
    parser = argparse.ArgumentParser(prog="actorlog zookeeper", description=main.__doc__)
    parser.add_argument("--port", type=int, default=2181, help="client port (0 picks a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--data-dir", required=True, help="its own directory: zoo.cfg, data, log")
    parser.add_argument("--tick-time-ms", type=int, default=2000, help="ZooKeeper tickTime")
    args = parser.parse_args(argv)
    server = LocalZooKeeper(
        args.data_dir, port=args.port or None, host=args.host, tick_time_ms=args.tick_time_ms
    )
    # Block the stop signals so that sigwait receives them instead of their default handlers.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        server.start_sync()
    except (ZooKeeperNotInstalledError, ZooKeeperStartError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"ZooKeeper serving on {server.connect_string} (pid {server.pid}); log: {server.log_path}")
    print("Press Ctrl-C to stop.")
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        server.stop_sync()
    print("ZooKeeper stopped.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
