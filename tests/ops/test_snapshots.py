"""Snapshot rows, the atomic Parquet writer and its readers (pure Python, no Spark).

Covers: parsing the Prometheus text format into rows (``_created`` dropped, types, labels with
escapes, histograms with ``le``), rows from a registry matching rows from its exposition (a
property test), the file layout, atomic writes (a process killed before the rename leaves only a
``.tmp`` that readers skip), and the command-line value parsers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from ops.rollup.schema import SNAPSHOT_ARROW_SCHEMA, SNAPSHOT_COLUMNS
from ops.snapshots import (
    SnapshotRow,
    parse_bootstrap_servers,
    parse_duration_ms,
    parse_membership,
    read_snapshots,
    rows_from_exposition,
    rows_from_registry,
    snapshot_files,
    snapshot_path,
    write_snapshot,
)

ROOT = Path(__file__).resolve().parents[2]
TS_MS = 1_767_229_261_123  # 2026-01-01T01:01:01.123Z

EXPOSITION = textwrap.dedent(
    """\
    # HELP kafka_server_replicamanager_isrshrinks_total Shrinks.
    # TYPE kafka_server_replicamanager_isrshrinks_total counter
    kafka_server_replicamanager_isrshrinks_total 3.0
    # HELP kafka_server_replicamanager_isrshrinks_created Shrinks.
    # TYPE kafka_server_replicamanager_isrshrinks_created gauge
    kafka_server_replicamanager_isrshrinks_created 1.7e+09
    # HELP kafka_cluster_partition_underreplicated URP.
    # TYPE kafka_cluster_partition_underreplicated gauge
    kafka_cluster_partition_underreplicated{partition="0",topic="a \\"quoted\\" topic"} 1.0
    # HELP kafka_network_request_duration_seconds Latency.
    # TYPE kafka_network_request_duration_seconds histogram
    kafka_network_request_duration_seconds_bucket{le="0.1",request="Produce"} 2.0
    kafka_network_request_duration_seconds_bucket{le="+Inf",request="Produce"} 5.0
    kafka_network_request_duration_seconds_count{request="Produce"} 5.0
    kafka_network_request_duration_seconds_sum{request="Produce"} 1.25
    # HELP kafka_network_request_duration_seconds_created Latency.
    # TYPE kafka_network_request_duration_seconds_created gauge
    kafka_network_request_duration_seconds_created{request="Produce"} 1.7e+09
    some_untyped_metric 7
    """
)


def _row(metric: str, labels: dict[str, str], value: float, type_: str, broker: str = "1") -> SnapshotRow:
    return SnapshotRow(ts_ms=TS_MS, broker=broker, metric=metric, labels=labels, value=value, type=type_)


# --- parsing -----------------------------------------------------------------------------------


def test_exposition_rows_keep_every_sample_with_its_family_type_and_drop_created_series() -> None:
    rows = rows_from_exposition(EXPOSITION, "1", TS_MS)

    histogram = "kafka_network_request_duration_seconds"
    produce = {"request": "Produce"}
    assert sorted(rows, key=lambda r: (r.metric, sorted(r.labels.items()))) == [
        _row(
            "kafka_cluster_partition_underreplicated",
            {"partition": "0", "topic": 'a "quoted" topic'},
            1,
            "gauge",
        ),
        _row(f"{histogram}_bucket", {"le": "+Inf", **produce}, 5.0, "histogram"),
        _row(f"{histogram}_bucket", {"le": "0.1", **produce}, 2.0, "histogram"),
        _row(f"{histogram}_count", produce, 5.0, "histogram"),
        _row(f"{histogram}_sum", produce, 1.25, "histogram"),
        _row("kafka_server_replicamanager_isrshrinks_total", {}, 3.0, "counter"),
        _row("some_untyped_metric", {}, 7.0, "untyped"),
    ]


def test_invalid_exposition_raises_value_error() -> None:
    with pytest.raises(ValueError, match=r"\S"):
        rows_from_exposition('metric{label="unterminated} 1\n', "1", TS_MS)


def test_registry_rows_drop_created_samples_and_keep_the_exposed_names() -> None:
    registry = CollectorRegistry()
    Counter("kafka_server_replicamanager_isrexpands", "Expands.", registry=registry).inc(4)
    histogram = Histogram(
        "kafka_server_isrchangepropagation_delay_seconds", "Delay.", buckets=(5.0,), registry=registry
    )
    histogram.observe(6.0)

    rows = rows_from_registry(registry, "2", TS_MS)

    assert {(r.metric, tuple(sorted(r.labels.items())), r.value, r.type) for r in rows} == {
        ("kafka_server_replicamanager_isrexpands_total", (), 4.0, "counter"),
        ("kafka_server_isrchangepropagation_delay_seconds_bucket", (("le", "5.0"),), 0.0, "histogram"),
        ("kafka_server_isrchangepropagation_delay_seconds_bucket", (("le", "+Inf"),), 1.0, "histogram"),
        ("kafka_server_isrchangepropagation_delay_seconds_count", (), 1.0, "histogram"),
        ("kafka_server_isrchangepropagation_delay_seconds_sum", (), 6.0, "histogram"),
    }
    assert {(r.broker, r.ts_ms) for r in rows} == {("2", TS_MS)}


_label_values = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)


@settings(max_examples=40, deadline=None)
@given(
    labels=st.dictionaries(st.sampled_from(["topic", "partition", "request"]), _label_values, max_size=3),
    counter=st.floats(min_value=0, max_value=1e12, allow_nan=False),
    gauge=st.floats(allow_nan=False, allow_infinity=True, width=64),
)
def test_registry_rows_equal_the_rows_parsed_from_its_exposition(
    labels: dict[str, str], counter: float, gauge: float
) -> None:
    """Property: a broker's own snapshot and a scrape of its /metrics produce the same rows."""
    registry = CollectorRegistry()
    names = sorted(labels)
    counter_metric = Counter("kafka_server_brokertopicmetrics_bytesin", "Bytes.", names, registry=registry)
    gauge_metric = Gauge("kafka_cluster_partition_insyncreplicascount", "ISR.", names, registry=registry)
    (counter_metric.labels(**labels) if names else counter_metric).inc(counter)
    (gauge_metric.labels(**labels) if names else gauge_metric).set(gauge)

    def key(row: SnapshotRow) -> tuple[object, ...]:
        return (row.metric, tuple(sorted(row.labels.items())), row.value, row.type, row.broker, row.ts_ms)

    from_registry = sorted(map(key, rows_from_registry(registry, "1", TS_MS)))
    from_text = sorted(map(key, rows_from_exposition(generate_latest(registry).decode(), "1", TS_MS)))
    assert from_registry == from_text


# --- files --------------------------------------------------------------------------------------


def test_snapshot_path_is_hive_partitioned_by_utc_date_and_hour(tmp_path: Path) -> None:
    assert snapshot_path(tmp_path, "7", TS_MS) == (
        tmp_path / "date=2026-01-01" / "hour=01" / f"7-{TS_MS}.parquet"
    )


def test_written_snapshot_reads_back_as_the_same_rows_in_the_fixed_schema(tmp_path: Path) -> None:
    rows = rows_from_exposition(EXPOSITION, "1", TS_MS)

    path = write_snapshot(rows, tmp_path)

    assert path == snapshot_path(tmp_path, "1", TS_MS)
    on_disk = pq.read_schema(path)
    assert on_disk.names == list(SNAPSHOT_COLUMNS)
    assert on_disk.field("ts").type == pa.timestamp("ms", tz="UTC")
    assert on_disk.field("labels").type.key_type == pa.string()
    assert on_disk.field("labels").type.item_type == pa.string()
    assert [on_disk.field(name).type for name in ("broker", "metric", "value", "type")] == [
        pa.string(),
        pa.string(),
        pa.float64(),
        pa.string(),
    ]
    table = read_snapshots(tmp_path)
    assert table.schema.equals(SNAPSHOT_ARROW_SCHEMA)
    back = {
        (r["metric"], tuple(sorted(r["labels"])), r["value"], r["type"], r["broker"], r["ts"].timestamp())
        for r in table.to_pylist()
    }
    assert back == {
        (r.metric, tuple(sorted(r.labels.items())), r.value, r.type, r.broker, TS_MS / 1000) for r in rows
    }
    assert list(path.parent.iterdir()) == [path]  # no .tmp left behind


def test_write_snapshot_rejects_rows_of_two_brokers_or_none(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="one broker's scrape"):
        write_snapshot([_row("m", {}, 1.0, "gauge", "1"), _row("m", {}, 1.0, "gauge", "2")], tmp_path)
    with pytest.raises(ValueError, match="at least one row"):
        write_snapshot([], tmp_path)


_KILLED_BEFORE_RENAME = """
import os, signal, sys
from pathlib import Path
from ops.snapshots import SnapshotRow, write_snapshot

def die(*_args):
    # The data is written and fsynced; the process dies before the rename makes it visible.
    os.kill(os.getpid(), signal.SIGKILL)

os.replace = die
rows = [
    SnapshotRow(ts_ms={ts}, broker="9", metric="m", labels={{}}, value=float(i), type="gauge")
    for i in range(1000)
]
write_snapshot(rows, Path(sys.argv[1]))
"""


def test_a_writer_killed_before_the_rename_leaves_only_a_tmp_file_that_readers_skip(tmp_path: Path) -> None:
    complete = write_snapshot([_row("m", {}, 1.0, "gauge", "1")], tmp_path)
    process = subprocess.run(
        [sys.executable, "-c", _KILLED_BEFORE_RENAME.format(ts=TS_MS), str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        check=False,
        timeout=60,
    )

    assert process.returncode == -signal.SIGKILL, process.stderr.decode()
    leftovers = list(tmp_path.rglob("*.tmp"))
    assert [p.name for p in leftovers] == [f"9-{TS_MS}.parquet.tmp"]
    assert not snapshot_path(tmp_path, "9", TS_MS).exists()
    assert snapshot_files(tmp_path) == [complete]
    assert read_snapshots(tmp_path).num_rows == 1


def test_readers_skip_a_truncated_tmp_file(tmp_path: Path) -> None:
    complete = write_snapshot([_row("m", {}, 1.0, "gauge", "1")], tmp_path)
    whole = complete.read_bytes()
    torn = complete.with_name(f"2-{TS_MS}.parquet.tmp")
    torn.write_bytes(whole[: len(whole) // 2])

    assert snapshot_files(tmp_path) == [complete]
    assert read_snapshots(tmp_path).column("broker").to_pylist() == ["1"]


def test_importing_the_snapshot_writer_does_not_import_pyspark() -> None:
    probe = "import sys, ops.snapshots; print('pyspark' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert result.stdout.strip() == "False"


# --- command-line values and the membership document ---------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [("250ms", 250), ("10s", 10_000), ("1.5s", 1_500), ("1m", 60_000), ("2h", 7_200_000), (" 5s ", 5_000)],
)
def test_durations_parse_to_milliseconds(text: str, expected: int) -> None:
    assert parse_duration_ms(text) == expected


@pytest.mark.parametrize("text", ["10", "10x", "-1s", "0s", "0.5ms", "", "s"])
def test_bad_durations_are_rejected_with_a_hint(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration_ms(text)


def test_bootstrap_servers_become_base_urls_in_order() -> None:
    assert parse_bootstrap_servers("b:9092, http://a:1/ ,[::1]:8080") == [
        "http://b:9092",
        "http://a:1",
        "http://[::1]:8080",
    ]


def test_a_bare_bootstrap_server_takes_the_clients_scheme_and_a_given_one_must_agree() -> None:
    assert parse_bootstrap_servers("b:9092,https://a:1", tls=True) == ["https://b:9092", "https://a:1"]
    assert parse_bootstrap_servers("https://a:1") == ["https://a:1"]  # the scheme given, when unknown
    with pytest.raises(ValueError, match=r"is https://, but security\.protocol is PLAINTEXT"):
        parse_bootstrap_servers("https://a:1", tls=False)
    with pytest.raises(ValueError, match=r"is http://, but security\.protocol is SSL"):
        parse_bootstrap_servers("b:9092,http://a:1", tls=True)


@pytest.mark.parametrize(
    "text", ["", "host", "host:", ":80", "host:0", "host:99999", "host:http", "ftp://host:21"]
)
def test_bad_bootstrap_servers_are_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="bootstrap server"):
        parse_bootstrap_servers(text)


def test_membership_document_is_validated() -> None:
    membership = parse_membership(
        {
            "cluster_id": "c",
            "controller_id": 2,
            "brokers": [
                {"broker_id": 2, "host": "127.0.0.1", "port": 9002, "rack": None},
                {"broker_id": 1, "host": "127.0.0.1", "port": 9001, "rack": "r1"},
            ],
        }
    )
    assert [b.broker_id for b in membership.brokers] == [1, 2]
    assert membership.brokers[0].metrics_url == "http://127.0.0.1:9001/metrics"
    # Each broker is reached with the scheme of its listener's security protocol.
    secure = parse_membership(
        {
            "cluster_id": "c",
            "controller_id": 1,
            "brokers": [
                {"broker_id": 1, "host": "b1", "port": 9093, "rack": None, "security_protocol": "SSL"}
            ],
        }
    )
    assert secure.brokers[0].metrics_url == "https://b1:9093/metrics"
    with pytest.raises(ValueError, match="security_protocol"):
        parse_membership(
            {
                "cluster_id": None,
                "controller_id": 1,
                "brokers": [{"broker_id": 1, "host": "h", "port": 1, "security_protocol": 3}],
            }
        )
    with pytest.raises(ValueError, match="port"):
        parse_membership({"cluster_id": None, "controller_id": 1, "brokers": [{"broker_id": 1, "host": "h"}]})
    with pytest.raises(ValueError, match="controller_id"):
        parse_membership({"cluster_id": None, "controller_id": "1", "brokers": []})
