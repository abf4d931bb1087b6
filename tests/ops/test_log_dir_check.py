"""A broker whose ``log.dirs`` cannot take a file stops at start with one line naming the directory
(issue 23, item 6), as Kafka's LogManager refuses a log dir it cannot use, instead of starting and
failing at its first checkpoint or append.

The check is a real write (a probe file, created and removed): the tests run as root too, where
permission bits stop nothing and ``os.access`` says yes to ``/proc``, whose every file creation
fails; so the cases here fail for root as well: a regular file where the directory should be, a
path below a regular file, and ``/proc``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from ops.broker_main import check_log_dir
from ops.broker_main import main as broker_main
from ops.properties import ConfigError

BASE = {
    "broker.id": "1",
    "listeners": "HTTP://127.0.0.1:0",
    # Nothing listens on port 1: a broker that got past the check would give up on ZooKeeper
    # after the connection timeout, with exit code 1, not 2.
    "zookeeper.connect": "127.0.0.1:1",
    "zookeeper.connection.timeout.ms": "1000",
    "internal.auth.secret": "s3cret-s3cret-s3cret",
}


def _start(tmp_path: Path, log_dir: str) -> int:
    path = tmp_path / "server.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in {**BASE, "log.dirs": log_dir}.items()))
    return broker_main(["start", "--config", str(path)])


def _unusable_dirs(tmp_path: Path) -> list[str]:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    dirs = [str(a_file), str(a_file / "logs")]
    if sys.platform == "linux" and os.path.isdir("/proc"):
        dirs.append("/proc")  # a directory, "writable" by os.access for root, where no file can be made
    return dirs


def test_a_log_dir_that_cannot_take_a_file_stops_the_start_with_one_line_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for log_dir in _unusable_dirs(tmp_path):
        assert _start(tmp_path, log_dir) == 2, log_dir
        error = capsys.readouterr().err.strip()
        assert error.count("\n") == 0, error
        assert error.startswith(f"actorlog broker: log.dirs: {log_dir} "), error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "server.properties"]


def test_a_missing_log_dir_is_created_and_no_probe_is_left_behind(tmp_path: Path) -> None:
    log_dir = tmp_path / "data" / "logs"
    check_log_dir(str(log_dir))
    assert log_dir.is_dir()
    assert list(log_dir.iterdir()) == []
    with pytest.raises(ConfigError, match=r"^log\.dirs: "):
        check_log_dir(str(tmp_path / "data" / "logs" / "x\0y"))
