"""The rollup's human outputs: the printed summary, PNG plots and one self-contained HTML page.

Everything here works on small lists of plain dicts that the job collected from the aggregated
tables (a row per window, per broker-window or per flapping partition; from the brokers' ISR
state-change events, a row per ISR interval, incident, propagated change or fault event), never on
raw samples, and imports no pyspark. Times arrive as epoch milliseconds (``window_start_ms``,
``last_cycle_ms``, ``start_ms``, ``ts_ms``) and are shown in UTC, so the output does not depend on
the machine's time zone.

The page: the summary; the ISR incidents (a table) and an ISR timeline (a lane per partition coloured
by its ISR state, incidents shaded, faults marked); a histogram of ISR change propagation delays
against Kafka's 5 s black-out and 60 s bound; the window totals as step plots (a window's value holds
for the window's length); the per-broker and flapping tables. Every figure has a title and a caption
saying how to read it. Without state-change events (snapshot directories from before brokers recorded
them) the event sections say so in a sentence and the rest is unchanged.

Plots use matplotlib's Agg backend (no display needed). The HTML page embeds the PNGs as data URIs
so that it stays readable when copied on its own; the PNG files are written next to it as well.
"""

from __future__ import annotations

import base64
import html
import io
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import matplotlib

# Before pyplot is first used: plots are files, never windows.
matplotlib.use("Agg")

import matplotlib.dates as mdates
import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from ops.snapshots import parse_duration_ms

__all__ = [
    "EVENT_PLOTS",
    "INCIDENT_HEADERS",
    "PLOTS",
    "FlappingPartition",
    "Summary",
    "delay_values",
    "duration_text",
    "fault_events",
    "format_number",
    "incident_rows",
    "interval_state",
    "partition_name",
    "step_series",
    "summarise",
    "summary_lines",
    "timeline_lanes",
    "window_ms",
    "write_report",
]

Row = Mapping[str, Any]

# Always written: the window totals and the flapping partitions.
PLOTS = ("isr_churn.png", "under_replicated.png", "propagation_delay.png", "flapping.png")
# Written when there are state-change rows to draw them from.
EVENT_PLOTS = ("isr_timeline.png", "propagation_histogram.png")

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


def format_number(value: float | None, unit: str = "", *, decimals: int = 2) -> str:
    """A number as the summaries print it: whole or large ones without decimals, ``n/a`` unknown."""
    if value is None:
        return "n/a"
    text = f"{value:,.0f}" if float(value).is_integer() or abs(value) >= 100 else f"{value:,.{decimals}f}"
    return text + unit


def summary_lines(summary: Summary) -> list[str]:
    """The few lines a human reads after a run."""
    totals = summary.totals
    windows = ", ".join(f"{label} ({count:,} complete)" for label, count in summary.windows)
    lines = [
        f"rollup of {len(summary.brokers)} brokers ({', '.join(summary.brokers)}) "
        f"from {_iso(summary.earliest_ms)} to {_iso(summary.as_of_ms)}",
        f"windows: {windows}; totals below are over the complete {summary.smallest_window} windows",
        f"ISR: {format_number(totals['isr_shrinks'])} shrinks, "
        f"{format_number(totals['isr_expands'])} expands, "
        f"{format_number(totals['failed_isr_updates'])} failed updates",
        "ISR change propagation: "
        f"{format_number(totals['propagations_written'])} written after 5 s of quiet, "
        f"{format_number(totals['propagations_forced'])} forced by the 60 s bound, "
        f"{format_number(totals['propagations_deferred'])} checks deferred by the black-out; "
        f"max {format_number(summary.max_pending_isr_changes)} pending",
        f"partitions: max {format_number(summary.max_offline_partitions)} offline, "
        f"{format_number(totals['seconds_under_replicated'], ' s')} under-replicated and "
        f"{format_number(totals['seconds_under_min_isr'], ' s')} under min ISR (partition-seconds), "
        f"{format_number(totals['leader_elections'])} leader elections",
    ]
    if summary.flapping:
        ranked = ", ".join(
            f"{partition_name(f.topic, f.partition)} ({f.cycles} cycle{'' if f.cycles == 1 else 's'})"
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

# Colours of an ISR interval's state (the timeline's bars) and of what is drawn over them.
_STATE_COLOURS = {
    "full": "#59a14f",
    "under_replicated": "#f28e2b",
    "under_min_isr": "#e15759",
    "no_leader": "#3b3b3b",
}
_STATE_LABELS = {
    "full": "full ISR (every replica in sync)",
    "under_replicated": "under-replicated",
    "under_min_isr": "under min ISR",
    "no_leader": "no leader",
}
_INCIDENT_COLOUR = "#4e79a7"
# Fault events drawn on the timeline: (kind, reason or None for any) -> legend label, colour, style.
_FAULTS: dict[tuple[str, str | None], tuple[str, str, Any]] = {
    ("controller_isr_shrink", None): ("broker went down (controller shrank ISRs)", "#000000", "--"),
    ("leader_election", "broker_down"): ("leader elected: leader's broker down", "#1f5fa8", "-"),
    ("leader_election", "controlled_shutdown"): ("leader moved: controlled shutdown", "#17a2a2", "-."),
    ("leader_election", "unclean"): ("unclean leader election", "#b5179e", "-"),
    ("isr_shrink", "fetch_stopped"): ("follower stopped fetching (ISR shrink)", "#8c564b", ":"),
}
TIMELINE_LANES = 40
BLACK_OUT_SECONDS = 5.0
MAX_DELAY_SECONDS = 60.0


def _utc(ts_ms: float) -> datetime:
    return datetime.fromtimestamp(ts_ms / 1000, tz=UTC)


def _day(ts_ms: float) -> float:
    """Epoch milliseconds as a matplotlib date number (days since ``date.epoch``, 1970 by default)."""
    return float(mdates.date2num(_utc(ts_ms)))  # type: ignore[no-untyped-call]


def _empty(figure: Figure, message: str) -> Figure:
    figure.text(0.5, 0.5, message, ha="center", va="center")
    return figure


def _time_axis(axis: Any) -> None:
    # The datetimes are UTC-aware and matplotlib's default display time zone is UTC.
    locator = mdates.AutoDateLocator()  # type: ignore[no-untyped-call]
    axis.xaxis.set_major_locator(locator)
    axis.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=UTC))  # type: ignore[no-untyped-call]
    axis.grid(True, alpha=0.3)


def window_ms(label: str, rows: Sequence[Row]) -> int:
    """The window length: from its label (``1m``), else the smallest step between window starts."""
    try:
        return parse_duration_ms(label)
    except ValueError:
        starts = sorted({int(row["window_start_ms"]) for row in rows})
        steps = [b - a for a, b in itertools.pairwise(starts)]
        return min(steps) if steps else 60_000


def step_series(rows: Sequence[Row], column: str, length_ms: int) -> tuple[list[datetime], list[float]]:
    """Points for ``drawstyle="steps-post"``: each window's value held from its start to its end.

    Rows are ordered by ``window_start_ms``. A missing value is NaN, and a point with NaN closes the
    last window and every window not followed by the next one, so a gap shows as a gap, not as a
    value held across it.
    """
    times: list[datetime] = []
    values: list[float] = []
    for index, row in enumerate(rows):
        start = int(row["window_start_ms"])
        value = row.get(column)
        times.append(_utc(start))
        values.append(float("nan") if value is None else float(value))
        following = int(rows[index + 1]["window_start_ms"]) if index + 1 < len(rows) else None
        if following is None or following > start + length_ms:
            times.append(_utc(start + length_ms))
            values.append(float("nan"))
    return times, values


def _step(axis: Any, rows: Sequence[Row], column: str, length_ms: int, **style: Any) -> None:
    times, values = step_series(rows, column, length_ms)
    axis.plot(times, values, drawstyle="steps-post", **style)


def _isr_churn(broker_rows: Sequence[Row], length_ms: int) -> Figure:
    figure, (shrinks, expands) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    if not broker_rows:
        return _empty(figure, "no complete windows")
    for broker in sorted({row["broker"] for row in broker_rows}):
        rows = [row for row in broker_rows if row["broker"] == broker]
        _step(shrinks, rows, "isr_shrinks", length_ms, label=f"broker {broker}")
        _step(expands, rows, "isr_expands", length_ms, label=f"broker {broker}")
    shrinks.set_ylabel("ISR shrinks per window")
    expands.set_ylabel("ISR expands per window")
    shrinks.legend(loc="upper right", fontsize="small")
    for axis in (shrinks, expands):
        _time_axis(axis)
        axis.set_ylim(bottom=0)
    expands.set_xlabel("time (UTC)")
    return figure


_UNDER: Mapping[str, Any] = {"linewidth": 4, "alpha": 0.35}


def _under_replicated(cluster_rows: Sequence[Row], length_ms: int) -> Figure:
    figure, (urp, offline) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    if not cluster_rows:
        return _empty(figure, "no complete windows")
    # The max is drawn wide and pale under the mean, so both show where they are equal.
    _step(urp, cluster_rows, "under_replicated_partitions_max", length_ms, label="max (any broker)", **_UNDER)
    _step(urp, cluster_rows, "under_replicated_partitions_mean", length_ms, label="time-weighted mean")
    urp.set_ylabel("under-replicated partitions")
    urp.legend(loc="upper right", fontsize="small")
    _step(offline, cluster_rows, "offline_partitions_max", length_ms, color="tab:red", label="max", **_UNDER)
    _step(offline, cluster_rows, "offline_partitions_mean", length_ms, color="tab:red", label="mean")
    offline.set_ylabel("offline partitions")
    offline.legend(loc="upper right", fontsize="small")
    for axis in (urp, offline):
        _time_axis(axis)
        axis.set_ylim(bottom=0)
    offline.set_xlabel("time (UTC)")
    return figure


def _propagation(cluster_rows: Sequence[Row], length_ms: int) -> Figure:
    figure, (delay, outcomes) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    if not cluster_rows:
        return _empty(figure, "no complete windows")
    _step(delay, cluster_rows, "propagation_delay_p50", length_ms, label="median")
    _step(delay, cluster_rows, "propagation_delay_p99", length_ms, label="99th percentile")
    delay.set_ylabel("delay (s)")
    delay.legend(loc="upper right", fontsize="small")
    for column, label in (
        ("propagations_written", "written (5 s quiet)"),
        ("propagations_forced", "forced (60 s bound)"),
        ("propagations_deferred", "deferred (black-out)"),
    ):
        _step(outcomes, cluster_rows, column, length_ms, label=label)
    outcomes.set_ylabel("checks per window")
    outcomes.legend(loc="upper right", fontsize="small")
    for axis in (delay, outcomes):
        _time_axis(axis)
        axis.set_ylim(bottom=0)
    outcomes.set_xlabel("time (UTC)")
    return figure


def _flapping(flapping_rows: Sequence[Row]) -> Figure:
    figure, axis = plt.subplots(figsize=(10, max(2.5, 0.6 + 0.3 * len(flapping_rows))))
    if not flapping_rows:
        return _empty(figure, "no flapping partitions")
    rows = list(flapping_rows)[::-1]  # the top-ranked partition at the top of the chart
    axis.barh(
        [partition_name(row["topic"], row["partition"]) for row in rows],
        [row["cycles"] for row in rows],
        height=0.6,
    )
    axis.set_xlabel("ISR shrink -> expand cycles")
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.set_axisbelow(True)
    axis.grid(True, axis="x", alpha=0.3)
    return figure


def partition_name(topic: str, partition: int | None) -> str:
    """``topic-partition``; a whole topic's rows (snapshots without the partition label,
    ``transforms.TOPIC_PARTITION``) by the topic's name and "(topic)"."""
    if partition is None or partition < 0:
        return f"{topic} (topic)"
    return f"{topic}-{partition}"


def _lane(row: Row) -> tuple[str, int]:
    return str(row["topic"]), int(row["partition"])


def interval_state(row: Row) -> str:
    """``no_leader``, ``under_min_isr``, ``under_replicated`` or ``full``: the worst that applies
    (an unknown leader, replica list or min ISR counts as neither)."""
    if row.get("leader") is not None and int(row["leader"]) < 0:
        return "no_leader"
    if row.get("under_min_isr"):
        return "under_min_isr"
    if row.get("under_replicated"):
        return "under_replicated"
    return "full"


def timeline_lanes(intervals: Sequence[Row], limit: int = TIMELINE_LANES) -> list[tuple[str, int]]:
    """The partitions the timeline shows: at most ``limit``, those with the most under-replicated
    time first (ties by name), then listed in topic and partition order."""
    seconds: dict[tuple[str, int], float] = {}
    for row in intervals:
        lane = _lane(row)
        seconds.setdefault(lane, 0.0)
        if interval_state(row) != "full":
            seconds[lane] += max(0, int(row["end_ms"]) - int(row["start_ms"])) / 1000
    ranked = sorted(seconds, key=lambda lane: (-seconds[lane], lane))
    return sorted(ranked[:limit])


def fault_events(state_changes: Sequence[Row]) -> list[tuple[int, tuple[str, str | None]]]:
    """The faults to mark: ``(ts_ms, fault key)``, one per fault kind and second (a broker's death
    shrinks many partitions' ISRs at once, and several brokers may record the same election)."""
    seen: dict[tuple[int, tuple[str, str | None]], int] = {}
    for row in state_changes:
        kind, reason = str(row["kind"]), row.get("reason")
        key: tuple[str, str | None]
        if (kind, None) in _FAULTS:
            key = (kind, None)
        elif (kind, reason) in _FAULTS:
            key = (kind, reason)
        else:
            continue
        ts_ms = int(row["ts_ms"])
        seen.setdefault((ts_ms // 1000, key), ts_ms)
    return sorted((ts_ms, key) for (_, key), ts_ms in seen.items())


def _isr_timeline(
    intervals: Sequence[Row],
    incidents: Sequence[Row],
    state_changes: Sequence[Row],
    lanes: Sequence[tuple[str, int]],
) -> Figure:
    height = 1.9 + 0.26 * (len(lanes) + (1 if incidents else 0))
    figure, axis = plt.subplots(figsize=(12, height))
    index = {lane: position for position, lane in enumerate(reversed(lanes))}
    shown = [row for row in intervals if _lane(row) in index]
    first = min(int(row["start_ms"]) for row in shown)
    last = max(max(int(row["end_ms"]), int(row["start_ms"])) for row in shown)
    span_days = max(last - first, 1) / 86_400_000

    bars: dict[tuple[int, str], list[tuple[float, float]]] = {}
    labels: list[tuple[float, int, str]] = []
    for row in shown:
        start = _day(int(row["start_ms"]))
        width = max(int(row["end_ms"]) - int(row["start_ms"]), 0) / 86_400_000
        position = index[_lane(row)]
        bars.setdefault((position, interval_state(row)), []).append((start, width))
        if width >= 0.04 * span_days:
            replicas = row.get("replicas")
            size = len(row.get("isr") or [])
            text = f"{size}/{len(replicas)}" if replicas else str(size)
            labels.append((start + width / 2, position, text))
    for (position, state), spans in bars.items():
        axis.broken_barh(
            spans, (position - 0.38, 0.76), facecolors=_STATE_COLOURS[state], edgecolor="none", zorder=2
        )
    if len(labels) <= 400:
        for x, position, text in labels:
            axis.text(x, position, text, ha="center", va="center", fontsize=6, color="white", zorder=3)

    # Incidents: a lane of their own above the partitions, and a faint band across all lanes.
    top = len(lanes)
    for row in incidents:
        start = _day(int(row["start_ms"]))
        end = _day(max(int(row["end_ms"]), int(row["start_ms"])))
        axis.axvspan(start, end, color=_INCIDENT_COLOUR, alpha=0.13, zorder=1, lw=0)
        axis.broken_barh([(start, end - start)], (top - 0.38, 0.76), facecolors=_INCIDENT_COLOUR, zorder=2)
        wide = end - start >= 0.03 * span_days
        axis.text(
            (start + end) / 2 if wide else end,
            top,
            f"#{row['incident']}" if wide else f" #{row['incident']}",
            ha="center" if wide else "left",
            va="center",
            fontsize=7,
            color="white" if wide else _INCIDENT_COLOUR,
            zorder=3,
        )
    drawn: set[tuple[str, str | None]] = set()
    for ts_ms, key in fault_events(state_changes):
        _, colour, style = _FAULTS[key]
        axis.axvline(_day(ts_ms), color=colour, linestyle=style, linewidth=1.1, alpha=0.85, zorder=4)
        drawn.add(key)

    names = [f"{topic}-{partition}" for topic, partition in reversed(lanes)]
    if incidents:
        axis.axhline(top - 0.5, color="#999999", linewidth=0.8)
        axis.set_yticks(range(len(lanes) + 1), [*names, "incidents"])
    else:
        axis.set_yticks(range(len(lanes)), names)
    axis.tick_params(axis="y", labelsize=7 if len(lanes) > 20 else 9)
    axis.set_ylim(-0.6, (len(lanes) if incidents else len(lanes) - 1) + 0.6)
    axis.set_xlim(_day(first), _day(last))
    _time_axis(axis)
    axis.grid(True, axis="x", alpha=0.3)
    axis.grid(False, axis="y")
    axis.set_xlabel("time (UTC)")

    handles: list[Any] = [
        Patch(facecolor=_STATE_COLOURS[state], label=_STATE_LABELS[state])
        for state in ("full", "under_replicated", "under_min_isr", "no_leader")
    ]
    if incidents:
        handles.append(Patch(facecolor=_INCIDENT_COLOUR, label="incident (numbered as in the table)"))
    handles.extend(
        Line2D([], [], color=colour, linestyle=style, label=label)
        for key, (label, colour, style) in _FAULTS.items()
        if key in drawn
    )
    axis.legend(
        handles=handles,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        fontsize="small",
        frameon=False,
        borderaxespad=0,
    )
    return figure


def delay_values(propagation_delays: Sequence[Row]) -> dict[str, list[float]]:
    """Propagation delays in seconds by outcome (``written``, ``forced``, ``other``); rows without a
    delay (not propagated before the data ended) are left out."""
    values: dict[str, list[float]] = {"written": [], "forced": [], "other": []}
    for row in propagation_delays:
        if row.get("delay_seconds") is None:
            continue
        outcome = row.get("outcome")
        values[outcome if outcome in ("written", "forced") else "other"].append(float(row["delay_seconds"]))
    return values


def _delay_histogram(values: Mapping[str, list[float]]) -> Figure:
    figure, axis = plt.subplots(figsize=(10, 4.2))
    every = [value for group in values.values() for value in group]
    highest = max(max(every), MAX_DELAY_SECONDS + 5)
    width = max(1.0, math.ceil(highest / 150))
    edges = [width * step for step in range(math.ceil(highest / width) + 2)]
    groups = [
        (values["written"], "written after 5 s of quiet", "#59a14f"),
        (values["forced"], "forced by the 60 s bound", "#e15759"),
        (values["other"], "outcome unknown", "#bab0ac"),
    ]
    present = [group for group in groups if group[0]]
    axis.hist(
        [group[0] for group in present],
        bins=edges,
        stacked=True,
        color=[group[2] for group in present],
        label=[group[1] for group in present],
    )
    axis.axvline(BLACK_OUT_SECONDS, color="#000000", linestyle="--", linewidth=1.2, label="5 s black-out")
    axis.axvline(MAX_DELAY_SECONDS, color="#b5179e", linestyle="-", linewidth=1.2, label="60 s maximum delay")
    # Each label inside the band between the lines: right of the 5 s line, left of the 60 s line.
    for x, text, side in (
        (BLACK_OUT_SECONDS, "5 s black-out", "left"),
        (MAX_DELAY_SECONDS, "60 s maximum delay", "right"),
    ):
        axis.annotate(
            text,
            xy=(x, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(3 if side == "left" else -3, -3),
            textcoords="offset points",
            ha=side,
            va="top",
            fontsize=8,
        )
    axis.set_xlim(0, edges[-1])
    axis.set_xlabel("delay from the ISR change to its ZooKeeper notification (s)")
    axis.set_ylabel("ISR changes")
    axis.grid(True, axis="y", alpha=0.3)
    axis.legend(
        loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False, borderaxespad=0
    )
    return figure


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=100, bbox_inches="tight", pad_inches=0.15)
    plt.close(figure)
    return buffer.getvalue()


# --- text helpers --------------------------------------------------------------------------------


def duration_text(seconds: float) -> str:
    """``12.5 s``, ``4 min 05 s``, ``2 h 03 min``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 3600:
        return f"{whole // 60} min {whole % 60:02d} s"
    return f"{whole // 3600} h {whole % 3600 // 60:02d} min"


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def _shortlist(items: Sequence[object], limit: int) -> str:
    text = ", ".join(str(item) for item in items[:limit])
    return text + (f" (+{len(items) - limit} more)" if len(items) > limit else "")


def incident_rows(incidents: Sequence[Row]) -> list[list[str]]:
    """The incident table's cells, in start order."""
    rows = []
    for row in sorted(incidents, key=lambda r: (int(r["start_ms"]), int(r["incident"]))):
        partitions = list(row.get("partitions") or [])
        count = int(row.get("partition_count") or len(partitions))
        rows.append(
            [
                str(row["incident"]),
                _iso(int(row["start_ms"])),
                "open at the end of the data" if row.get("open") else _iso(int(row["end_ms"])),
                duration_text(float(row["duration_seconds"])) + (" so far" if row.get("open") else ""),
                f"{count}: {_shortlist(partitions, 6)}" if partitions else str(count),
                ", ".join(str(b) for b in sorted(row.get("replicas_out") or [])) or "none",
                ", ".join(sorted(row.get("reasons") or [])) or "unknown",
                duration_text(float(row.get("under_min_isr_seconds") or 0.0)),
            ]
        )
    return rows


INCIDENT_HEADERS = (
    "#",
    "start (UTC)",
    "end (UTC)",
    "duration",
    "partitions",
    "replicas out",
    "reasons",
    "under min ISR (partition time)",
)


# --- HTML ----------------------------------------------------------------------------------------


def _table(
    headers: Sequence[str],
    rows: Sequence[Sequence[object]],
    *,
    table_id: str | None = None,
    text_columns: Sequence[int] = (),
    nowrap_columns: Sequence[int] = (),
) -> str:
    """A table: numbers right-aligned, text columns left-aligned, nowrap columns never wrapped."""

    def cell(tag: str, column: int, value: object) -> str:
        classes = [
            name
            for name, columns in (("text", text_columns), ("nowrap", nowrap_columns))
            if column in columns
        ]
        css = f' class="{" ".join(classes)}"' if classes else ""
        return f"<{tag}{css}>{html.escape(str(value))}</{tag}>"

    head = "".join(cell("th", column, h) for column, h in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(cell("td", column, value) for column, value in enumerate(row)) + "</tr>"
        for row in rows
    )
    ident = f' id="{html.escape(table_id)}"' if table_id else ""
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _broker_totals(broker_rows: Sequence[Row]) -> list[list[object]]:
    totals: list[list[object]] = []
    for broker in sorted({row["broker"] for row in broker_rows}):
        rows = [row for row in broker_rows if row["broker"] == broker]
        valid = sum(1 for row in rows if row["validity"] == "valid")
        totals.append(
            [
                broker,
                format_number(_sum(rows, "isr_shrinks")),
                format_number(_sum(rows, "isr_expands")),
                format_number(_sum(rows, "failed_isr_updates")),
                f"{valid}/{len(rows)}",
            ]
        )
    return totals


@dataclass(frozen=True, slots=True)
class _Plot:
    name: str  # the PNG's file name
    title: str
    caption: str
    png: bytes

    def html(self) -> str:
        encoded = base64.b64encode(self.png).decode("ascii")
        title = html.escape(self.title)
        return (
            f'<figure id="{html.escape(self.name.removesuffix(".png"))}"><h3>{title}</h3>'
            f'<img alt="{title}" src="data:image/png;base64,{encoded}">'
            f"<figcaption>{html.escape(self.caption)} "
            f'<span class="file">({html.escape(self.name)})</span></figcaption></figure>'
        )


_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; padding: 1.5em 2em;
  max-width: 1250px; color: #222; line-height: 1.45; }
h1 { margin-bottom: 0.2em; }
h2 { margin-top: 2em; border-bottom: 1px solid #ddd; padding-bottom: 0.2em; }
h3 { margin: 0.2em 0; font-size: 1.05em; }
nav { display: flex; flex-wrap: wrap; gap: 0.4em 1.4em; }
ul.summary li { margin: 0.15em 0; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.92em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; vertical-align: top; }
th.text, td.text { text-align: left; }
td.nowrap { white-space: nowrap; }
th { background: #f3f3f3; }
tbody tr:nth-child(even) { background: #fafafa; }
figure { margin: 1.5em 0; }
img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #444; font-size: 0.92em; max-width: 75em; }
.file { color: #999; }
p.note { color: #555; font-style: italic; }
"""

NO_EVENTS = (
    "No ISR state-change events were found for this run (snapshot directories written before brokers "
    "recorded them), so there is no {what}."
)


def _isr_section(
    intervals: Sequence[Row], incidents: Sequence[Row], state_changes: Sequence[Row], has_events: bool
) -> tuple[str, list[_Plot]]:
    if not intervals:
        what = "ISR timeline"
        note = NO_EVENTS.format(what=what) if not has_events else "No ISR intervals to draw."
        return f'<p class="note">{html.escape(note)}</p>', []
    partitions = {_lane(row) for row in intervals}
    lanes = timeline_lanes(intervals)
    under = sum(
        max(0, int(r["end_ms"]) - int(r["start_ms"])) for r in intervals if interval_state(r) != "full"
    )
    faults = fault_events(state_changes)
    if len(lanes) < len(partitions):
        which = (
            f"Showing the {len(lanes)} of {len(partitions)} partitions with the most under-replicated "
            "(or leaderless) time, in topic and partition order; the other partitions are left out."
        )
    else:
        which = f"All {len(partitions)} partitions, in topic and partition order."
    caption = (
        "Each lane is one partition (topic-partition); time runs left to right in UTC. A bar's colour is "
        "the partition's state while its ISR stayed the same: green when every replica is in sync, "
        "orange when under-replicated, red when fewer replicas than min.insync.replicas are in sync "
        "(acks=all produce fails), dark grey when the partition has no leader. The number in a wide bar "
        "is ISR size / replicas. Blue bands are incidents, numbered as in the incident table; vertical "
        f"lines mark faults ({len(faults)} marked, legend on the right). {which}"
    )
    plot = _Plot(
        "isr_timeline.png",
        "ISR timeline per partition",
        caption,
        _png(_isr_timeline(intervals, incidents, state_changes, lanes)),
    )
    text = (
        f"<p>{len(intervals):,} ISR intervals over {len(partitions):,} partitions; "
        f"{html.escape(duration_text(under / 1000))} of partition time with a reduced ISR or no leader.</p>"
    )
    return text, [plot]


def _incident_section(incidents: Sequence[Row], has_events: bool) -> str:
    if not incidents:
        note = (
            NO_EVENTS.format(what="incident table")
            if not has_events
            else "No incident: no partition's ISR shrank below its replicas in this run."
        )
        return f'<p class="note">{html.escape(note)}</p>'
    longest = max(incidents, key=lambda r: float(r["duration_seconds"]))
    opened = sum(1 for r in incidents if r.get("open"))
    intro = (
        f"<p>{len(incidents)} incident{'' if len(incidents) == 1 else 's'}: periods during which "
        "partitions were under-replicated, in start order. The longest is "
        f"#{html.escape(str(longest['incident']))} "
        f"({html.escape(duration_text(float(longest['duration_seconds'])))})"
        + (f"; {opened} still open at the end of the data" if opened else "")
        + ".</p>"
    )
    return intro + _table(
        INCIDENT_HEADERS,
        incident_rows(incidents),
        table_id="incidents",
        text_columns=(1, 2, 4, 5, 6),
        nowrap_columns=(1, 2, 3),
    )


def _delay_section(propagation_delays: Sequence[Row], has_events: bool) -> tuple[str, list[_Plot]]:
    values = delay_values(propagation_delays)
    every = [value for group in values.values() for value in group]
    pending = sum(1 for row in propagation_delays if row.get("delay_seconds") is None)
    if not every:
        if not has_events:
            note = NO_EVENTS.format(what="propagation delay histogram")
        elif pending:
            note = f"None of the {pending} ISR changes was propagated before the data ended."
        else:
            note = "No ISR change needed propagating in this run."
        return f'<p class="note">{html.escape(note)}</p>', []
    over = sum(1 for value in every if value > MAX_DELAY_SECONDS)
    caption = (
        f"How long each broker took to write an ISR change notification to ZooKeeper after the change "
        f"({len(every):,} changes; median {_quantile(every, 0.5):.1f} s, 99th percentile "
        f"{_quantile(every, 0.99):.1f} s, longest {max(every):.1f} s). Kafka's rule: a broker writes its "
        "pending changes once none is newer than 5 s (the black-out) and at the latest 60 s after the "
        "last write, so bars belong between the two lines; green were written after the quiet period, "
        "red were forced by the 60 s bound."
        + (f" {over} took longer than 60 s." if over else "")
        + (
            f" {pending} change{'' if pending == 1 else 's'} not yet propagated when the data ended "
            f"{'is' if pending == 1 else 'are'} not shown."
            if pending
            else ""
        )
    )
    plot = _Plot(
        "propagation_histogram.png",
        "Delay from an ISR change to its ZooKeeper notification",
        caption,
        _png(_delay_histogram(values)),
    )
    return "", [plot]


def write_report(
    directory: Path,
    summary: Summary,
    cluster_rows: Sequence[Row],
    broker_rows: Sequence[Row],
    flapping_rows: Sequence[Row],
    *,
    intervals: Sequence[Row] = (),
    incidents: Sequence[Row] = (),
    propagation_delays: Sequence[Row] = (),
    state_changes: Sequence[Row] = (),
) -> Path:
    """Write the PNGs and ``index.html`` into ``directory``; returns the page's path.

    The four window plots (``PLOTS``) are always written; the ISR timeline and the propagation
    histogram (``EVENT_PLOTS``) only when there are rows to draw them from (a PNG of either left by
    an earlier report in the same directory is removed, so the files match the page).
    """
    directory.mkdir(parents=True, exist_ok=True)
    window = summary.smallest_window
    length_ms = window_ms(window, cluster_rows or broker_rows)
    has_events = bool(intervals or incidents or propagation_delays or state_changes)
    flapping_shown = flapping_rows[: len(summary.flapping) or 10]

    window_plots = [
        _Plot(
            "isr_churn.png",
            f"ISR churn per broker ({window} windows)",
            f"ISR shrinks (top) and expands (bottom) that each broker's partition leaders made in each "
            f"complete {window} window, UTC. Each step holds one window's total for the length of the "
            "window; a gap is a window without data.",
            _png(_isr_churn(broker_rows, length_ms)),
        ),
        _Plot(
            "under_replicated.png",
            f"Under-replicated and offline partitions ({window} windows)",
            "Top: under-replicated partitions in each window, the time-weighted mean over the window and "
            "the largest number any broker reported. Bottom: offline partitions (no leader), largest and "
            "mean. Each step holds one window's value for the length of the window; a gap is a window "
            "without data.",
            _png(_under_replicated(cluster_rows, length_ms)),
        ),
        _Plot(
            "propagation_delay.png",
            f"ISR change propagation per window ({window} windows)",
            "Top: median and 99th percentile of the delay between an ISR change and its ZooKeeper "
            "notification, per window. Bottom: how the brokers' propagation checks ended in each window: "
            "written after 5 s without a new change, forced by the 60 s bound, or deferred because a "
            "change was less than 5 s old.",
            _png(_propagation(cluster_rows, length_ms)),
        ),
        _Plot(
            "flapping.png",
            "Top flapping partitions",
            "Partitions whose ISR shrank and grew back within the flap span, ranked by the number of "
            "such shrink -> expand cycles (the most at the top).",
            _png(_flapping(flapping_shown)),
        ),
    ]
    isr_text, timeline = _isr_section(intervals, incidents, state_changes, has_events)
    incident_html = _incident_section(incidents, has_events)
    delay_text, histogram = _delay_section(propagation_delays, has_events)
    for plot in (*window_plots, *timeline, *histogram):
        (directory / plot.name).write_bytes(plot.png)
    for name in EVENT_PLOTS:
        if name not in {plot.name for plot in (*timeline, *histogram)}:
            (directory / name).unlink(missing_ok=True)

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
    summary_items = "".join(f"<li>{html.escape(line)}</li>" for line in summary_lines(summary)[:-1])
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<link rel="icon" href="data:,"><title>actorlog rollup</title><style>{_STYLE}</style></head>
<body>
<h1>actorlog rollup</h1>
<nav><a href="#summary">Summary</a> <a href="#isr">ISR incidents and timeline</a>
<a href="#propagation">Propagation delays</a> <a href="#windows">Window totals</a>
<a href="#brokers">Brokers</a> <a href="#flapping">Flapping partitions</a></nav>
<h2 id="summary">Summary</h2>
<ul class="summary">{summary_items}</ul>
<h2 id="isr">ISR incidents and timeline</h2>
{isr_text}
{incident_html}
{"".join(plot.html() for plot in timeline)}
<h2 id="propagation">Propagation delays</h2>
{delay_text}
{"".join(plot.html() for plot in histogram)}
<h2 id="windows">Window totals ({html.escape(window)} windows)</h2>
{"".join(plot.html() for plot in window_plots[:3])}
<h2 id="brokers">Brokers ({html.escape(window)} windows)</h2>
{brokers_table}
<h2 id="flapping">Top flapping partitions</h2>
{flapping_table if summary.flapping else "<p>No ISR shrink was undone within the flap span.</p>"}
{window_plots[3].html()}
</body></html>
"""
    path = directory / "index.html"
    path.write_text(page, encoding="utf-8")
    return path
