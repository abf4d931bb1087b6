"""The checks a produce-loop scenario makes on a partition read back, shared by the in-process
twin (``tests/actors/test_controller_scenarios.py``) and the process test
(``tests/integration/test_controller_processes.py``), so both judge a run the same way."""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping, Sequence


def assert_acknowledged_kept_in_order(
    records: Sequence[tuple[int, bytes | None]],
    acknowledged: Iterable[bytes],
    attempts: Mapping[bytes, int],
) -> None:
    """Every acknowledged value is in ``records`` ((offset, value) as read from the leader); the
    loop is not idempotent, so a value is there at most once per attempt, and since it makes one
    attempt at a time the log keeps the order the values (``record-N``) were written in; offsets
    rise and are unique."""
    values = [value for _, value in records if value is not None]
    assert len(values) == len(records)
    assert [v for v in acknowledged if v not in values] == []
    counts = collections.Counter(values)
    assert {v: n for v, n in counts.items() if n > attempts.get(v, 0)} == {}, "duplicates"
    numbers = [int(v.removeprefix(b"record-")) for v in values]
    assert numbers == sorted(numbers)
    offsets = [offset for offset, _ in records]
    assert offsets == sorted(offsets)
    assert len(offsets) == len(set(offsets))
