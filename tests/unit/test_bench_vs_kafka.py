"""The pure parts of ``make bench-vs-kafka`` (ops/bench/vs_kafka*.py): reading the perf tools' final
lines, CPU accounting from /proc stat lines, the table, the workload choice, and a measured run of
a stand-in tool (a real child process, so the CPU charged to it is real)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ops.bench.perf_lines import parse_consumer_summary, parse_producer_summary
from ops.bench.proc_cpu import cpu_at_exit, cpu_seconds, cpu_ticks, cpu_used, per_million, sample
from ops.bench.vs_kafka import (
    QUICK,
    SIZES,
    WORKLOADS,
    _sizes,
    build_parser,
    main,
    select_workloads,
)
from ops.bench.vs_kafka_runs import consumer_row, producer_row, run_measured
from ops.bench.vs_kafka_table import PROCESSES, Row, RunInfo, markdown_table, render_markdown, to_json, versus
from ops.cli.perf import HEADER, ConsumerPerfResult, ProducerPerfStats, kafka_date

# Printed by Kafka 3.9.2's tools on this machine (`make bench-vs-kafka --quick`).
KAFKA_PRODUCER_OUTPUT = (
    "1146711 records sent, 229342.2 records/sec (21.87 MB/sec), 103.9 ms avg latency, 512.0 ms max latency.\n"
    "2000 records sent, 1563.721658 records/sec (0.15 MB/sec), 264.85 ms avg latency, 1167.00 ms max "
    "latency, 266 ms 50th, 301 ms 95th, 304 ms 99th, 312 ms 99.9th.\n"
)
KAFKA_CONSUMER_OUTPUT = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec\n"
    "2026-11-27 19:34:30:611, 2026-11-27 19:34:34:173, 0.1907, 0.0535, 2000, 561.4823, 3450, 112, "
    "1.7030, 17857.1429\n"
)
CLK_TCK = os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------------------------- final lines


def test_producer_performance_final_line_is_read_and_progress_lines_are_not() -> None:
    summary = parse_producer_summary(KAFKA_PRODUCER_OUTPUT)
    assert summary is not None
    assert summary.records == 2000
    assert summary.records_per_s == pytest.approx(1563.721658)
    assert summary.mb_per_s == pytest.approx(0.15)
    assert (summary.avg_latency_ms, summary.max_latency_ms) == (264.85, 1167.0)
    assert (summary.p50_ms, summary.p95_ms, summary.p99_ms, summary.p999_ms) == (266, 301, 304, 312)
    assert summary.line.startswith("2000 records sent")
    progress_only = KAFKA_PRODUCER_OUTPUT.splitlines()[0]
    assert parse_producer_summary(progress_only) is None
    assert parse_producer_summary("") is None


def test_actorlog_perf_produce_final_line_reads_the_same_way() -> None:
    stats = ProducerPerfStats(record_size=100, started_ns=0, print_line=lambda _line: None)
    for number, latency in enumerate((1.0, 2.0, 3.0, 40.0)):
        stats.record(latency, now_ns=(number + 1) * 1_000_000)
    line = stats.final_line(now_ns=2_000_000_000)  # 4 records in 2 s
    summary = parse_producer_summary(f"some progress\n{line}\n")
    assert summary is not None
    assert summary.records == 4
    assert summary.records_per_s == pytest.approx(2.0)
    assert summary.avg_latency_ms == pytest.approx(11.5)
    assert summary.max_latency_ms == pytest.approx(40.0)
    assert (summary.p50_ms, summary.p99_ms) == (3, 40)


def test_consumer_performance_line_is_read_by_column_with_the_fetch_rates() -> None:
    summary = parse_consumer_summary(KAFKA_CONSUMER_OUTPUT)
    assert summary is not None
    assert summary.records == 2000
    assert summary.megabytes == pytest.approx(0.1907)
    # fetch.* leave the group join out (3450 ms here), so they are not nMsg.sec (561 records/s).
    assert summary.records_per_s == pytest.approx(17857.1429)
    assert summary.mb_per_s == pytest.approx(1.7030)
    assert summary.columns["rebalance.time.ms"] == "3450"


def test_actorlog_perf_consume_line_reads_the_same_way() -> None:
    result = ConsumerPerfResult(start_ms=1_000, end_ms=3_000, messages=5_000, bytes=5_000 * 1024)
    summary = parse_consumer_summary(f"{HEADER}\n{result.line(kafka_date)}\n")
    assert summary is not None
    assert summary.records == 5_000
    assert summary.records_per_s == pytest.approx(2_500.0)
    assert summary.mb_per_s == pytest.approx(5_000 * 1024 / 2 / 1024 / 1024, rel=1e-3)


def test_consumer_output_without_its_line_is_none_and_a_line_that_does_not_fit_is_an_error() -> None:
    header = KAFKA_CONSUMER_OUTPUT.splitlines()[0]
    assert parse_consumer_summary("") is None
    assert parse_consumer_summary(header) is None
    with pytest.raises(ValueError, match="values under"):
        parse_consumer_summary(f"{header}\n2026-11-27 19:34:30:611, 0.19\n")
    with pytest.raises(ValueError, match=r"fetch\.nMsg\.sec"):
        parse_consumer_summary("start.time, end.time\n1, 2\n")
    values = "a, b, c, d, e, f, g, h, i, j"
    with pytest.raises(ValueError, match="not a ConsumerPerformance line"):
        parse_consumer_summary(f"{header}\n{values}\n")


# ----------------------------------------------------------------------------------------- CPU


def _stat_line(name: str, utime: int, stime: int) -> str:
    # pid (comm) state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime ...
    return f"4242 ({name}) S 1 4242 4242 0 -1 4194560 100 0 0 0 {utime} {stime} 0 0 20 0 7 0 12345"


def test_cpu_ticks_are_utime_plus_stime_even_when_the_name_holds_spaces_and_parentheses() -> None:
    assert cpu_ticks(_stat_line("java", 300, 45)) == 345
    assert cpu_ticks(_stat_line("a) b (c", 7, 3)) == 10  # fields are counted after the last ")"
    for broken in (
        "",
        "4242 java S 1",
        "4242 (java) S 1 2 3",
        _stat_line("java", 300, 45).replace("300", "x"),
    ):
        with pytest.raises(ValueError):
            cpu_ticks(broken)


def test_cpu_seconds_reads_proc_and_a_missing_process_is_none(tmp_path: Path) -> None:
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "stat").write_text(_stat_line("broker", 2 * CLK_TCK, CLK_TCK))
    assert cpu_seconds(4242, proc=tmp_path) == pytest.approx(3.0)
    assert cpu_seconds(4243, proc=tmp_path) is None
    assert sample({"broker 1": 4242, "gone": 4243}, proc=tmp_path) == {
        "broker 1": pytest.approx(3.0),
        "gone": None,
    }
    own = cpu_seconds(os.getpid())
    assert own is not None
    assert own > 0


def test_cpu_used_is_the_difference_and_unknown_where_a_sample_is_missing_or_went_back() -> None:
    before = {"broker 1": 10.0, "broker 2": 5.0, "broker 3": 7.0, "ZooKeeper": 1.0}
    after = {"broker 1": 12.5, "broker 2": None, "broker 3": 0.5, "client": 3.0}
    used = cpu_used(before, after)
    assert used["broker 1"] == pytest.approx(2.5)
    assert used["broker 2"] is None  # gone during the run
    assert used["broker 3"] is None  # less than before: another process under the same pid
    assert used["ZooKeeper"] is None  # not read after
    assert used["client"] is None  # not read before


def test_cpu_per_million_records() -> None:
    assert per_million(0.5, 500_000) == pytest.approx(1.0)
    assert per_million(None, 500_000) is None
    assert per_million(1.0, 0) is None


def test_an_exited_child_is_charged_all_of_its_cpu_and_then_reaped() -> None:
    burn = (
        "import time\n"
        "end = time.process_time() + 0.3\n"
        "while time.process_time() < end:\n"
        "    pass\n"
    )  # fmt: skip
    started = time.process_time()
    process = subprocess.Popen([sys.executable, "-c", burn])
    charged = cpu_at_exit(process)
    assert process.returncode == 0  # reaped
    assert charged is not None
    assert charged >= 0.3 - 1 / CLK_TCK
    assert time.process_time() - started < 0.3  # the waiting itself did not burn it here


# --------------------------------------------------------------------------------------- table


def _row(system: str, tool: str, records_per_s: float | None, **changes: Any) -> Row:
    base = Row(
        workload="100B-1p-acksall",
        system=system,
        tool=tool,
        kind="produce",
        records=1_000_000,
        records_per_s=records_per_s,
        mb_per_s=9.54,
        avg_ms=3.25,
        p50_ms=3,
        p99_ms=6,
        max_ms=40.5,
        cpu_s={"client": 4.0, "broker 1": 2.0, "broker 2": 1.0, "broker 3": 1.0, "ZooKeeper": 0.0},
        line="the final line",
    )
    return replace(base, **changes)


def test_the_table_has_every_figure_and_the_share_of_kafkas_rate() -> None:
    kafka = _row("Kafka 3.9.2", "ProducerPerformance", 200_000.0)
    ours = _row("actorlog", "actorlog perf produce", 50_000.0, cpu_s={"client": 8.0, "broker 1": 3.0})
    consume_kafka = _row("Kafka 3.9.2", "ConsumerPerformance", 400_000.0, kind="consume", avg_ms=None)
    consume_ours = _row("actorlog", "actorlog perf consume", 100_000.0, kind="consume", avg_ms=None)
    rows = [kafka, consume_kafka, ours, consume_ours]
    assert versus(ours, rows, "Kafka 3.9.2") == pytest.approx(0.25)
    assert versus(consume_ours, rows, "Kafka 3.9.2") == pytest.approx(0.25)  # against the consumer's row
    assert versus(kafka, rows, "Kafka 3.9.2") is None
    table = markdown_table(rows, "Kafka 3.9.2").splitlines()
    assert table[0].startswith("| workload | system | tool | records | records/s | MB/s | vs Kafka |")
    assert table[0].endswith(
        "| CPU client | CPU broker 1 | CPU broker 2 | CPU broker 3 | CPU ZooKeeper | CPU total |"
    )
    assert len(table) == 2 + len(rows)
    kafka_cells = [cell.strip() for cell in table[2].strip("|").split("|")]
    assert kafka_cells == [
        "100B-1p-acksall", "Kafka 3.9.2", "ProducerPerformance", "1,000,000", "200,000", "9.54", "-",
        "3.25", "3", "6", "40.5", "4.0", "2.0", "1.0", "1.0", "0.0", "8.0",
    ]  # fmt: skip
    ours_cells = [cell.strip() for cell in table[4].strip("|").split("|")]
    assert ours_cells[6] == "25 %"
    # Brokers 2 and 3 and ZooKeeper were not measured: missing, and so is the total.
    assert ours_cells[11:] == ["8.0", "3.0", "-", "-", "-", "-"]


def test_a_failed_run_is_a_row_marked_failed_and_its_reason_is_listed() -> None:
    failed = Row(workload="idle-acksall", system="actorlog", tool="actorlog perf produce", kind="produce",
                 error="exit code 1: boom")  # fmt: skip
    info = RunInfo(
        date="2026-11-27 20:00 UTC",
        command="python -m ops.bench.vs_kafka --quick",
        machine="2 CPUs",
        software="Python 3.11",
        baseline="Kafka 3.9.2",
        workloads={"idle-acksall": "one at a time"},
        notes=["a note"],
        elapsed_s=42.0,
    )
    rows = [_row("Kafka 3.9.2", "ProducerPerformance", 100.0, workload="idle-acksall"), failed]
    markdown = render_markdown(rows, info)
    assert "## actorlog beside Kafka 3.9.2, 2026-11-27 20:00 UTC" in markdown
    assert "Command: `python -m ops.bench.vs_kafka --quick`" in markdown
    assert "* `idle-acksall`: one at a time" in markdown
    assert "| idle-acksall | actorlog | actorlog perf produce | 0 | failed | - |" in markdown
    assert "* idle-acksall, actorlog, actorlog perf produce: exit code 1: boom" in markdown
    assert "* a note" in markdown
    assert "The whole run took 42 s." in markdown
    document = to_json(rows, info)
    assert document["command"] == info.command
    assert [row["error"] for row in document["rows"]] == [None, "exit code 1: boom"]
    assert document["rows"][0]["cpu_s_per_million_records"] == {
        "client": 4.0, "broker 1": 2.0, "broker 2": 1.0, "broker 3": 1.0, "ZooKeeper": 0.0,
    }  # fmt: skip
    assert document["rows"][0]["cpu_s_per_million_records_total"] == pytest.approx(8.0)
    assert set(document["rows"][0]["cpu_s_per_million_records"]) == set(PROCESSES)


# ----------------------------------------------------------------------------------- workloads


def test_the_workloads_are_the_issues_and_chosen_by_name_or_pattern_in_table_order() -> None:
    assert len(WORKLOADS) == 10
    assert {(w.record_size, w.partitions, w.acks) for w in WORKLOADS.values() if w.rate is None} == {
        (size, partitions, acks) for size in (100, 1024) for partitions in (1, 6) for acks in ("1", "all")
    }
    assert [w.name for w in select_workloads("idle-acksall,100B-1p-*")] == [
        "100B-1p-acks1", "100B-1p-acksall", "idle-acksall",
    ]  # fmt: skip
    assert len(select_workloads("all")) == 10
    assert [w.rate for w in select_workloads("paced-*,idle-*")] == [20_000, 50]
    with pytest.raises(ValueError, match="no workload '2KiB-\\*'; the workloads are 100B-1p-acks1"):
        select_workloads("100B-1p-acks1,2KiB-*")
    with pytest.raises(ValueError, match="no workload chosen"):
        select_workloads(" , ")


def test_sizes_give_1_kib_a_quarter_and_the_idle_workload_its_own_count() -> None:
    assert SIZES.records_for(WORKLOADS["100B-6p-acks1"]) == SIZES.records
    assert SIZES.records_for(WORKLOADS["1KiB-6p-acks1"]) == SIZES.records // 4
    assert SIZES.records_for(WORKLOADS["idle-acksall"]) == SIZES.idle_records
    assert QUICK.records < SIZES.records
    assert "read back by the consumer tool" in SIZES.describe(WORKLOADS["100B-1p-acksall"])
    assert "read back" not in SIZES.describe(WORKLOADS["100B-1p-acks1"])
    paced = WORKLOADS["paced-100B-6p-acksall"]
    assert SIZES.records_for(paced) == SIZES.records // 2
    assert "paced at 20,000 records/s" in SIZES.describe(paced)
    assert "read back" not in SIZES.describe(paced)  # the unpaced 6-partition run reads back already


def test_the_warm_up_is_as_long_as_a_100_b_run_unless_told() -> None:
    parser = build_parser()
    assert _sizes(parser, parser.parse_args([])) == SIZES
    assert SIZES.warmup_records == SIZES.records
    assert _sizes(parser, parser.parse_args(["--quick"])) == QUICK
    chosen = _sizes(parser, parser.parse_args(["--quick", "--records", "5000"]))
    assert (chosen.records, chosen.warmup_records, chosen.idle_records) == (5000, 5000, QUICK.idle_records)
    chosen = _sizes(parser, parser.parse_args(["--records", "5000", "--warmup-records", "0"]))
    assert (chosen.records, chosen.warmup_records) == (5000, 0)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--workloads", "nope"], "no workload 'nope'"),
        (["--clusters", "kafka,redpanda"], "--clusters: one or both of kafka, actorlog"),
        (["--records", "0"], "--records must be at least 1"),
        (["--producer-props", "linger.ms"], "'linger.ms' is not KEY=VALUE"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(
    arguments: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(arguments)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


# ------------------------------------------------------------------------------ a measured run


def _stand_in_tool(tmp_path: Path, stdout: str, *, exit_code: int = 0) -> list[str]:
    script = tmp_path / "tool.py"
    script.write_text(f"import sys\nsys.stdout.write({stdout!r})\nsys.exit({exit_code})\n")
    return [sys.executable, str(script)]


def test_a_measured_producer_run_becomes_a_row_with_its_cpu(tmp_path: Path) -> None:
    argv = _stand_in_tool(tmp_path, KAFKA_PRODUCER_OUTPUT)
    outcome = run_measured(argv, name="Kafka_3.9.2-x-pp", watched={"broker 1": os.getpid()}, timeout_s=60,
                           logs=tmp_path)  # fmt: skip
    assert outcome.returncode == 0
    assert (tmp_path / "Kafka_3.9.2-x-pp.out").read_text() == KAFKA_PRODUCER_OUTPUT
    assert outcome.cpu_s["client"] is not None
    assert outcome.cpu_s["client"] > 0
    assert outcome.cpu_s["broker 1"] is not None
    row = producer_row("100B-1p-acksall", "Kafka 3.9.2", "ProducerPerformance", 2000, outcome)
    assert row.error is None
    assert (row.records, row.records_per_s, row.p99_ms, row.max_ms) == (2000, 1563.721658, 304, 1167.0)
    assert row.cpu_per_million("client") == pytest.approx(outcome.cpu_s["client"] / 2000 * 1e6)
    short = producer_row("100B-1p-acksall", "Kafka 3.9.2", "ProducerPerformance", 3000, outcome)
    assert short.error == "2,000 of 3,000 records acknowledged"


def test_a_failed_or_stuck_tool_is_a_failed_row_saying_why(tmp_path: Path) -> None:
    failing = tmp_path / "failing.py"
    failing.write_text("import sys\nprint('Error: topic gone', file=sys.stderr)\nsys.exit(1)\n")
    outcome = run_measured([sys.executable, str(failing)], name="a", watched={}, timeout_s=60, logs=tmp_path)
    row = consumer_row("100B-1p-acksall", "actorlog", "actorlog perf consume", 10, outcome)
    assert row.error is not None
    assert row.error.startswith("exit code 1: Error: topic gone (output in ")
    outcome = run_measured(
        [sys.executable, "-c", "import select; select.select([], [], [])"],
        name="b",
        watched={},
        timeout_s=1,
        logs=tmp_path,
    )
    assert outcome.returncode is None
    row = producer_row("idle-acksall", "actorlog", "ProducerPerformance", 10, outcome)
    assert row.error is not None
    assert row.error.startswith("timed out (killed)")
    good_consumer = run_measured(_stand_in_tool(tmp_path, KAFKA_CONSUMER_OUTPUT), name="c", watched={},
                                 timeout_s=60, logs=tmp_path)  # fmt: skip
    row = consumer_row("100B-1p-acksall", "Kafka 3.9.2", "ConsumerPerformance", 2000, good_consumer)
    assert row.error is None
    assert row.records_per_s == pytest.approx(17857.1429)
    assert row.avg_ms is None
    more = consumer_row("100B-1p-acksall", "Kafka 3.9.2", "ConsumerPerformance", 2001, good_consumer)
    assert more.error == "2,000 of 2,001 records read"
