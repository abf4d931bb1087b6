"""The rollup's summary lines and report page, from small collected rows (no Spark)."""

from __future__ import annotations

from pathlib import Path

from ops.rollup.report import PLOTS, summarise, summary_lines, write_report

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def _cluster_row(minute: int, **values: float | None) -> dict[str, object]:
    return {"window_start_ms": T0 + minute * 60_000, **values}


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
