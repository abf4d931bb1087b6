"""The rollup's human outputs: the printed summary, PNG plots and one self-contained HTML page.

Everything here works on small lists of plain dicts that the job collected from the aggregated
tables (a row per window, per broker-window or per flapping partition), never on raw samples, and
imports no pyspark. Times arrive as epoch milliseconds (``window_start_ms``, ``last_cycle_ms``)
and are shown in UTC, so the output does not depend on the machine's time zone.

Plots use matplotlib's Agg backend (no display needed). The HTML page embeds the PNGs as data URIs
so that it stays readable when copied on its own; the PNG files are written next to it as well.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import matplotlib

# Before pyplot is first used: plots are files, never windows.
matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

__all__ = ["PLOTS", "FlappingPartition", "Summary", "summarise", "summary_lines", "write_report"]

Row = Mapping[str, Any]

PLOTS = ("isr_churn.png", "under_replicated.png", "propagation_delay.png", "flapping.png")

# Cluster-window columns summed over the whole run for the summary.
_TOTALS = (
    "isr_shrinks",
    "isr_expands",
    "failed_isr_updates",
    "propagations_written",
    "propagations_deferred",
    "propagations_forced",
    "leader_elections",
    "seconds_under_replicated",
    "seconds_under_min_isr",
    "bytes_in",
    "bytes_out",
)


@dataclass(frozen=True, slots=True)
class FlappingPartition:
    rank: int
    topic: str
    partition: int
    cycles: int
    last_cycle_ms: int
    mean_recovery_seconds: float


@dataclass(frozen=True, slots=True)
class Summary:
    brokers: tuple[str, ...]
    earliest_ms: int
    as_of_ms: int
    windows: tuple[tuple[str, int], ...]  # (label, complete windows)
    smallest_window: str
    totals: Mapping[str, float | None]
    max_offline_partitions: float | None
    max_pending_isr_changes: float | None
    flapping: tuple[FlappingPartition, ...]
    missing_metrics: tuple[str, ...]
    report_path: Path


def _sum(rows: Sequence[Row], column: str) -> float | None:
    values = [row[column] for row in rows if row.get(column) is not None]
    return float(sum(values)) if values else None


def _max(rows: Sequence[Row], column: str) -> float | None:
    values = [row[column] for row in rows if row.get(column) is not None]
    return float(max(values)) if values else None


def summarise(
    *,
    cluster_rows: Sequence[Row],
    flapping_rows: Sequence[Row],
    brokers: Sequence[str],
    earliest_ms: int,
    as_of_ms: int,
    windows: Sequence[tuple[str, int]],
    smallest_window: str,
    missing_metrics: Sequence[str],
    report_path: Path,
    top: int,
) -> Summary:
    """The run's headline numbers, over the complete windows of the smallest window size."""
    flapping = tuple(
        FlappingPartition(
            rank=int(row["rank"]),
            topic=str(row["topic"]),
            partition=int(row["partition"]) if row["partition"] is not None else -1,
            cycles=int(row["cycles"]),
            last_cycle_ms=int(row["last_cycle_ms"]),
            mean_recovery_seconds=float(row["mean_recovery_seconds"]),
        )
        for row in flapping_rows[:top]
    )
    return Summary(
        brokers=tuple(brokers),
        earliest_ms=earliest_ms,
        as_of_ms=as_of_ms,
        windows=tuple(windows),
        smallest_window=smallest_window,
        totals={column: _sum(cluster_rows, column) for column in _TOTALS},
        max_offline_partitions=_max(cluster_rows, "offline_partitions_max"),
        max_pending_isr_changes=_max(cluster_rows, "pending_isr_changes_max"),
        flapping=flapping,
        missing_metrics=tuple(missing_metrics),
        report_path=report_path,
    )


def _iso(ts_ms: int) -> str:
    return datetime.fromtimestamp(ts_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _number(value: float | None, unit: str = "") -> str:
    if value is None:
        return "n/a"
    text = f"{value:,.0f}" if float(value).is_integer() or abs(value) >= 100 else f"{value:,.2f}"
    return text + unit


def summary_lines(summary: Summary) -> list[str]:
    """The few lines a human reads after a run."""
    totals = summary.totals
    windows = ", ".join(f"{label} ({count:,} complete)" for label, count in summary.windows)
    lines = [
        f"rollup of {len(summary.brokers)} brokers ({', '.join(summary.brokers)}) "
        f"from {_iso(summary.earliest_ms)} to {_iso(summary.as_of_ms)}",
        f"windows: {windows}; totals below are over the complete {summary.smallest_window} windows",
        f"ISR: {_number(totals['isr_shrinks'])} shrinks, {_number(totals['isr_expands'])} expands, "
        f"{_number(totals['failed_isr_updates'])} failed updates",
        f"ISR change propagation: {_number(totals['propagations_written'])} written after 5 s of quiet, "
        f"{_number(totals['propagations_forced'])} forced by the 60 s bound, "
        f"{_number(totals['propagations_deferred'])} checks deferred by the black-out; "
        f"max {_number(summary.max_pending_isr_changes)} pending",
        f"partitions: max {_number(summary.max_offline_partitions)} offline, "
        f"{_number(totals['seconds_under_replicated'], ' s')} under-replicated and "
        f"{_number(totals['seconds_under_min_isr'], ' s')} under min ISR (partition-seconds), "
        f"{_number(totals['leader_elections'])} leader elections",
    ]
    if summary.flapping:
        ranked = ", ".join(
            f"{f.topic}-{f.partition} ({f.cycles} cycle{'' if f.cycles == 1 else 's'})"
            for f in summary.flapping
        )
        lines.append(f"top flapping partitions: {ranked}")
    else:
        lines.append("top flapping partitions: none")
    if summary.missing_metrics:
        lines.append(
            f"missing from the snapshots ({len(summary.missing_metrics)}): "
            + ", ".join(summary.missing_metrics[:5])
            + (" ..." if len(summary.missing_metrics) > 5 else "")
        )
    lines.append(f"report: {summary.report_path}")
    return lines


# --- plots ---------------------------------------------------------------------------------------


def _times(rows: Sequence[Row]) -> list[datetime]:
    return [datetime.fromtimestamp(row["window_start_ms"] / 1000, tz=UTC) for row in rows]


def _values(rows: Sequence[Row], column: str) -> list[float]:
    # matplotlib leaves a gap at NaN: a window without data shows as a gap, not as zero.
    return [float("nan") if row.get(column) is None else float(row[column]) for row in rows]


def _empty(figure: Figure, message: str) -> Figure:
    figure.text(0.5, 0.5, message, ha="center", va="center")
    return figure


def _time_axis(axis: Any) -> None:
    # The datetimes are UTC-aware and matplotlib's default display time zone is UTC.
    axis.grid(True, alpha=0.3)


def _isr_churn(broker_rows: Sequence[Row], window: str) -> Figure:
    figure, (shrinks, expands) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    figure.suptitle(f"ISR churn per broker ({window} windows, UTC)")
    if not broker_rows:
        return _empty(figure, "no complete windows")
    for broker in sorted({row["broker"] for row in broker_rows}):
        rows = [row for row in broker_rows if row["broker"] == broker]
        shrinks.plot(_times(rows), _values(rows, "isr_shrinks"), label=f"broker {broker}")
        expands.plot(_times(rows), _values(rows, "isr_expands"), label=f"broker {broker}")
    shrinks.set_ylabel("ISR shrinks")
    expands.set_ylabel("ISR expands")
    shrinks.legend(loc="upper right", fontsize="small")
    for axis in (shrinks, expands):
        _time_axis(axis)
    return figure


def _under_replicated(cluster_rows: Sequence[Row], window: str) -> Figure:
    figure, (urp, offline) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    figure.suptitle(f"Under-replicated and offline partitions ({window} windows, UTC)")
    if not cluster_rows:
        return _empty(figure, "no complete windows")
    times = _times(cluster_rows)
    urp.plot(times, _values(cluster_rows, "under_replicated_partitions_mean"), label="time-weighted mean")
    urp.plot(
        times, _values(cluster_rows, "under_replicated_partitions_max"), label="max (any broker)", alpha=0.6
    )
    urp.set_ylabel("under-replicated")
    urp.legend(loc="upper right", fontsize="small")
    offline.plot(times, _values(cluster_rows, "offline_partitions_max"), color="tab:red", label="max")
    offline.plot(times, _values(cluster_rows, "offline_partitions_mean"), color="tab:orange", label="mean")
    offline.set_ylabel("offline")
    offline.legend(loc="upper right", fontsize="small")
    for axis in (urp, offline):
        _time_axis(axis)
    return figure


def _propagation(cluster_rows: Sequence[Row], window: str) -> Figure:
    figure, (delay, outcomes) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    figure.suptitle(f"ISR change propagation ({window} windows, UTC)")
    if not cluster_rows:
        return _empty(figure, "no complete windows")
    times = _times(cluster_rows)
    delay.plot(times, _values(cluster_rows, "propagation_delay_p50"), label="p50")
    delay.plot(times, _values(cluster_rows, "propagation_delay_p99"), label="p99")
    delay.set_ylabel("delay (s)")
    delay.legend(loc="upper right", fontsize="small")
    for column, label in (
        ("propagations_written", "written (5 s quiet)"),
        ("propagations_forced", "forced (60 s bound)"),
        ("propagations_deferred", "deferred (black-out)"),
    ):
        outcomes.plot(times, _values(cluster_rows, column), label=label)
    outcomes.set_ylabel("checks per window")
    outcomes.legend(loc="upper right", fontsize="small")
    for axis in (delay, outcomes):
        _time_axis(axis)
    return figure


def _flapping(flapping_rows: Sequence[Row]) -> Figure:
    figure, axis = plt.subplots(figsize=(10, 4))
    figure.suptitle("Top flapping partitions (ISR shrink -> expand cycles)")
    if not flapping_rows:
        return _empty(figure, "no flapping partitions")
    rows = list(flapping_rows)[::-1]  # the top-ranked partition at the top of the chart
    axis.barh([f"{row['topic']}-{row['partition']}" for row in rows], [row["cycles"] for row in rows])
    axis.set_xlabel("cycles")
    return figure


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    return buffer.getvalue()


# --- HTML ----------------------------------------------------------------------------------------


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(cell))}</td>" for cell in row) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _broker_totals(broker_rows: Sequence[Row]) -> list[list[object]]:
    totals: list[list[object]] = []
    for broker in sorted({row["broker"] for row in broker_rows}):
        rows = [row for row in broker_rows if row["broker"] == broker]
        valid = sum(1 for row in rows if row["validity"] == "valid")
        totals.append(
            [
                broker,
                _number(_sum(rows, "isr_shrinks")),
                _number(_sum(rows, "isr_expands")),
                _number(_sum(rows, "failed_isr_updates")),
                f"{valid}/{len(rows)}",
            ]
        )
    return totals


_STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; }
th { background: #f3f3f3; }
img { max-width: 100%; border: 1px solid #eee; margin: 0.5em 0; }
"""


def write_report(
    directory: Path,
    summary: Summary,
    cluster_rows: Sequence[Row],
    broker_rows: Sequence[Row],
    flapping_rows: Sequence[Row],
) -> Path:
    """Write the PNGs and ``index.html`` into ``directory``; returns the page's path."""
    directory.mkdir(parents=True, exist_ok=True)
    window = summary.smallest_window
    figures = {
        "isr_churn.png": _isr_churn(broker_rows, window),
        "under_replicated.png": _under_replicated(cluster_rows, window),
        "propagation_delay.png": _propagation(cluster_rows, window),
        "flapping.png": _flapping(flapping_rows[: len(summary.flapping) or 10]),
    }
    images: list[str] = []
    for name, figure in figures.items():
        png = _png(figure)
        (directory / name).write_bytes(png)
        encoded = base64.b64encode(png).decode("ascii")
        title = html.escape(name)
        images.append(f'<h3>{title}</h3><img alt="{title}" src="data:image/png;base64,{encoded}">')
    flapping_table = _table(
        ["rank", "partition", "cycles", "last cycle (UTC)", "mean recovery (s)"],
        [
            [
                f.rank,
                f"{f.topic}-{f.partition}",
                f.cycles,
                _iso(f.last_cycle_ms),
                f"{f.mean_recovery_seconds:.1f}",
            ]
            for f in summary.flapping
        ],
    )
    brokers_table = _table(
        ["broker", "ISR shrinks", "ISR expands", "failed ISR updates", "valid windows"],
        _broker_totals(broker_rows),
    )
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>actorlog rollup</title><style>{_STYLE}</style></head>
<body>
<h1>actorlog rollup</h1>
<ul>{"".join(f"<li>{html.escape(line)}</li>" for line in summary_lines(summary)[:-1])}</ul>
<h2>Brokers ({html.escape(window)} windows)</h2>
{brokers_table}
<h2>Top flapping partitions</h2>
{flapping_table if summary.flapping else "<p>No ISR shrink was undone within the flap span.</p>"}
<h2>Plots</h2>
{"".join(images)}
</body></html>
"""
    path = directory / "index.html"
    path.write_text(page, encoding="utf-8")
    return path
