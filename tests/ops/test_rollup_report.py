"""The rollup's summary lines and report page, from small collected rows (no Spark).

``representative_report`` builds the rows a short fault run produces (a broker down for two
minutes, a follower that stopped fetching, a leaderless partition, propagation delays around the 5 s
and 60 s marks) and writes a page from them; the browser test (test_report_browser.py) opens it.
"""

from __future__ import annotations

import html
import math
import re
from pathlib import Path
from typing import Any, cast

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.colors import to_hex
from matplotlib.patches import Rectangle

from ops.rollup import report
from ops.rollup.report import (
    EVENT_PLOTS,
    INCIDENT_HEADERS,
    PLOTS,
    Summary,
    delay_values,
    duration_text,
    fault_events,
    incident_rows,
    interval_state,
    step_series,
    summarise,
    summary_lines,
    timeline_lanes,
    window_ms,
    write_report,
)

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
S = 1_000
Rows = list[dict[str, Any]]


def _cluster_row(minute: int, **values: float | None) -> dict[str, object]:
    return {"window_start_ms": T0 + minute * 60_000, **values}


def _summary(tmp_path: Path, *, cluster: Rows | None = None, flapping: Rows | None = None) -> Summary:
    return summarise(
        cluster_rows=cluster or [],
        flapping_rows=flapping or [],
        brokers=["1", "2", "3"],
        earliest_ms=T0,
        as_of_ms=T0 + 600 * S,
        windows=[("1m", 10)],
        smallest_window="1m",
        missing_metrics=[],
        report_path=tmp_path / "index.html",
        top=10,
    )


# --- representative rows -------------------------------------------------------------------------


def interval(
    topic: str,
    partition: int,
    start_s: float,
    end_s: float,
    isr: list[int],
    *,
    replicas: list[int] | None = None,
    leader: int | None = None,
    min_isr: int | None = 2,
    cause: str = "isr_shrink",
    reason: str | None = "lag",
    open_: bool = False,
) -> dict[str, Any]:
    replicas = [1, 2, 3] if replicas is None else replicas
    leader = isr[0] if leader is None else leader
    return {
        "topic": topic,
        "partition": partition,
        "start_ms": T0 + int(start_s * S),
        "end_ms": T0 + int(end_s * S),
        "open": open_,
        "isr": isr,
        "leader": leader,
        "leader_epoch": 3,
        "zk_version": 7,
        "replicas": replicas,
        "min_insync_replicas": min_isr,
        "under_replicated": len(isr) < len(replicas),
        "under_min_isr": None if min_isr is None else len(isr) < min_isr,
        "cause_kind": cause,
        "reason": reason,
        "removed": [],
        "added": [],
        "recorded_by": "1",
    }


def incident(
    number: int, start_s: float, end_s: float, partitions: list[str], out: list[int], reasons: list[str]
) -> dict[str, Any]:
    return {
        "incident": number,
        "start_ms": T0 + int(start_s * S),
        "end_ms": T0 + int(end_s * S),
        "open": False,
        "duration_seconds": end_s - start_s,
        "partitions": partitions,
        "partition_count": len(partitions),
        "replicas_out": out,
        "reasons": reasons,
        "under_min_isr_seconds": 0.0,
    }


def event(
    ts_s: float, kind: str, reason: str | None, topic: str = "orders", partition: int = 0
) -> dict[str, Any]:
    return {
        "ts_ms": T0 + int(ts_s * S),
        "broker": "1",
        "kind": kind,
        "topic": topic,
        "partition": partition,
        "reason": reason,
    }


def delay(change_s: float, seconds: float | None, outcome: str | None, partition: int = 0) -> dict[str, Any]:
    change_ms = T0 + int(change_s * S)
    return {
        "broker": "1",
        "topic": "orders",
        "partition": partition,
        "change_ms": change_ms,
        "change_kind": "isr_shrink",
        "propagated_ms": None if seconds is None else change_ms + int(seconds * S),
        "delay_seconds": seconds,
        "outcome": outcome,
    }


def representative_rows() -> dict[str, Rows]:
    """50 partitions over 10 minutes: broker 2 down from 120 s to 255 s (every partition it follows
    under-replicated, ``audit-*`` with min ISR 3 under min ISR, ``single-0`` leaderless), broker 3
    stops fetching 6 partitions from 400 s to 432 s; incidents #1 and #2."""
    intervals: Rows = []
    partitions = [("orders", p) for p in range(20)] + [("payments", p) for p in range(20)]
    partitions += [("audit", p) for p in range(9)]
    for topic, p in partitions:
        min_isr = 3 if topic == "audit" else 2
        if p % 3 == 0:  # broker 2 is not a replica: healthy throughout
            intervals.append(interval(topic, p, 0, 600, [1, 3, 4], replicas=[1, 3, 4], min_isr=min_isr))
            continue
        intervals.append(interval(topic, p, 0, 120, [1, 2, 3], min_isr=min_isr))
        back = 250 + p % 5  # followers catch up at different times
        intervals.append(
            interval(
                topic,
                p,
                120,
                back,
                [1, 3],
                min_isr=min_isr,
                cause="controller_isr_shrink",
                reason="broker_down",
            )
        )
        if topic == "orders" and p < 8:
            intervals.append(interval(topic, p, back, 400, [1, 2, 3], cause="isr_expand", reason="caught_up"))
            intervals.append(interval(topic, p, 400, 430 + p % 3, [1, 2], reason="fetch_stopped"))
            intervals.append(
                interval(topic, p, 430 + p % 3, 600, [1, 2, 3], cause="isr_expand", reason="caught_up")
            )
        else:
            intervals.append(
                interval(
                    topic, p, back, 600, [1, 2, 3], min_isr=min_isr, cause="isr_expand", reason="caught_up"
                )
            )
    intervals.append(interval("single", 0, 0, 120, [2], replicas=[2], min_isr=1, reason=None))
    intervals.append(
        interval("single", 0, 120, 255, [2], replicas=[2], leader=-1, min_isr=1, cause="leader_election")
    )
    intervals.append(interval("single", 0, 255, 600, [2], replicas=[2], min_isr=1, open_=True, reason=None))

    down = [f"{t}-{p}" for t, p in partitions if p % 3] + ["single-0"]
    stopped = [f"orders-{p}" for p in range(8) if p % 3]
    incidents = [
        incident(1, 120, 255, down, [2], ["broker_down"]),
        incident(2, 400, 432, stopped, [3], ["fetch_stopped"]),
    ]
    incidents[0]["under_min_isr_seconds"] = 6 * 133.0
    state_changes = [event(120, "controller_isr_shrink", "broker_down", "orders", p) for p in (1, 2, 4)]
    state_changes += [event(120.4, "leader_election", "broker_down", "single", 0)]
    state_changes += [event(400, "isr_shrink", "fetch_stopped", "orders", p) for p in (1, 2, 4)]
    state_changes += [event(255, "isr_expand", "caught_up"), event(300, "leader_election", "preferred")]
    state_changes += [event(500, "leader_election", "unclean", "single", 0)]
    delays = [delay(120 + i, 5.0 + (i % 7) * 0.6, "written", i) for i in range(40)]
    delays += [delay(400 + i, 58.0 + i, "forced", i) for i in range(4)]
    delays += [delay(590, None, None)]
    return {
        "intervals": intervals,
        "incidents": incidents,
        "propagation_delays": delays,
        "state_changes": state_changes,
    }


def representative_windows() -> tuple[Rows, Rows, Rows]:
    """Ten 1m windows: cluster rows, broker rows (broker 3 misses window 6) and two flapping rows."""
    cluster: Rows = []
    brokers: Rows = []
    for minute in range(10):
        down = 2 <= minute <= 4
        cluster.append(
            _cluster_row(
                minute,
                isr_shrinks=33 if minute == 2 else (6 if minute == 6 else 0),
                isr_expands=33 if minute == 4 else (6 if minute == 7 else 0),
                under_replicated_partitions_mean=30.0 if down else (6.0 if minute == 6 else 0.0),
                under_replicated_partitions_max=33 if down else (6 if minute == 6 else 0),
                offline_partitions_max=1 if down else 0,
                offline_partitions_mean=1.0 if down else 0.0,
                propagation_delay_p50=5.5 if minute in (2, 4, 6) else None,
                propagation_delay_p99=7.2 if minute in (2, 4) else (60.0 if minute == 6 else None),
                propagations_written=2 if minute in (2, 4) else 0,
                propagations_forced=1 if minute == 6 else 0,
                propagations_deferred=5 if minute in (2, 4, 6) else 0,
                leader_elections=1 if minute == 2 else 0,
            )
        )
        for broker in ("1", "2", "3"):
            if (broker == "2" and down) or (broker == "3" and minute == 6):
                continue
            brokers.append(
                {
                    "window_start_ms": T0 + minute * 60_000,
                    "broker": broker,
                    "isr_shrinks": 33 if (minute == 2 and broker == "1") else 0,
                    "isr_expands": 33 if (minute == 4 and broker == "1") else 0,
                    "failed_isr_updates": 0,
                    "validity": "valid",
                }
            )
    flapping = [
        {"rank": 1, "topic": "orders", "partition": 1, "cycles": 2, "last_cycle_ms": T0 + 432 * S,
         "mean_recovery_seconds": 81.5},
        {"rank": 2, "topic": "orders", "partition": 2, "cycles": 2, "last_cycle_ms": T0 + 432 * S,
         "mean_recovery_seconds": 82.0},
    ]  # fmt: skip
    return cluster, brokers, flapping


def representative_report(directory: Path) -> Path:
    """A report page from ``representative_rows`` and ``representative_windows``."""
    cluster, brokers, flapping = representative_windows()
    summary = _summary(directory, cluster=cluster, flapping=flapping)
    return write_report(directory, summary, cluster, brokers, flapping, **representative_rows())


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The representative page, written once for the tests that only read it."""
    return representative_report(tmp_path_factory.mktemp("report"))


# --- summary -------------------------------------------------------------------------------------


def test_summary_totals_sum_windows_and_say_n_a_for_metrics_never_seen(tmp_path: Path) -> None:
    rows = [
        _cluster_row(0, isr_shrinks=2, isr_expands=1, offline_partitions_max=0, propagations_written=1),
        _cluster_row(1, isr_shrinks=3, isr_expands=None, offline_partitions_max=4, propagations_written=0),
    ]
    flapping = [
        {
            "rank": 1,
            "topic": "t",
            "partition": 3,
            "cycles": 5,
            "last_cycle_ms": T0,
            "mean_recovery_seconds": 12.5,
        },
        {
            "rank": 2,
            "topic": "u",
            "partition": 0,
            "cycles": 1,
            "last_cycle_ms": T0,
            "mean_recovery_seconds": 3.0,
        },
    ]

    summary = summarise(
        cluster_rows=rows,
        flapping_rows=flapping,
        brokers=["1", "2"],
        earliest_ms=T0,
        as_of_ms=T0 + 125_000,
        windows=[("1m", 2)],
        smallest_window="1m",
        missing_metrics=["kafka_server_replicamanager_failedisrupdates_total"],
        report_path=tmp_path / "index.html",
        top=1,
    )
    lines = summary_lines(summary)

    assert lines[0] == "rollup of 2 brokers (1, 2) from 2026-01-01 00:00:00Z to 2026-01-01 00:02:05Z"
    assert lines[2] == "ISR: 5 shrinks, 1 expands, n/a failed updates"
    assert lines[4].startswith("partitions: max 4 offline, n/a under-replicated")
    assert lines[5] == "top flapping partitions: t-3 (5 cycles)"
    assert lines[6] == "missing from the snapshots (1): kafka_server_replicamanager_failedisrupdates_total"
    assert lines[7] == f"report: {tmp_path / 'index.html'}"


# --- the page ------------------------------------------------------------------------------------


def _figures(page: str) -> list[str]:
    return re.findall(r"<figure .*?</figure>", page, flags=re.DOTALL)


def test_report_is_written_even_without_complete_windows(tmp_path: Path) -> None:
    summary = summarise(
        cluster_rows=[],
        flapping_rows=[],
        brokers=["1"],
        earliest_ms=T0,
        as_of_ms=T0 + 30_000,
        windows=[("1m", 0)],
        smallest_window="1m",
        missing_metrics=[],
        report_path=tmp_path / "index.html",
        top=10,
    )

    page = write_report(tmp_path, summary, [], [], [])

    assert page == tmp_path / "index.html"
    assert all((tmp_path / name).stat().st_size > 0 for name in PLOTS)
    text = page.read_text(encoding="utf-8")
    assert "No ISR shrink was undone within the flap span." in text
    assert "top flapping partitions: none" in text


def test_without_events_the_event_sections_say_so_and_the_rest_is_as_before(tmp_path: Path) -> None:
    cluster, brokers, flapping = representative_windows()
    # A stale timeline from an earlier report in the same directory must not stay beside the page.
    (tmp_path / "isr_timeline.png").write_bytes(b"stale")

    page = write_report(
        tmp_path, _summary(tmp_path, cluster=cluster, flapping=flapping), cluster, brokers, flapping
    )

    text = page.read_text(encoding="utf-8")
    for what in ("ISR timeline", "incident table", "propagation delay histogram"):
        assert report.NO_EVENTS.format(what=what) in text
    assert text.count("<img ") == len(PLOTS)
    assert all((tmp_path / name).stat().st_size > 1000 for name in PLOTS)
    assert not any((tmp_path / name).exists() for name in EVENT_PLOTS)
    assert 'id="incidents"' not in text
    assert "<td>orders-1</td>" in text  # the flapping table
    assert "<td>3</td><td>0</td><td>0</td><td>0</td><td>9/9</td>" in text  # broker 3's totals


def test_page_has_one_embedded_image_per_figure_each_with_a_title_and_a_caption(page: Path) -> None:
    tmp_path = page.parent

    text = page.read_text(encoding="utf-8")
    figures = _figures(text)
    names = (*PLOTS, *EVENT_PLOTS)
    assert len(figures) == len(names)
    assert text.count("<img ") == len(names)
    assert text.count('src="data:image/png;base64,') == len(names)
    for name in names:
        assert (tmp_path / name).read_bytes().startswith(b"\x89PNG"), name
    for figure in figures:
        title = re.search(r"<h3>(.*?)</h3>", figure)
        caption = re.search(r"<figcaption>(.*?)</figcaption>", figure, flags=re.DOTALL)
        assert title is not None
        assert caption is not None
        assert not title.group(1).endswith(".png")
        assert re.search(r'<img alt="[^"]+" src="data:image/png;base64,[A-Za-z0-9+/=]{1000,}">', figure)
        assert len(caption.group(1)) > 120, caption.group(1)  # sentences, not a file name
    assert "ISR timeline per partition" in text
    assert "Delay from an ISR change to its ZooKeeper notification" in text
    assert "Each step holds one window&#x27;s total for the length of the window" in text


def test_incident_table_lists_each_incident_with_its_times_duration_partitions_and_reasons(
    page: Path,
) -> None:
    rows = representative_rows()
    open_incident = incident(3, 590, 600, ["orders-7"], [2, 3], ["lag", "fetch_stopped"])
    open_incident.update(open=True, duration_seconds=10.0, under_min_isr_seconds=10.0)

    cells = incident_rows([open_incident, *rows["incidents"]])

    assert cells[0] == [
        "1",
        "2026-01-01 00:02:00Z",
        "2026-01-01 00:04:15Z",
        "2 min 15 s",
        "33: orders-1, orders-2, orders-4, orders-5, orders-7, orders-8 (+27 more)",
        "2",
        "broker_down",
        "13 min 18 s",
    ]
    assert cells[1][:4] == ["2", "2026-01-01 00:06:40Z", "2026-01-01 00:07:12Z", "32.0 s"]
    assert cells[1][4:7] == ["5: orders-1, orders-2, orders-4, orders-5, orders-7", "3", "fetch_stopped"]
    assert cells[2][2:7] == [
        "open at the end of the data",
        "10.0 s so far",
        "1: orders-7",
        "2, 3",
        "fetch_stopped, lag",
    ]

    text = page.read_text(encoding="utf-8")
    table = re.search(r'<table id="incidents">.*?</table>', text, flags=re.DOTALL)
    assert table is not None
    assert all(f">{html.escape(h)}</th>" in table.group(0) for h in INCIDENT_HEADERS)
    body_rows = re.findall(r"<tr>(.*?)</tr>", table.group(0).split("<tbody>")[1])
    assert len(body_rows) == 2
    assert '<td class="text nowrap">2026-01-01 00:02:00Z</td>' in body_rows[0]
    assert '<td class="nowrap">2 min 15 s</td>' in body_rows[0]
    assert '<td class="nowrap">32.0 s</td>' in body_rows[1]
    assert "The longest is #1 (2 min 15 s)." in text


def test_without_incidents_but_with_events_the_page_says_there_was_none(tmp_path: Path) -> None:
    rows = representative_rows()
    healthy = [r for r in rows["intervals"] if interval_state(r) == "full"]

    text = write_report(tmp_path, _summary(tmp_path), [], [], [], intervals=healthy).read_text(
        encoding="utf-8"
    )

    assert "No incident: no partition&#x27;s ISR shrank below its replicas in this run." in text
    assert "No ISR change needed propagating in this run." in text
    assert (tmp_path / "isr_timeline.png").exists()
    assert not (tmp_path / "propagation_histogram.png").exists()


# --- the pieces ----------------------------------------------------------------------------------


def test_duration_text() -> None:
    assert [duration_text(s) for s in (0, 4.25, 59.94, 60, 135, 3599.4, 3600, 7380)] == [
        "0.0 s",
        "4.2 s",
        "59.9 s",
        "1 min 00 s",
        "2 min 15 s",
        "59 min 59 s",
        "1 h 00 min",
        "2 h 03 min",
    ]


def test_interval_state_is_the_worst_that_applies() -> None:
    assert interval_state(interval("t", 0, 0, 1, [1, 2, 3])) == "full"
    assert interval_state(interval("t", 0, 0, 1, [1, 2])) == "under_replicated"
    assert interval_state(interval("t", 0, 0, 1, [1])) == "under_min_isr"
    assert interval_state(interval("t", 0, 0, 1, [1], min_isr=None)) == "under_replicated"
    assert interval_state(interval("t", 0, 0, 1, [1], leader=-1)) == "no_leader"
    unknown = interval("t", 0, 0, 1, [1]) | {"leader": None, "under_replicated": None, "under_min_isr": None}
    assert interval_state(unknown) == "full"


def test_timeline_shows_the_partitions_with_the_most_under_replicated_time_in_name_order() -> None:
    rows = [interval("t", p, 0, 100, [1, 2, 3]) for p in range(45)]
    rows += [interval("t", p, 100, 100 + p, [1, 2]) for p in range(45)]  # partition p: p seconds short
    rows += [interval("a", 0, 0, 10, [1], leader=-1)]  # 10 s leaderless counts too

    lanes = timeline_lanes(rows, limit=40)

    assert len(lanes) == 40
    assert lanes[0] == ("a", 0)
    assert lanes[1:] == [("t", p) for p in range(6, 45)]


def test_timeline_caption_says_how_many_partitions_it_leaves_out(page: Path) -> None:
    rows = representative_rows()  # 50 partitions

    text = page.read_text(encoding="utf-8")

    assert len({(r["topic"], r["partition"]) for r in rows["intervals"]}) == 50
    assert "Showing the 40 of 50 partitions with the most under-replicated" in text
    assert f"{len(rows['intervals'])} ISR intervals over 50 partitions" in text


def test_fault_events_keep_faults_only_once_per_kind_and_second() -> None:
    rows = representative_rows()["state_changes"]

    faults = fault_events(rows)

    assert faults == [
        (T0 + 120 * S, ("controller_isr_shrink", None)),
        (T0 + 120_400, ("leader_election", "broker_down")),
        (T0 + 400 * S, ("isr_shrink", "fetch_stopped")),
        (T0 + 500 * S, ("leader_election", "unclean")),
    ]
    assert fault_events([event(1, "isr_shrink", "lag"), event(2, "state_learned", "zookeeper")]) == []


def test_timeline_figure_colours_states_shades_incidents_and_marks_faults() -> None:
    rows = representative_rows()
    lanes = timeline_lanes(rows["intervals"])

    figure = report._isr_timeline(rows["intervals"], rows["incidents"], rows["state_changes"], lanes)

    axis = figure.axes[0]
    colours = {to_hex(cast("Any", collection.get_facecolor())[0]) for collection in axis.collections}
    assert set(report._STATE_COLOURS.values()) <= colours
    assert report._INCIDENT_COLOUR in colours
    legend_box = axis.get_legend()
    assert legend_box is not None
    legend = [text.get_text() for text in legend_box.get_texts()]
    assert legend[:4] == [
        "full ISR (every replica in sync)",
        "under-replicated",
        "under min ISR",
        "no leader",
    ]
    assert "incident (numbered as in the table)" in legend
    assert "broker went down (controller shrank ISRs)" in legend
    assert "unclean leader election" in legend
    assert "follower stopped fetching (ISR shrink)" in legend
    ticks = [label.get_text() for label in axis.get_yticklabels()]
    assert len(ticks) == 41  # 40 partitions and the incidents lane on top
    assert ticks[-1] == "incidents"
    assert {"single-0", "orders-1"} <= set(ticks)
    plt.close(figure)


def test_window_plots_are_step_plots_that_hold_the_last_window_and_break_at_gaps() -> None:
    rows = [_cluster_row(0, x=1), _cluster_row(1, x=None), _cluster_row(2, x=3), _cluster_row(5, x=4)]

    times, values = step_series(rows, "x", 60_000)

    minutes = [round((t.timestamp() * 1000 - T0) / 60_000) for t in times]
    assert minutes == [0, 1, 2, 3, 5, 6]
    assert values[0] == 1
    assert math.isnan(values[1])
    assert values[2] == 3
    assert math.isnan(values[3])  # minutes 3 and 4 have no window
    assert values[4] == 4
    assert math.isnan(values[5])  # the last window ends at minute 6
    assert window_ms("2m", []) == 120_000
    assert window_ms("not a window", rows) == 60_000

    cluster, brokers, _ = representative_windows()
    for figure in (report._isr_churn(brokers, 60_000), report._under_replicated(cluster, 60_000)):
        lines = [line for axis in figure.axes for line in axis.get_lines()]
        assert lines
        assert all(line.get_drawstyle() == "steps-post" for line in lines)
        plt.close(figure)


def test_propagation_histogram_marks_the_black_out_and_the_maximum_delay() -> None:
    rows = representative_rows()["propagation_delays"]
    values = delay_values(rows)
    assert (len(values["written"]), len(values["forced"]), len(values["other"])) == (40, 4, 0)

    figure = report._delay_histogram(values)

    axis = figure.axes[0]
    vertical = {line.get_label(): float(np.asarray(line.get_xdata())[0]) for line in axis.get_lines()}
    assert vertical == {"5 s black-out": 5.0, "60 s maximum delay": 60.0}
    assert {text.get_text() for text in axis.texts} == {"5 s black-out", "60 s maximum delay"}
    bars = [patch for patch in axis.patches if isinstance(patch, Rectangle)]
    assert sum(bar.get_height() for bar in bars) == 44  # every delay in one bar, both outcomes stacked
    assert max(bar.get_x() + bar.get_width() for bar in bars if bar.get_height() > 0) >= 61
    assert axis.get_xlim()[1] >= 65
    plt.close(figure)


def test_histogram_caption_counts_changes_not_propagated(page: Path) -> None:
    text = page.read_text(encoding="utf-8")

    assert "(44 changes; median" in text
    assert "1 change not yet propagated when the data ended is not shown." in text
    assert "1 took longer than 60 s." in text


@pytest.mark.parametrize("name", ["intervals", "incidents", "propagation_delays", "state_changes"])
def test_any_one_kind_of_event_rows_alone_still_writes_a_page(tmp_path: Path, name: str) -> None:
    rows = representative_rows()

    page = write_report(tmp_path, _summary(tmp_path), [], [], [], **{name: rows[name]})

    text = page.read_text(encoding="utf-8")
    assert "No ISR state-change events were found" not in text
    assert text.count("<img ") == len(_figures(text))
