"""Which segments retention may delete (Kafka's ``Log.deleteOldSegments`` rules, docs/log.md §9).

Three rules, applied in this order by ``Log.delete_old_segments``, each over the segments left by the
previous one:

* time (only with ``cleanup.policy`` containing ``delete`` and ``retention.ms >= 0``): the segment's
  largest record timestamp (or its file's modification time if it has none) is more than
  ``retention.ms`` older than the wall clock;
* size (same policy, ``retention.bytes >= 0`` and the log at least that big): oldest segments while
  the excess ``size - retention.bytes`` still covers the whole segment;
* log start offset (always): the *next* segment starts at or below the log start offset.

Candidates are taken from the oldest and the first one that does not qualify stops the scan. A
segment qualifies only if everything in it is below the high watermark (its upper bound, the next
segment's base offset or the log end offset, is <= the high watermark), and the last segment never
qualifies while empty.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeAlias

from runtime.storage.segment import LogSegment

__all__ = [
    "SegmentPredicate",
    "deletable_segments",
    "log_start_offset_breached",
    "size_breached",
    "time_breached",
]

SegmentPredicate: TypeAlias = Callable[[LogSegment, LogSegment | None], bool]
"""``(segment, next segment or None) -> may it be deleted``."""


def deletable_segments(
    segments: Sequence[LogSegment], log_end_offset: int, high_watermark: int, predicate: SegmentPredicate
) -> list[LogSegment]:
    deletable: list[LogSegment] = []
    for position, segment in enumerate(segments):
        following = segments[position + 1] if position + 1 < len(segments) else None
        upper_bound = following.base_offset if following is not None else log_end_offset
        last_and_empty = following is None and segment.size == 0
        if high_watermark >= upper_bound and not last_and_empty and predicate(segment, following):
            deletable.append(segment)
        else:
            break
    return deletable


def time_breached(retention_ms: int, wall_clock_ms: int) -> SegmentPredicate:
    return lambda segment, _following: wall_clock_ms - segment.largest_timestamp > retention_ms


def size_breached(log_size_in_bytes: int, retention_bytes: int) -> SegmentPredicate:
    excess = [log_size_in_bytes - retention_bytes]

    def breached(segment: LogSegment, _following: LogSegment | None) -> bool:
        if excess[0] - segment.size >= 0:
            excess[0] -= segment.size
            return True
        return False

    return breached


def log_start_offset_breached(log_start_offset: int) -> SegmentPredicate:
    return lambda _segment, following: following is not None and following.base_offset <= log_start_offset
