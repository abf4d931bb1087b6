"""Fixtures shared by the storage tests: a log dir on the fake file system and on real files, so a
test of loading or of the log manager runs against both (the fake's contract with the real one)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.storage.fs import FileSystem, MemoryFileSystem
from runtime.storage.os_fs import OsFileSystem


@pytest.fixture(params=["memory", "os"])
def log_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[FileSystem, str]]:
    """(file system, log dir path): in memory, then on a real temporary directory."""
    if request.param == "memory":
        yield MemoryFileSystem(), "/data/kafka-logs"
    else:
        yield OsFileSystem(), str(tmp_path / "kafka-logs")
