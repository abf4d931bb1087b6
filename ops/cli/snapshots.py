"""``actorlog snapshots export``: scrape every live broker's ``/metrics`` into Parquet snapshot
files periodically (the exporter itself lives in ``ops.snapshots``)."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from ops.clients.connection import load_client_properties, resolve_credential, resolve_ssl_context
from ops.properties import ConfigError
from ops.snapshots import (
    ExportOptions,
    MembershipError,
    parse_bootstrap_servers,
    parse_duration_ms,
    run_export,
)

__all__ = ["main"]


class _ArgumentParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr (the usage is one ``--help`` away)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _duration_argument(text: str) -> int:
    try:
        return parse_duration_ms(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _bootstrap_argument(text: str) -> str:
    """Checked here; the scheme of a bare host:port waits for the client properties."""
    try:
        parse_bootstrap_servers(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def _parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(prog="actorlog snapshots", description="Metric snapshot files.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_ArgumentParser)
    export = commands.add_parser(
        "export",
        help="scrape every live broker's /metrics periodically into Parquet snapshot files",
        description="Every --interval, ask the cluster for its live brokers, scrape each one's /metrics "
        "and write DIR/date=YYYY-MM-DD/hour=HH/<broker>-<epoch_ms>.parquet. Runs until Ctrl-C/SIGTERM, "
        "or for --duration / --rounds.",
    )
    export.add_argument(
        "--bootstrap-server",
        required=True,
        type=_bootstrap_argument,
        metavar="HOST:PORT[,HOST:PORT...]",
        help="brokers to ask for the membership; https://HOST:PORT when security.protocol is SSL or SASL_SSL",
    )
    export.add_argument("--out", required=True, type=Path, metavar="DIR", help="snapshot directory")
    export.add_argument(
        "--interval", type=_duration_argument, default="10s", help="time between rounds (10s)"
    )
    export.add_argument("--duration", type=_duration_argument, default=None, help="stop after this long")
    export.add_argument("--rounds", type=_positive_int, default=None, help="stop after this many rounds")
    export.add_argument(
        "--scrape-timeout", type=_duration_argument, default="5s", help="per-request timeout (5s)"
    )
    export.add_argument(
        "--command-config",
        metavar="FILE",
        help="client properties with a user's sasl.jaas.config, and security.protocol=SSL|SASL_SSL with "
        "ssl.truststore.location for an HTTPS cluster (see README)",
    )
    return parser


async def _export_main(options: ExportOptions) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    handled = (signal.SIGINT, signal.SIGTERM)
    for signum in handled:
        loop.add_signal_handler(signum, stop.set)
    try:
        rounds = await run_export(options, stop, lambda result: print(result.line(), flush=True))
    finally:
        for signum in handled:
            loop.remove_signal_handler(signum)
    print(f"exported {rounds} rounds to {options.out_dir}", flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``actorlog snapshots export ...``; returns the exit code."""
    arguments = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    prog = "actorlog snapshots export"
    try:
        properties = load_client_properties(arguments.command_config)
        secret = resolve_credential(properties)
        # Read as every client reads it: from these properties, else the client.properties that
        # `cluster up` wrote, whichever the credential came from.
        ssl_context = resolve_ssl_context(properties)
        bootstrap = parse_bootstrap_servers(arguments.bootstrap_server, tls=ssl_context is not None)
    except (ConfigError, ValueError) as error:
        print(f"{prog}: {error}", file=sys.stderr)
        return 2
    options = ExportOptions(
        bootstrap=tuple(bootstrap),
        out_dir=arguments.out,
        interval_ms=arguments.interval,
        duration_ms=arguments.duration,
        rounds=arguments.rounds,
        scrape_timeout_s=arguments.scrape_timeout / 1000,
        secret=secret,
        ssl_context=ssl_context,
    )
    try:
        return asyncio.run(_export_main(options))
    except MembershipError as error:
        print(f"{prog}: cannot reach the cluster: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"{prog}: cannot write snapshots to {options.out_dir}: {error}", file=sys.stderr)
        return 1
    except ExceptionGroup as group:
        # Writes run in a TaskGroup: a full disk arrives as a group of OSErrors.
        written, other = group.split(OSError)
        if written is None or other is not None:
            raise
        first = written.exceptions[0]
        print(f"{prog}: cannot write snapshots to {options.out_dir}: {first}", file=sys.stderr)
        return 1
