"""``actorlog dump-log`` on the index files of an active segment that the storage engine still has
open: its new index entries are in memory, not on disk, and the tool says so in a ``Note:`` line
(exit code 0) instead of printing nothing. Once the segment is closed the entries are on disk and
the note goes away. Segments are written by ``runtime.storage`` on a real temporary directory."""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ops.cli.dump_log import main
from runtime.storage.config import LogConfig
from runtime.storage.log import Log
from runtime.storage.os_fs import OsFileSystem
from runtime.storage.record_builder import SimpleRecord, build_batch

ROOT = Path(__file__).resolve().parents[2]
SEGMENT = "00000000000000000000"
NOTE_TAIL = (
    f"though {SEGMENT}.log goes on to offset {{last}} and the segment was never rolled or closed: "
    "probably the active segment of a running broker, which keeps new index entries in memory until "
    "the segment is flushed or rolls or the broker stops."
)


def _append(log: Log, count: int, first_timestamp: int) -> None:
    for n in range(count):
        # Each batch is larger than index.interval.bytes, so every append after the first adds an
        # index entry (pending in memory until the segment writes it).
        record = SimpleRecord(b"v" * 100, f"k{n}".encode(), (), first_timestamp + n)
        log.append_as_leader(build_batch([record]), 0, now_ms=0, wall_clock_ms=0)


def _open(directory: Path) -> Log:
    config = LogConfig(index_interval_bytes=50)
    return Log.open(OsFileSystem(), str(directory), config, now_ms=0, rng=random.Random(1))


@pytest.fixture
def live_log(tmp_path: Path) -> Iterator[Log]:
    """A log the test leaves open, as a running broker does (closed at teardown)."""
    log = _open(tmp_path / "orders-0")
    try:
        yield log
    finally:
        log.close()


def _dump(capsys: pytest.CaptureFixture[str], *paths: Path) -> tuple[int, list[str]]:
    code = main(["--files", *map(str, paths)])
    return code, capsys.readouterr().out.splitlines()


def test_an_open_segments_pending_index_entries_are_noted(
    live_log: Log, capsys: pytest.CaptureFixture[str]
) -> None:
    _append(live_log, 6, 1000)
    directory = Path(live_log.directory)
    index, time_index = directory / f"{SEGMENT}.index", directory / f"{SEGMENT}.timeindex"
    # The premise: entries exist in memory, none on disk.
    assert live_log.active_segment.offset_index.entries == 5
    assert (index.stat().st_size, time_index.stat().st_size) == (0, 0)

    code, lines = _dump(capsys, index, time_index)
    assert code == 0
    assert lines == [
        f"Dumping {index}",
        f"Note: {SEGMENT}.index holds no entries on disk, " + NOTE_TAIL.format(last=5),
        f"Dumping {time_index}",
        f"Note: {SEGMENT}.timeindex holds no entries on disk, " + NOTE_TAIL.format(last=5),
    ]


def test_entries_written_by_a_flush_are_printed_and_later_ones_noted(
    live_log: Log, capsys: pytest.CaptureFixture[str]
) -> None:
    _append(live_log, 4, 1000)
    live_log.flush(now_ms=0)  # writes the pending entries (offsets 1..3) but does not close
    _append(live_log, 3, 2000)  # offsets 4..6, their entries pending again
    index = Path(live_log.directory) / f"{SEGMENT}.index"
    code, lines = _dump(capsys, index)
    assert code == 0
    assert [line.split(" position:")[0] for line in lines[1:4]] == ["offset: 1", "offset: 2", "offset: 3"]
    assert lines[4:] == [
        f"Note: {SEGMENT}.index holds no entries on disk beyond offset 3, " + NOTE_TAIL.format(last=6)
    ]


def test_a_closed_segment_gets_no_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = _open(tmp_path / "orders-0")
    _append(log, 6, 1000)
    log.close()
    directory = Path(log.directory)
    code, lines = _dump(capsys, directory / f"{SEGMENT}.index", directory / f"{SEGMENT}.timeindex")
    assert code == 0
    assert not [line for line in lines if line.startswith("Note:")]
    assert any(line.startswith("offset: 5 position: ") for line in lines)
    assert lines[-1] == "timestamp: 1005 offset: 5"


def test_a_rolled_segment_gets_no_note_and_the_new_one_does(
    live_log: Log, capsys: pytest.CaptureFixture[str]
) -> None:
    _append(live_log, 3, 1000)
    live_log.roll(now_ms=0)
    _append(live_log, 3, 2000)
    directory = Path(live_log.directory)
    active = "00000000000000000003"
    code, lines = _dump(capsys, directory / f"{SEGMENT}.index", directory / f"{active}.index")
    assert code == 0
    notes = [line for line in lines if line.startswith("Note:")]
    assert notes == [
        f"Note: {active}.index holds no entries on disk, " + NOTE_TAIL.format(last=5).replace(SEGMENT, active)
    ]


def test_the_command_prints_the_note_and_exits_zero(live_log: Log) -> None:
    _append(live_log, 6, 1000)
    index = Path(live_log.directory) / f"{SEGMENT}.index"
    completed = subprocess.run(
        [sys.executable, "-m", "ops", "dump-log", "--files", str(index)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines()[-1].startswith(f"Note: {SEGMENT}.index holds no entries on disk, ")
