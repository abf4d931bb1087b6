"""The perf tools' own final lines, read back into figures.

Two formats, each printed the same way by Kafka's tool and by actorlog's (``ops/cli/perf.py``
copies Kafka's):

* ProducerPerformance (``kafka-producer-perf-test.sh``, ``actorlog perf produce``): the last line,
  ``N records sent, R records/sec (M MB/sec), A ms avg latency, X ms max latency, P50 ms 50th,
  P95 ms 95th, P99 ms 99th, P999 ms 99.9th.`` The progress lines printed every 5 s before it say
  ``records/sec`` too but carry no percentiles, so they never match. Kafka prints the percentiles as
  whole milliseconds (a cast, not a rounding); they are kept as printed.
* ConsumerPerformance (``kafka-consumer-perf-test.sh``, ``actorlog perf consume``): a header of
  comma-separated column names (``start.time, end.time, data.consumed.in.MB, MB.sec, ...``) and one
  line of values under it. Columns are found by name, so a column Kafka adds later does not shift
  the others. The rates used are ``fetch.nMsg.sec`` and ``fetch.MB.sec``: they leave out the
  consumer group's join (``rebalance.time.ms``), which actorlog's tool, having no group, never
  spends; Kafka's tool computes them over ``fetch.time.ms``.

A missing final line is ``None`` (the tool failed; its exit code and stderr say why); a header
followed by a line that does not fit it is a ``ValueError`` naming the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

__all__ = ["ConsumerSummary", "ProducerSummary", "parse_consumer_summary", "parse_producer_summary"]

_NUMBER: Final = r"[\d.]+(?:[eE][+-]?\d+)?"
_PRODUCER_FINAL: Final = re.compile(
    rf"^(?P<records>\d+) records sent, (?P<rate>{_NUMBER}) records/sec \((?P<mb>{_NUMBER}) MB/sec\), "
    rf"(?P<avg>{_NUMBER}) ms avg latency, (?P<max>{_NUMBER}) ms max latency, (?P<p50>\d+) ms 50th, "
    r"(?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99.9th\.$"
)
_CONSUMER_HEADER_START: Final = "start.time,"
_CONSUMER_COLUMNS: Final = ("data.consumed.in.MB", "data.consumed.in.nMsg", "fetch.MB.sec", "fetch.nMsg.sec")


@dataclass(frozen=True, slots=True)
class ProducerSummary:
    """ProducerPerformance's final line."""

    records: int
    records_per_s: float
    mb_per_s: float
    avg_latency_ms: float
    max_latency_ms: float
    p50_ms: int
    p95_ms: int
    p99_ms: int
    p999_ms: int
    line: str


def parse_producer_summary(stdout: str) -> ProducerSummary | None:
    """The last final line in ``stdout``; None when there is none."""
    for line in reversed(stdout.splitlines()):
        match = _PRODUCER_FINAL.match(line.strip())
        if match:
            return ProducerSummary(
                records=int(match["records"]),
                records_per_s=float(match["rate"]),
                mb_per_s=float(match["mb"]),
                avg_latency_ms=float(match["avg"]),
                max_latency_ms=float(match["max"]),
                p50_ms=int(match["p50"]),
                p95_ms=int(match["p95"]),
                p99_ms=int(match["p99"]),
                p999_ms=int(match["p999"]),
                line=line.strip(),
            )
    return None


@dataclass(frozen=True, slots=True)
class ConsumerSummary:
    """ConsumerPerformance's line, by column."""

    records: int
    megabytes: float
    records_per_s: float  # fetch.nMsg.sec
    mb_per_s: float  # fetch.MB.sec
    columns: dict[str, str]
    line: str


def parse_consumer_summary(stdout: str) -> ConsumerSummary | None:
    """The line under the last header in ``stdout``; None when there is no header or no line."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    headers = [index for index, line in enumerate(lines) if line.startswith(_CONSUMER_HEADER_START)]
    if not headers or headers[-1] + 1 >= len(lines):
        return None
    names = [name.strip() for name in lines[headers[-1]].split(",")]
    line = lines[headers[-1] + 1]
    values = [value.strip() for value in line.split(",")]
    if len(values) != len(names):
        raise ValueError(f"{len(values)} values under {len(names)} columns: {line!r}")
    columns = dict(zip(names, values, strict=True))
    missing = [name for name in _CONSUMER_COLUMNS if name not in columns]
    if missing:
        raise ValueError(f"no column {', '.join(missing)} in the header {lines[headers[-1]]!r}")
    try:
        return ConsumerSummary(
            records=int(columns["data.consumed.in.nMsg"]),
            megabytes=float(columns["data.consumed.in.MB"]),
            records_per_s=float(columns["fetch.nMsg.sec"]),
            mb_per_s=float(columns["fetch.MB.sec"]),
            columns=columns,
            line=line,
        )
    except ValueError as error:
        raise ValueError(f"not a ConsumerPerformance line ({error}): {line!r}") from None
