"""``actorlog dump-log``: kafka-dump-log.sh-style output, and damage reported without tracebacks."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from ops.cli.dump_log import main
from runtime.storage.compression import CompressionType
from runtime.storage.config import LogConfig
from runtime.storage.log import Log
from runtime.storage.os_fs import OsFileSystem
from runtime.storage.record_builder import SimpleRecord, build_batch
from runtime.storage.records import RecordHeader


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "orders-0"
    log = Log.open(
        OsFileSystem(), str(directory), LogConfig(index_interval_bytes=50), now_ms=0, rng=random.Random(1)
    )
    log.append_as_leader(
        build_batch(
            [
                SimpleRecord(b"first", b"k1", (RecordHeader("trace", b"1"),), 1000),
                SimpleRecord(None, None, (), 1001),
            ],
            producer_id=77,
            producer_epoch=2,
            base_sequence=0,
        ),
        5,
        now_ms=0,
        wall_clock_ms=0,
    )
    log.append_as_leader(
        build_batch([SimpleRecord(b"zipped" * 10, b"k3", (), 1002)], compression=CompressionType.GZIP),
        5,
        now_ms=0,
        wall_clock_ms=0,
    )
    log.append_as_leader(build_batch([SimpleRecord(b"last", None, (), 1003)]), 6, now_ms=0, wall_clock_ms=0)
    log.close(flush=True)
    return directory


SEGMENT = "00000000000000000000"


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    code = main(list(args))
    return code, capsys.readouterr().out.splitlines()


def test_batches_are_printed_like_kafka_dump_log(log_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = _run(capsys, "--files", str(log_dir / f"{SEGMENT}.log"))
    assert code == 0
    assert lines[0] == f"Dumping {log_dir / f'{SEGMENT}.log'}"
    assert lines[1] == "Starting offset: 0"
    assert lines[2].startswith(
        "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: 0 lastSequence: 1 producerId: 77 "
        "producerEpoch: 2 "
        "partitionLeaderEpoch: 5 isTransactional: false isControl: false position: 0 CreateTime: 1001 size: "
    )
    assert lines[2].endswith(
        "magic: 2 compresscodec: NONE crc: " + lines[2].split("crc: ")[1].split()[0] + " isvalid: true"
    )
    assert "compresscodec: GZIP" in lines[3]
    assert "baseOffset: 3 lastOffset: 3" in lines[4]
    assert "partitionLeaderEpoch: 6" in lines[4]
    assert len(lines) == 5  # no record lines without --deep-iteration or --print-data-log


def test_print_data_log_prints_each_record(log_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = _run(capsys, "--files", str(log_dir / f"{SEGMENT}.log"), "--print-data-log")
    assert code == 0
    records = [line for line in lines if line.startswith("| ")]
    assert records == [
        "| offset: 0 CreateTime: 1000 keysize: 2 valuesize: 5 sequence: 0 headerKeys: [trace] "
        "key: k1 payload: first",
        "| offset: 1 CreateTime: 1001 keysize: -1 valuesize: -1 sequence: 1 headerKeys: [] key: "
        "null payload: null",
        "| offset: 2 CreateTime: 1002 keysize: 2 valuesize: 60 sequence: -1 headerKeys: [] key: k3 payload: "
        + "zipped" * 10,
        "| offset: 3 CreateTime: 1003 keysize: -1 valuesize: 4 sequence: -1 headerKeys: [] key: "
        "null payload: last",
    ]


def test_deep_iteration_prints_records_without_data(
    log_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines = _run(capsys, "--files", str(log_dir / f"{SEGMENT}.log"), "--deep-iteration")
    assert code == 0
    records = [line for line in lines if line.startswith("| ")]
    assert len(records) == 4
    assert all("payload" not in line for line in records)


def test_indexes_and_checkpoints_print_their_entries(
    log_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines = _run(
        capsys,
        "--files",
        str(log_dir / f"{SEGMENT}.index"),
        str(log_dir / f"{SEGMENT}.timeindex"),
        str(log_dir / "leader-epoch-checkpoint"),
    )
    assert code == 0
    index_lines = lines[1 : lines.index(f"Dumping {log_dir / f'{SEGMENT}.timeindex'}")]
    assert index_lines
    assert all(line.startswith("offset: ") and " position: " in line for line in index_lines)
    assert "timestamp: 1003 offset: 3" in lines
    assert lines[-2:] == ["5 0", "6 3"]


def test_a_torn_tail_is_reported_with_a_non_zero_exit(
    log_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = log_dir / f"{SEGMENT}.log"
    data = path.read_bytes()
    path.write_bytes(data[:-7])
    code, lines = _run(capsys, "--files", str(path))
    assert code == 1
    assert lines[-1].startswith("Found ")
    assert lines[-1].endswith(f"invalid bytes at the end of {SEGMENT}.log")
    assert sum(line.startswith("baseOffset") for line in lines) == 2


def test_a_bad_crc_prints_isvalid_false(log_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = log_dir / f"{SEGMENT}.log"
    data = bytearray(path.read_bytes())
    data[70] ^= 0x01
    path.write_bytes(bytes(data))
    code, lines = _run(capsys, "--files", str(path), "--print-data-log")
    assert code == 1
    assert "isvalid: false" in lines[2]


def test_garbage_framing_and_missing_files_are_errors_not_tracebacks(
    log_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = log_dir / f"{SEGMENT}.log"
    data = bytearray(path.read_bytes())
    data[8:12] = b"\x00\x00\x00\x05"  # the first batch declares 5 bytes
    path.write_bytes(bytes(data))
    code, lines = _run(capsys, "--files", str(path), str(log_dir / "nope.log"), str(log_dir / "README"))
    assert code == 1
    assert any(
        line.startswith("Error: record batch at byte 0") and "below the minimum" in line for line in lines
    )
    assert f"Error: cannot read {log_dir / 'nope.log'}: No such file or directory" in lines
    assert f"Ignoring unknown file {log_dir / 'README'}" in lines


def test_a_torn_index_entry_is_reported(log_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = log_dir / f"{SEGMENT}.timeindex"
    path.write_bytes(path.read_bytes() + b"\x01\x02\x03")
    code, lines = _run(capsys, "--files", str(path))
    assert code == 1
    assert lines[-1] == f"Found 3 invalid bytes at the end of {SEGMENT}.timeindex (a torn entry)"


def test_runs_as_a_module(log_dir: Path) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "ops.cli.dump_log", "--files", str(log_dir / f"{SEGMENT}.log")],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(__file__).resolve().parents[2],
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    assert "baseOffset: 3 lastOffset: 3" in completed.stdout


def test_odd_file_names_do_not_crash_the_tool(log_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    odd = log_dir / "copy-of-segment.log"
    odd.write_bytes((log_dir / f"{SEGMENT}.log").read_bytes())
    code, lines = _run(capsys, "--files", str(odd), str(log_dir))
    assert lines[1] == "Starting offset: 0"
    assert code == 1
    assert lines[-1] == f"Error: {log_dir} is a directory; pass the segment, index or checkpoint files in it"
