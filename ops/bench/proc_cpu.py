"""CPU seconds of processes, from ``/proc/<pid>/stat``: what a benchmark charges to each process.

A process's CPU time is its ``utime`` + ``stime`` (the 14th and 15th fields of its stat line, in
clock ticks: ``os.sysconf("SC_CLK_TCK")`` per second), every thread of it included. The stat line's
second field is the command name in parentheses and may itself hold spaces or parentheses, so the
fields are counted after its last ``)``.

Long-lived processes (brokers, ZooKeeper) are read before and after a run and charged the
difference (``cpu_used``). A client that runs for the measured run only is charged its whole life,
start-up included (a JVM's start and JIT, Python's imports): ``cpu_at_exit`` waits for it to exit
without reaping it (``waitid`` with ``WNOWAIT``), reads the stat line the exited process still has
(its totals are final then), and only then reaps it, so nothing of it is lost and nothing else
is counted.

A process that is gone (or a platform without ``/proc``) reads as None, never as zero: a figure
that could not be measured is shown as missing.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

__all__ = [
    "cpu_at_exit",
    "cpu_seconds",
    "cpu_ticks",
    "cpu_used",
    "per_million",
    "sample",
    "total_cpu_seconds",
]

_UTIME_AFTER_NAME: Final = 11  # utime is field 14; counted after the name, field 3 (state) is index 0


def cpu_ticks(stat_line: str) -> int:
    """``utime`` + ``stime`` of one ``/proc/<pid>/stat`` line, in clock ticks."""
    head, closing, rest = stat_line.rpartition(")")
    fields = rest.split()
    if not closing or "(" not in head or len(fields) <= _UTIME_AFTER_NAME + 1:
        raise ValueError(f"not a /proc/<pid>/stat line: {stat_line[:120]!r}")
    try:
        return int(fields[_UTIME_AFTER_NAME]) + int(fields[_UTIME_AFTER_NAME + 1])
    except ValueError:
        raise ValueError(f"utime/stime are not numbers in {stat_line[:120]!r}") from None


def cpu_seconds(pid: int, *, proc: Path = Path("/proc")) -> float | None:
    """The process's CPU seconds so far; None when it cannot be read (gone, or no /proc)."""
    try:
        line = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    return cpu_ticks(line) / os.sysconf("SC_CLK_TCK")


def total_cpu_seconds(pids: Iterable[int]) -> float:
    """The CPU seconds of these processes together (one that cannot be read counts 0)."""
    return sum(cpu_seconds(pid) or 0.0 for pid in pids)


def sample(pids: Mapping[str, int], *, proc: Path = Path("/proc")) -> dict[str, float | None]:
    """Label -> CPU seconds so far, for every process named."""
    return {label: cpu_seconds(pid, proc=proc) for label, pid in pids.items()}


def cpu_used(
    before: Mapping[str, float | None], after: Mapping[str, float | None]
) -> dict[str, float | None]:
    """Label -> CPU seconds spent between two samples; None where either sample is missing (a
    process that exited or was replaced in between cannot be charged honestly)."""
    used: dict[str, float | None] = {}
    for label in before.keys() | after.keys():
        start, end = before.get(label), after.get(label)
        used[label] = None if start is None or end is None or end < start else end - start
    return used


def cpu_at_exit(process: subprocess.Popen[bytes]) -> float | None:
    """Wait for ``process`` to exit, read its whole CPU time, then reap it (module docstring).

    Where the exited process's stat cannot be read (no /proc), None; the process is reaped anyway.
    """
    try:
        os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
    except ChildProcessError:
        process.wait()  # already reaped by someone else: its figures are gone
        return None
    seconds = cpu_seconds(process.pid)
    process.wait()
    return seconds


def per_million(seconds: float | None, records: int) -> float | None:
    """CPU seconds per million records; None when either is unknown or there were no records."""
    if seconds is None or records <= 0:
        return None
    return seconds / records * 1_000_000
