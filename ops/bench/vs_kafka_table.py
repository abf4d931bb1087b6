"""The side-by-side table of ``make bench-vs-kafka``: its rows, its markdown and its JSON.

One ``Row`` is one tool run against one cluster on one workload: the figures the tool printed on
its final line (``ops/bench/perf_lines.py``) and the CPU seconds each process spent during the run
(``ops/bench/proc_cpu.py``). The table shows, per row:

* records, records/s, MB/s (MB as the tools count it, 1024 x 1024 bytes);
* ``vs Kafka``: records/s as a share of the baseline system's row for the same workload and the
  same kind (produce against Kafka's ProducerPerformance, consume against its
  ConsumerPerformance), so actorlog's goal ("at least half of Apache Kafka's throughput") reads
  directly;
* avg, p50, p99 and max latency in ms as the producer tool printed them (a consumer has none: -);
* CPU seconds per million records for the client, each broker, ZooKeeper, and their total.

A failed run stays in the table with its figures missing ("failed") and its reason listed under
the table, so a partial run still says what it measured. The markdown starts with the date, the
command and the machine, since a figure means nothing without them; the JSON holds the same and
every row's raw final line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ops.bench.proc_cpu import per_million

__all__ = ["PROCESSES", "Row", "RunInfo", "markdown_table", "render_markdown", "to_json", "versus"]

PROCESSES: Final = ("client", "broker 1", "broker 2", "broker 3", "ZooKeeper")
"""The processes charged, in column order (broker ids 1-3 in both clusters)."""
_MISSING: Final = "-"


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    workload: str
    system: str
    tool: str
    kind: Literal["produce", "consume"]
    records: int = 0
    records_per_s: float | None = None
    mb_per_s: float | None = None
    avg_ms: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    max_ms: float | None = None
    cpu_s: Mapping[str, float | None] = field(default_factory=dict)
    line: str = ""
    error: str | None = None

    def cpu_per_million(self, process: str) -> float | None:
        return per_million(self.cpu_s.get(process), self.records)

    def total_cpu_per_million(self) -> float | None:
        """All processes together; None unless every one of them was measured."""
        figures = [self.cpu_per_million(process) for process in PROCESSES]
        if any(figure is None for figure in figures):
            return None
        return sum(figure for figure in figures if figure is not None)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunInfo:
    date: str  # UTC, ISO 8601
    command: str
    machine: str
    software: str
    baseline: str  # the system the "vs" column divides by
    workloads: Mapping[str, str]  # name -> what it is
    notes: Sequence[str] = ()
    elapsed_s: float | None = None


def versus(row: Row, rows: Sequence[Row], baseline: str) -> float | None:
    """``row``'s records/s over the baseline's for the same workload and kind; None for the
    baseline's own rows and where either figure is missing."""
    if row.system == baseline or row.records_per_s is None:
        return None
    for other in rows:
        if (
            other.system == baseline
            and other.workload == row.workload
            and other.kind == row.kind
            and other.records_per_s
        ):
            return row.records_per_s / other.records_per_s
    return None


def _figure(value: float | None, digits: int) -> str:
    return _MISSING if value is None else f"{value:,.{digits}f}"


_HEADER: Final = (
    "workload", "system", "tool", "records", "records/s", "MB/s", "vs Kafka",
    "avg ms", "p50 ms", "p99 ms", "max ms",
    *(f"CPU {process}" for process in PROCESSES), "CPU total",
)  # fmt: skip


def markdown_table(rows: Sequence[Row], baseline: str) -> str:
    lines = [
        "| " + " | ".join(_HEADER) + " |",
        "|" + "|".join("---" if index < 3 else "---:" for index in range(len(_HEADER))) + "|",
    ]
    for row in rows:
        ratio = versus(row, rows, baseline)
        cells = [
            row.workload,
            row.system,
            row.tool,
            f"{row.records:,}",
            "failed" if row.error else _figure(row.records_per_s, 0),
            _figure(row.mb_per_s, 2),
            _MISSING if ratio is None else f"{ratio * 100:.0f} %",
            _figure(row.avg_ms, 2),
            _figure(row.p50_ms, 0),
            _figure(row.p99_ms, 0),
            _figure(row.max_ms, 1),
            *(_figure(row.cpu_per_million(process), 1) for process in PROCESSES),
            _figure(row.total_cpu_per_million(), 1),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render_markdown(rows: Sequence[Row], info: RunInfo) -> str:
    lines = [
        f"## actorlog beside {info.baseline}, {info.date}",
        "",
        f"Command: `{info.command}`",
        "",
        f"Machine: {info.machine}",
        "",
        f"Software: {info.software}",
        "",
        "Workloads:",
        "",
        *(f"* `{name}`: {description}" for name, description in info.workloads.items()),
        "",
        markdown_table(rows, info.baseline),
        "",
        "CPU columns: CPU seconds (user + system, from /proc/PID/stat) per million records, per "
        "process, during the run; the client's include its start-up. Latencies are the producer "
        "tool's own (whole milliseconds for the percentiles, as Kafka prints them).",
        "",
    ]
    lines += [f"* {note}" for note in info.notes]
    failures = [row for row in rows if row.error]
    if failures:
        lines += ["", "Failed runs:", ""]
        lines += [f"* {row.workload}, {row.system}, {row.tool}: {row.error}" for row in failures]
    if info.elapsed_s is not None:
        lines += ["", f"The whole run took {info.elapsed_s:.0f} s."]
    return "\n".join(lines) + "\n"


def to_json(rows: Sequence[Row], info: RunInfo) -> dict[str, Any]:
    return {
        "date": info.date,
        "command": info.command,
        "machine": info.machine,
        "software": info.software,
        "baseline": info.baseline,
        "workloads": dict(info.workloads),
        "notes": list(info.notes),
        "elapsed_s": info.elapsed_s,
        "rows": [
            {
                "workload": row.workload,
                "system": row.system,
                "tool": row.tool,
                "kind": row.kind,
                "records": row.records,
                "records_per_s": row.records_per_s,
                "mb_per_s": row.mb_per_s,
                "versus_baseline": versus(row, rows, info.baseline),
                "avg_ms": row.avg_ms,
                "p50_ms": row.p50_ms,
                "p99_ms": row.p99_ms,
                "max_ms": row.max_ms,
                "cpu_s": dict(row.cpu_s),
                "cpu_s_per_million_records": {process: row.cpu_per_million(process) for process in PROCESSES},
                "cpu_s_per_million_records_total": row.total_cpu_per_million(),
                "line": row.line,
                "error": row.error,
            }
            for row in rows
        ],
    }
