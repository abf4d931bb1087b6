"""``perf produce``'s statistics: Kafka's window lines and final line from per-record latencies."""

from __future__ import annotations

import gc

from ops.cli.perf import ProducerPerfStats, collector_tuned

MS = 1_000_000


def test_each_window_line_covers_only_its_own_records() -> None:
    lines: list[str] = []
    stats = ProducerPerfStats(
        record_size=100, started_ns=0, reporting_interval_ms=5_000, print_line=lines.append
    )
    stats.record(10.0, 1_000 * MS)  # the first window starts at its first record
    stats.record(30.0, 3_000 * MS)
    stats.record(20.0, 6_000 * MS)  # 5 s after the first: the window ends with this record
    stats.record(4.0, 7_000 * MS)
    stats.record(2.0, 11_000 * MS)  # 5 s after the window began at 6 s
    assert lines == [
        "3 records sent, 0.6 records/sec (0.00 MB/sec), 20.0 ms avg latency, 30.0 ms max latency.",
        "2 records sent, 0.4 records/sec (0.00 MB/sec), 3.0 ms avg latency, 4.0 ms max latency.",
    ]
    assert (stats.count, stats.bytes, stats.latency_max) == (5, 500, 30.0)
    final = stats.final_line(12_000 * MS)
    assert final.startswith(
        "5 records sent, 0.416667 records/sec (0.00 MB/sec), 13.20 ms avg latency, 30.00 ms max"
    )
    assert final.endswith("10 ms 50th, 30 ms 95th, 30 ms 99th, 30 ms 99.9th.")


def test_the_collector_tuning_is_undone_after_the_run() -> None:
    """The tools run inside tests and benchmarks too: their collector settings must not leak."""
    before = gc.get_threshold()
    with collector_tuned(youngest_threshold=100_000):
        assert gc.get_threshold() == (100_000, 50, 100)
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
