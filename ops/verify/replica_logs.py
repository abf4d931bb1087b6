"""A replica's log as its files hold it: every record's offset and value, read straight from the
segment files of ``<log dir>/<topic>-<partition>/`` (the broker stopped first, so nothing moves).

Rules kept here: segments in base-offset order (their file names), ``.log`` files only (a segment
renamed ``.deleted`` is gone for the broker too); a partial batch at a segment's end (a write cut
short by a kill) ends that segment, as log recovery would cut it; CRCs are not checked — the
comparison with the other replicas is the check.
"""

from __future__ import annotations

from pathlib import Path

from actors.common.types import TopicPartition
from runtime.storage.errors import CorruptRecordError
from runtime.storage.records import iterate_batches

__all__ = ["read_replica_log"]


def read_replica_log(log_dir: Path, tp: TopicPartition) -> list[tuple[int, str]]:
    """``[(offset, value), ...]`` in offset order (records with a null value, which a campaign never
    writes, are left out); empty when the broker holds no log for the partition."""
    directory = log_dir / f"{tp.topic}-{tp.partition}"
    if not directory.is_dir():
        return []
    records: list[tuple[int, str]] = []
    for segment in sorted(directory.glob("*.log")):
        data = segment.read_bytes()
        try:
            for batch in iterate_batches(data):
                records.extend(
                    (record.offset, bytes(record.value).decode())
                    for record in batch.records()
                    if record.value is not None
                )
        except CorruptRecordError:
            continue  # the rest of this segment cannot be framed: recovery would cut it here
    return records
