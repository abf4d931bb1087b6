"""The pure half of ``python -m ops.bench.scale``: reading broker counters, summing up, the table.

What it owns: which counters the idle phase reads from a broker's ``/metrics`` text and how two
scrapes become a per-broker difference; the p50/p99/max summary of per-partition times; the one
markdown table the benchmark prints. Nothing here does I/O, so all of it is unit-tested.

Rules kept:
* counters are read by sample name (Prometheus text keeps the ``_total`` suffix on samples) and
  summed over the labels not asked for, so a counter split by ``clientId``/``source_broker`` reads
  as one total; a counter missing from a scrape reads as None, never as 0, and so does any
  difference involving it (or a counter that went backwards: a restarted broker);
* a figure that could not be measured prints as ``n/a``; the table asserts nothing, the goal is
  only printed beside the figure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from prometheus_client.parser import text_string_to_metric_families

__all__ = [
    "COUNTERS",
    "Figure",
    "RunInfo",
    "Summary",
    "counter_values",
    "counters_used",
    "markdown_table",
    "per_second",
    "summarize",
]


@dataclass(frozen=True, slots=True)
class CounterSpec:
    """One counter sample name and the labels it must carry (others are summed over)."""

    sample: str
    labels: tuple[tuple[str, str], ...] = ()


COUNTERS: Final[Mapping[str, CounterSpec]] = {
    # Follower fetches this broker answered as a leader (the request metric by type).
    "follower_fetches_handled": CounterSpec(
        "kafka_network_requestmetrics_requests_total", (("request", "FetchFollower"),)
    ),
    # Fetch requests this broker's replica fetchers sent, every source broker together.
    "follower_fetches_sent": CounterSpec("kafka_server_fetcherstats_requests_total"),
    "isr_shrinks": CounterSpec("kafka_server_replicamanager_isrshrinks_total"),
    "isr_expands": CounterSpec("kafka_server_replicamanager_isrexpands_total"),
    "failed_isr_updates": CounterSpec("kafka_server_replicamanager_failedisrupdates_total"),
}


def counter_values(text: str, counters: Mapping[str, CounterSpec] = COUNTERS) -> dict[str, float | None]:
    """Name -> the counter's value in one ``/metrics`` scrape (None: not in the text)."""
    found: dict[str, float | None] = dict.fromkeys(counters)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            for name, spec in counters.items():
                if sample.name != spec.sample:
                    continue
                if all(sample.labels.get(key) == value for key, value in spec.labels):
                    found[name] = (found[name] or 0.0) + sample.value
    return found


def counters_used(
    before: Mapping[str, float | None], after: Mapping[str, float | None]
) -> dict[str, float | None]:
    """Name -> increase between two scrapes; None where either is missing or it went backwards."""
    used: dict[str, float | None] = {}
    for name in before.keys() | after.keys():
        start, end = before.get(name), after.get(name)
        used[name] = None if start is None or end is None or end < start else end - start
    return used


def per_second(amount: float | None, seconds: float) -> float | None:
    return None if amount is None or seconds <= 0 else amount / seconds


@dataclass(frozen=True, slots=True)
class Summary:
    count: int
    p50: float
    p99: float
    max: float


def summarize(values: Sequence[float]) -> Summary | None:
    """Nearest-rank p50/p99 and the maximum (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)

    def at(quantile: float) -> float:
        rank = max(1, -(-len(ordered) * quantile // 1))  # ceil(n * q), at least the first
        return ordered[int(rank) - 1]

    return Summary(count=len(ordered), p50=at(0.5), p99=at(0.99), max=ordered[-1])


@dataclass(frozen=True, slots=True)
class Figure:
    """One table row: what was measured, the value as printed, the issue's goal (or "—")."""

    name: str
    measured: str
    goal: str = "—"


@dataclass(frozen=True, slots=True)
class RunInfo:
    date: str  # ISO date and time, UTC
    command: str
    partitions: int
    session_timeout_ms: int
    load: str  # the machine's load averages at the start and the end


def fmt(value: float | None, unit: str = "", digits: int = 1) -> str:
    """``12.3 %``, ``250 ms``...; ``n/a`` for a figure that could not be measured."""
    if value is None:
        return "n/a"
    return f"{value:.{digits}f}{' ' + unit if unit else ''}"


def per_broker(values: Mapping[int, float | None], unit: str = "", digits: int = 1) -> str:
    """``broker 1: 3.2 %, broker 2: 3.0 %`` in broker order."""
    return ", ".join(f"broker {b}: {fmt(values[b], unit, digits)}" for b in sorted(values))


def markdown_table(info: RunInfo, figures: Sequence[Figure]) -> str:
    """The run's header lines, then one row per figure with the goal beside it."""
    lines = [
        f"Scale figures, {info.date}: `{info.command}`",
        f"{info.partitions} partitions, RF 3, min.insync.replicas=2, 3 broker processes, "
        f"zookeeper.session.timeout.ms={info.session_timeout_ms}; load average {info.load}",
        "",
        "| Figure | Measured | Goal |",
        "|---|---|---|",
    ]
    lines += [f"| {f.name} | {f.measured} | {f.goal} |" for f in figures]
    return "\n".join(lines)
