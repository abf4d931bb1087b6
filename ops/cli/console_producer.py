"""``actorlog produce``: lines from stdin to a topic, like ``kafka-console-producer.sh``.

    actorlog produce --bootstrap-server H:P --topic T [--acks all|1|0|-1]
                     [--property parse.key=true --property key.separator=:]
                     [--producer-property k=v ...] [--producer.config FILE] [--sync]

Each line is one record (its value; with ``parse.key=true`` the text before ``key.separator`` is
the key). At end of input everything is flushed. A failed send prints Kafka's line (``ERROR Error
when sending message to topic T with key: N bytes, value: M bytes with error: ...``) and the exit
code is 1. ``--sync`` waits for each acknowledgement before reading the next line. The producer's
defaults are the project's: idempotent, ``acks=all``.

A line without ``key.separator`` under ``parse.key=true`` stops the tool as Kafka's does: it prints
``No key found on line N: LINE`` (N counts from 1), sends nothing more, flushes what it had already
sent and exits 1; with ``ignore.error=true`` such a line is sent whole as the value, without a key.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import AsyncIterator, Callable

from ops.clients.producer import Producer, RecordMetadata
from ops.config import parse_overrides
from ops.properties import ConfigError

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="actorlog produce", description="Send stdin lines to a topic.")
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,HOST:PORT...]")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--acks", choices=["all", "-1", "0", "1"], help="default: all (idempotent producer)")
    parser.add_argument(
        "--property", action="append", default=[], metavar="KEY=VALUE", help="parse.key, key.separator"
    )
    parser.add_argument("--producer-property", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--producer.config", dest="producer_config", metavar="FILE")
    parser.add_argument("--compression-codec", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    parser.add_argument("--sync", action="store_true", help="wait for each record's acknowledgement")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    arguments = parser.parse_args(argv)
    try:
        reader = parse_overrides(arguments.property)
        settings: dict[str, object] = dict(parse_overrides(arguments.producer_property))
    except ConfigError as error:
        parser.error(str(error).replace("--override", "--property"))
    unknown = set(reader) - {"parse.key", "key.separator", "ignore.error"}
    if unknown:
        parser.error(
            f"unknown --property {', '.join(sorted(unknown))} (known: parse.key, key.separator, ignore.error)"
        )
    if arguments.acks is not None:
        settings["acks"] = arguments.acks
        if arguments.acks in ("0", "1"):
            settings.setdefault("enable.idempotence", "false")
    if arguments.compression_codec is not None:
        settings["compression.type"] = arguments.compression_codec
    try:
        return asyncio.run(_run(arguments, settings, reader))
    except ConfigError as error:
        print(f"actorlog produce: {error}", file=sys.stderr)
        return 2


async def _lines() -> AsyncIterator[bytes]:
    """stdin, line by line, read in a worker thread so the producer keeps running meanwhile."""
    while True:
        line = await asyncio.to_thread(sys.stdin.buffer.readline)
        if not line:
            return
        yield line.rstrip(b"\r\n")


async def _run(arguments: argparse.Namespace, settings: dict[str, object], reader: dict[str, str]) -> int:
    parse_key = reader.get("parse.key", "false").lower() == "true"
    ignore_error = reader.get("ignore.error", "false").lower() == "true"
    separator = reader.get("key.separator", "\t").encode()
    failures = 0
    topic = arguments.topic

    def report(key: bytes | None, value: bytes, error: BaseException) -> None:
        nonlocal failures
        failures += 1
        key_size = -1 if key is None else len(key)
        print(
            f"ERROR Error when sending message to topic {topic} with key: {key_size} bytes, "
            f"value: {len(value)} bytes with error: {error}",
            file=sys.stderr,
        )

    async with Producer(
        arguments.bootstrap_server, config=settings, properties_file=arguments.producer_config
    ) as producer:
        line_number = 0
        async for line in _lines():
            line_number += 1
            key: bytes | None = None
            value = line
            if parse_key and separator in line:
                key, value = line.split(separator, 1)
            elif parse_key and not ignore_error:
                # Kafka's LineMessageReader throws here and the tool stops reading; the records
                # sent before are still flushed below, as Kafka's shutdown hook closes its producer.
                text = line.decode("utf-8", errors="replace")
                print(f"No key found on line {line_number}: {text}", file=sys.stderr)
                failures += 1
                break
            future = await producer.enqueue(topic, value, key)
            future.add_done_callback(_reporter(report, key, value))
            if arguments.sync:
                await asyncio.wait({future})
        await producer.flush()
    return 1 if failures else 0


def _reporter(
    report: Callable[[bytes | None, bytes, BaseException], None], key: bytes | None, value: bytes
) -> Callable[[asyncio.Future[RecordMetadata]], None]:
    def done(future: asyncio.Future[RecordMetadata]) -> None:
        if not future.cancelled() and future.exception() is not None:
            error = future.exception()
            assert error is not None
            report(key, value, error)

    return done
